"""/locks and /wallets API shape on moto: every success shape and every 4xx, and that a refused
request leaves the tables as they were."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from service.domain import locks as domain
from service.domain.payments import FakeProvider
from service.domain.wallets import Wallets
from service.handlers import locks, wallets
from tests.helpers import proxy_event, scan_all
from turnstile_ddb import codec, lease

LOCK = "/locks/{resource}"


def call_lock(method: str, resource: str, body: Any, **kwargs: Any) -> dict[str, Any]:
    raw = body if isinstance(body, str) or body is None else json.dumps(body)
    event = proxy_event(
        method, LOCK, f"/locks/{resource}", body=raw, params={"resource": resource}, **kwargs
    )
    return locks.handler(event, None)


def body_of(response: dict[str, Any]) -> dict[str, Any]:
    return json.loads(response["body"])


def test_acquire_renew_release_round_trip(moto_ddb, moto_tables):
    # Given no lease on r1
    # When it is acquired, renewed, released and acquired again
    first = call_lock("POST", "r1", {"owner": "a", "ttlSeconds": 30})
    renewed = call_lock("PUT", "r1", {"owner": "a", "fence": 1, "ttlSeconds": 60})
    released = call_lock("DELETE", "r1", {"owner": "a", "fence": 1})
    again = call_lock("POST", "r1", {"owner": "b", "ttlSeconds": 0.1})
    # Then the shapes follow the contract and the fence kept counting across the release
    assert first["statusCode"] == 201
    acquired = body_of(first)
    assert set(acquired) == {"resource", "owner", "fence", "expiresAt"}
    assert (acquired["resource"], acquired["owner"], acquired["fence"]) == ("r1", "a", 1)
    assert renewed["statusCode"] == 200
    assert body_of(renewed)["expiresAt"] > acquired["expiresAt"]
    assert released["statusCode"] == 204 and released["body"] == ""
    assert again["statusCode"] == 201 and body_of(again)["fence"] == 2


def test_acquire_of_a_held_lock_is_409_locked_with_retry_after(moto_ddb, moto_tables):
    # Given a lock held for 30 s
    held = body_of(call_lock("POST", "r2", {"owner": "a", "ttlSeconds": 30}))
    before = scan_all(moto_ddb, moto_tables["leases"])
    # When someone else asks for it
    response = call_lock("POST", "r2", {"owner": "b", "ttlSeconds": 5})
    # Then 409 LOCKED names the holder and its expiry, with a Retry-After, and nothing changed
    assert response["statusCode"] == 409
    body = body_of(response)
    assert body["error"] == "LOCKED" and body["message"]
    assert (body["owner"], body["expiresAt"]) == ("a", held["expiresAt"])
    assert 1 <= int(response["headers"]["Retry-After"]) <= 30
    assert scan_all(moto_ddb, moto_tables["leases"]) == before


def test_acquire_of_a_free_lock_with_a_live_queue_is_409_naming_the_queue_and_its_wait(
    moto_ddb, moto_tables
):
    # Given a free lock (its holder released 1 s ago) with two waiters queued just now, one of
    # which already left, and the queue's recorded turn: 2.5 s between acquisitions
    now = int(time.time() * 1000)
    moto_ddb.put_item(
        TableName=moto_tables["leases"],
        Item=codec.encode_item(
            {
                "resource": "r-queued",
                "owner": "gone",
                "fence": 3,
                "expiresAt": 0,
                "releasedAt": now - 1_000,
                "acquiredAt": now - 2_000,
                "queuedAt": now,
                "tickets": 2,
                "head": 1,
                "left": {1},
                "turnMs": 2_500,
            }
        ),
    )
    before = scan_all(moto_ddb, moto_tables["leases"])
    # When a plain acquisition comes
    response = call_lock("POST", "r-queued", {"owner": "b", "ttlSeconds": 5})
    # Then 409 LOCKED says the lock is free but queued for (one waiter still there), names no
    # holder, and its Retry-After is the queue's turn for that waiter: 3 s, not 1
    assert response["statusCode"] == 409
    body = body_of(response)
    assert body["error"] == "LOCKED" and body["reason"] == "QUEUED" and body["waiting"] == 1
    assert "owner" not in body and "expiresAt" not in body
    assert response["headers"]["Retry-After"] == "3"
    assert scan_all(moto_ddb, moto_tables["leases"]) == before


def test_a_held_lock_is_refused_with_reason_held():
    # Given a refusal for a live holder
    refusal = lease.Held("r", "a", expires_at_ms=10_500, fence=2)
    # When the service maps it
    locked = domain.locked(refusal, now_ms=10_000)
    # Then it names the holder, the reason and the holder's remaining time
    assert locked.details["reason"] == "HELD" and locked.details["owner"] == "a"
    assert locked.details["retryAfterSeconds"] == 1


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("PUT", {"owner": "b", "fence": 1, "ttlSeconds": 5}),
        ("PUT", {"owner": "a", "fence": 2, "ttlSeconds": 5}),
        ("DELETE", {"owner": "b", "fence": 1}),
        ("DELETE", {"owner": "a", "fence": 7}),
    ],
)
def test_renew_or_release_by_a_non_holder_is_409_lock_lost(moto_ddb, moto_tables, method, body):
    # Given a lock held by a with fence 1
    call_lock("POST", "r3", {"owner": "a", "ttlSeconds": 30})
    before = scan_all(moto_ddb, moto_tables["leases"])
    # When another owner, or a wrong fence, renews or releases it
    response = call_lock(method, "r3", body)
    # Then 409 LOCK_LOST, and the lease is untouched
    assert response["statusCode"] == 409
    assert body_of(response)["error"] == "LOCK_LOST"
    assert scan_all(moto_ddb, moto_tables["leases"]) == before


def test_renew_or_release_of_a_lock_that_never_existed_is_409_lock_lost(moto_ddb, moto_tables):
    renew = call_lock("PUT", "nothing", {"owner": "a", "fence": 1, "ttlSeconds": 5})
    release = call_lock("DELETE", "nothing", {"owner": "a", "fence": 1})
    assert [renew["statusCode"], release["statusCode"]] == [409, 409]
    assert scan_all(moto_ddb, moto_tables["leases"]) == []


@pytest.mark.parametrize(
    ("method", "body", "code"),
    [
        ("POST", {"owner": "a", "ttlSeconds": 0.05}, "VALIDATION_ERROR"),
        ("POST", {"owner": "a", "ttlSeconds": 3601}, "VALIDATION_ERROR"),
        ("POST", {"owner": "a", "ttlSeconds": "5"}, "VALIDATION_ERROR"),
        ("POST", {"owner": "a", "ttlSeconds": True}, "VALIDATION_ERROR"),
        ("POST", {"owner": "", "ttlSeconds": 5}, "VALIDATION_ERROR"),
        ("POST", {"owner": 5, "ttlSeconds": 5}, "VALIDATION_ERROR"),
        ("POST", {"owner": None, "ttlSeconds": 5}, "VALIDATION_ERROR"),  # left out: the caller
        ("POST", {"owner": "a", "ttlSeconds": 5, "extra": 1}, "VALIDATION_ERROR"),
        ("POST", "{not json", "BAD_JSON"),
        ("POST", "NaN", "BAD_JSON"),
        ("POST", None, "BAD_JSON"),
        ("PUT", {"owner": "a", "fence": 1.5, "ttlSeconds": 5}, "VALIDATION_ERROR"),
        ("PUT", {"owner": "a", "fence": 0, "ttlSeconds": 5}, "VALIDATION_ERROR"),
        ("PUT", {"owner": "a", "fence": 1}, "VALIDATION_ERROR"),
        ("DELETE", {"owner": "a"}, "VALIDATION_ERROR"),
        ("DELETE", {"owner": "a", "fence": "1"}, "VALIDATION_ERROR"),
        ("DELETE", None, "BAD_JSON"),
    ],
)
def test_bad_lock_requests_are_400_and_write_nothing(moto_ddb, moto_tables, method, body, code):
    # Given a lock held by a (so a wrongly accepted request would change it)
    call_lock("POST", "r4", {"owner": "a", "ttlSeconds": 30})
    before = scan_all(moto_ddb, moto_tables["leases"])
    # When a malformed request arrives
    response = call_lock(method, "r4", body)
    # Then it is a 400 in the contract's shape and nothing changed
    assert response["statusCode"] == 400
    assert body_of(response)["error"] == code and body_of(response)["message"]
    assert scan_all(moto_ddb, moto_tables["leases"]) == before


def test_wrong_content_type_and_bad_resource_are_refused(moto_ddb, moto_tables):
    wrong_type = call_lock(
        "POST", "r5", {"owner": "a", "ttlSeconds": 5}, headers={"Content-Type": "text/plain"}
    )
    bad_name = call_lock("POST", "wallet%2Fx", {"owner": "a", "ttlSeconds": 5})
    assert wrong_type["statusCode"] == 415
    assert bad_name["statusCode"] == 400
    assert scan_all(moto_ddb, moto_tables["leases"]) == []


# -- wallets -------------------------------------------------------------------------------


def top_up(wallet_id: str, body: Any) -> dict[str, Any]:
    raw = body if isinstance(body, str) else json.dumps(body)
    event = proxy_event(
        "POST",
        "/wallets/{walletId}/top-ups",
        f"/wallets/{wallet_id}/top-ups",
        body=raw,
        params={"walletId": wallet_id},
    )
    return wallets.handler(event, None)


def get_wallet(wallet_id: str) -> dict[str, Any]:
    event = proxy_event(
        "GET", "/wallets/{walletId}", f"/wallets/{wallet_id}", params={"walletId": wallet_id}
    )
    return wallets.handler(event, None)


@pytest.fixture
def provider(moto_ddb: Any, moto_tables: Any) -> FakeProvider:
    fake = FakeProvider()
    wallets.provider.set(fake)
    wallets.wallets.set(None)
    return fake


def test_top_up_then_read(moto_ddb, moto_tables, provider):
    # When a wallet is topped up twice and read
    first = top_up("w1", {"amount": 250})
    second = top_up("w1", {"amount": 50})
    read = get_wallet("w1")
    # Then the receipts, the balance and the provider's record agree
    assert first["statusCode"] == 201 and second["statusCode"] == 201
    receipt = body_of(second)
    assert set(receipt) == {"topUpId", "walletId", "amount", "balance", "fence", "chargeId"}
    assert (receipt["balance"], receipt["fence"]) == (300, 2)
    assert body_of(read) == {"walletId": "w1", "balance": 300, "topUps": 2, "owner": "test-admin"}
    assert [c.amount for c in provider.calls("charge")] == [250, 50]


@pytest.mark.parametrize(
    "body", [{"amount": 0}, {"amount": -5}, {"amount": 1.5}, {"amount": 1_000_001}, {}, "[]"]
)
def test_bad_top_ups_are_400_charge_nothing_write_nothing(moto_ddb, moto_tables, provider, body):
    response = top_up("w2", body)
    assert response["statusCode"] == 400
    assert body_of(response)["error"] == "VALIDATION_ERROR"
    assert provider.calls() == []
    assert scan_all(moto_ddb, moto_tables["wallets"]) == []
    assert scan_all(moto_ddb, moto_tables["leases"]) == []


def test_top_up_of_a_held_wallet_is_409_locked_and_charges_nothing(moto_ddb, moto_tables, provider):
    # Given the wallet's lease is held, and top-ups may not wait
    service = Wallets(
        client=moto_ddb,
        table=moto_tables["wallets"],
        leases=domain.leases(moto_ddb, moto_tables["leases"]),
        provider=provider,
        wait_ms=0,
    )
    wallets.wallets.set(service)
    service.leases.acquire("wallet/w3", "other", 30_000)
    before = scan_all(moto_ddb, moto_tables["leases"])
    # When a top-up arrives
    response = top_up("w3", {"amount": 10})
    # Then 409 LOCKED with Retry-After; no charge, no wallet, the lease untouched
    assert response["statusCode"] == 409
    assert body_of(response)["error"] == "LOCKED" and "Retry-After" in response["headers"]
    assert provider.calls() == []
    assert scan_all(moto_ddb, moto_tables["wallets"]) == []
    assert scan_all(moto_ddb, moto_tables["leases"]) == before


def test_provider_failure_is_502_writes_nothing_and_frees_the_wallet(moto_ddb, moto_tables):
    # Given a provider that declines
    wallets.provider.set(FakeProvider(fail=lambda *_: True))
    wallets.wallets.set(None)
    # When a top-up arrives
    response = top_up("w4", {"amount": 10})
    # Then 502 PAYMENT_FAILED, no wallet written, and the lease was released on the way out
    assert response["statusCode"] == 502
    assert body_of(response)["error"] == "PAYMENT_FAILED"
    assert scan_all(moto_ddb, moto_tables["wallets"]) == []
    (lease_item,) = scan_all(moto_ddb, moto_tables["leases"])
    assert lease_item["expiresAt"] == {"N": "0"} and "releasedAt" in lease_item


def test_unknown_wallet_is_404(moto_ddb, moto_tables, provider):
    response = get_wallet("nobody")
    assert response["statusCode"] == 404
    assert body_of(response)["error"] == "NOT_FOUND"


class _Context:
    def __init__(self, remaining: int) -> None:
        self.remaining = remaining

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining


def test_top_up_lease_never_outlives_the_invocation(moto_ddb, moto_tables, provider):
    # Given an invocation with 2 s left (the configured wallet lease is longer)
    seen: list[int] = []
    service = Wallets(
        client=moto_ddb,
        table=moto_tables["wallets"],
        leases=domain.leases(moto_ddb, moto_tables["leases"]),
        provider=provider,
    )
    acquire = service.leases.acquire

    def spy(*args: Any, **kwargs: Any) -> Any:
        held = acquire(*args, **kwargs)
        seen.append(held.expires_at_ms - held.acquired_at)
        return held

    service.leases.acquire = spy  # type: ignore[method-assign]
    wallets.wallets.set(service)
    event = proxy_event(
        "POST",
        "/wallets/{walletId}/top-ups",
        "/wallets/w5/top-ups",
        body=json.dumps({"amount": 1}),
        params={"walletId": "w5"},
    )
    # When a top-up runs in it
    response = wallets.handler(event, _Context(2_000))
    # Then the lease was capped to end a safety margin before the invocation does
    assert response["statusCode"] == 201
    assert seen == [2_000 - service.leases.safety_margin_ms]


# -- waitMs: queued acquisition (turnstile_ddb.lease_queue)
# ------------------------------------------


class Context:
    """A Lambda context with ``left_ms`` of the invocation remaining."""

    function_name = "locks"
    aws_request_id = "req-1"

    def __init__(self, left_ms: int) -> None:
        self.left_ms = left_ms
        self.asked = 0

    def get_remaining_time_in_millis(self) -> int:
        self.asked += 1
        return self.left_ms


def call_lock_in(context: Any, resource: str, body: Any) -> dict[str, Any]:
    event = proxy_event(
        "POST", LOCK, f"/locks/{resource}", body=json.dumps(body), params={"resource": resource}
    )
    return locks.handler(event, context)


def test_acquire_with_wait_ms_on_a_free_lock_is_201_with_fence_and_ticket(moto_ddb, moto_tables):
    # Given no lease on q1
    # When it is acquired with waitMs
    response = call_lock("POST", "q1", {"owner": "a", "ttlSeconds": 30, "waitMs": 1000})
    # Then 201 with the fence, and the ticket it was served on; no waiter row is left behind
    assert response["statusCode"] == 201
    body = body_of(response)
    assert (body["owner"], body["fence"], body["ticket"]) == ("a", 1, 1)
    keys = {item["resource"]["S"] for item in scan_all(moto_ddb, moto_tables["leases"])}
    assert keys == {"q1"}
    # And a plain acquisition after its release continues the same fence
    call_lock("DELETE", "q1", {"owner": "a", "fence": 1})
    assert body_of(call_lock("POST", "q1", {"owner": "b", "ttlSeconds": 5}))["fence"] == 2


def test_acquire_with_wait_ms_of_a_held_lock_is_409_with_the_queue_position(moto_ddb, moto_tables):
    # Given a lock held for 30 s
    held = body_of(call_lock("POST", "q2", {"owner": "a", "ttlSeconds": 30}))
    # When someone else waits 150 ms for it
    response = call_lock("POST", "q2", {"owner": "b", "ttlSeconds": 5, "waitMs": 150})
    # Then 409 LOCKED names the holder and the caller's place (next in line), with a Retry-After
    assert response["statusCode"] == 409
    body = body_of(response)
    assert body["error"] == "LOCKED"
    assert (body["owner"], body["expiresAt"], body["queuePosition"]) == ("a", held["expiresAt"], 0)
    assert 1 <= int(response["headers"]["Retry-After"]) <= 30
    # And it left the queue: its row is a tombstone the next waiter passes over at once
    rows = [
        item
        for item in scan_all(moto_ddb, moto_tables["leases"])
        if item["resource"]["S"].startswith("q2#q#")
    ]
    assert [row["expiresAt"]["N"] for row in rows] == ["0"]


def test_a_wait_never_outlives_the_invocation(moto_ddb, moto_tables):
    # Given a lock held for 30 s, and an invocation with 1.2 s left (the margin is 1 s)
    call_lock("POST", "q3", {"owner": "a", "ttlSeconds": 30})
    # When a caller asks to wait 20 s
    context = Context(1_200)
    response = call_lock_in(context, "q3", {"owner": "b", "ttlSeconds": 5, "waitMs": 20000})
    # Then it is answered 409 within the invocation (the wait was cut to 0.2 s), not timed out
    assert response["statusCode"] == 409 and body_of(response)["queuePosition"] == 0
    assert context.asked >= 1  # the deadline came from the invocation's remaining time


@pytest.mark.parametrize("wait", [-1, 20001, 1.5, "100", None, True])
def test_wait_ms_out_of_range_or_of_the_wrong_type_is_400_and_writes_nothing(
    moto_ddb, moto_tables, wait
):
    before = scan_all(moto_ddb, moto_tables["leases"])
    response = call_lock("POST", "q4", {"owner": "a", "ttlSeconds": 5, "waitMs": wait})
    assert response["statusCode"] == 400
    assert body_of(response)["error"] == "VALIDATION_ERROR"
    assert scan_all(moto_ddb, moto_tables["leases"]) == before


def test_a_queued_lock_lasts_the_ttl_asked_not_the_invocations_remaining_time(
    moto_ddb, moto_tables
):
    # Given an invocation with 25 s left (the function's timeout)
    context = Context(25_000)
    before_ms = int(time.time() * 1000)
    # When a caller queues for a free lock and asks for an hour
    response = call_lock_in(context, "q6", {"owner": "a", "ttlSeconds": 3600, "waitMs": 1000})
    # Then the lease granted lasts the hour asked: the invocation bounds the wait, not the lease
    assert response["statusCode"] == 201
    assert body_of(response)["expiresAt"] >= before_ms + 3_600_000
    stored = scan_all(moto_ddb, moto_tables["leases"])
    assert [int(item["expiresAt"]["N"]) for item in stored] == [body_of(response)["expiresAt"]]
    assert context.asked >= 1  # the wait's deadline still came from the invocation
