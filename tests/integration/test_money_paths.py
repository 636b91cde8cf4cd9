"""Money and retry paths, and replays that repeat the first answer exactly, through the handlers.

Each test reproduces one defect an adversarial audit found; the invariant checked is the chaos
nemesis's: wallet balance = accepted top-ups, exactly one charge per credit, one effect per key.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from service import runtime
from service.domain import locks
from service.domain.payments import FakeProvider
from service.domain.products import Products
from service.domain.wallets import Wallets
from service.handlers import events, inventory, products, wallets
from tests.helpers import (
    Clock,
    Faults,
    balance,
    invoke,
    keyed_post,
    proxy_event,
    purchase,
    stock_of,
    top_up,
)
from turnstile_ddb import idempotency, lease, metrics, retry


def counted(pattern: str, name: str) -> float:
    return metrics.tally.get(pattern, name)


def counted_anywhere(name: str) -> float:
    """``name`` summed over every pattern (a retry counts under its caller's pattern)."""
    return sum(value for (_, each), value in metrics.tally.snapshot().items() if each == name)


def records_of(ddb: Any, tables: Any, key: str) -> list[dict[str, Any]]:
    """Every idempotency record stored for the client key ``key`` (whatever its scope)."""
    response = ddb.scan(
        TableName=tables["idempotency"],
        ConsistentRead=True,
        FilterExpression="contains(#id, :key)",
        ExpressionAttributeNames={"#id": "id"},
        ExpressionAttributeValues={":key": {"S": f"#{key}"}},
    )
    return list(response["Items"])


def expire_records(ddb: Any, tables: Any, key: str) -> None:
    """What TTL does to a key's record after IDEMPOTENCY_KEEP_SECONDS."""
    records = records_of(ddb, tables, key)
    assert records, "the first request stored nothing to expire"
    for record in records:
        ddb.delete_item(TableName=tables["idempotency"], Key={"id": record["id"]})


def net_charged(provider: FakeProvider) -> int:
    charged = sum(call.amount for call in provider.calls("charge"))
    return charged - sum(call.amount for call in provider.calls("refund"))


def fast_wallets(ddb: Any, tables: Any, provider: FakeProvider, **settings: Any) -> Wallets:
    """The handler's wallets, with leases/clock/wait overridden for a deterministic test."""
    service = Wallets(
        client=ddb,
        table=tables["wallets"],
        leases=settings.pop("leases", locks.leases(ddb, tables["leases"])),
        provider=provider,
        idempotency=runtime.idempotency.get(),
        **settings,
    )
    wallets.provider.set(provider)
    wallets.wallets.set(service)
    return service


# -- 13.1: a charge is credited once, even after its key's record is gone


def test_a_charge_is_credited_once_even_after_its_key_record_expired(wired, ddb, tables, unique):
    # Given a keyed top-up that charged and credited
    provider = FakeProvider()
    fast_wallets(ddb, tables, provider)
    key = f"exp-{unique}"
    first = invoke(wallets.handler, top_up(unique, 40, key))
    assert first[0] == 201
    # When the key's record expires (TTL) and the client resends the same request
    expire_records(ddb, tables, key)
    again = invoke(wallets.handler, top_up(unique, 40, key))
    # Then the provider's first charge comes back and is not credited a second time
    assert again[0] == 201 and again[2]["chargeId"] == first[2]["chargeId"]
    assert len(provider.calls("charge")) == 1
    assert balance(unique) == 40 == net_charged(provider)


def test_another_amount_under_an_expired_key_is_its_own_charge(wired, ddb, tables, unique):
    # Given a keyed top-up of 40 whose record then expired
    provider = FakeProvider()
    fast_wallets(ddb, tables, provider)
    key = f"amt-{unique}"
    first = invoke(wallets.handler, top_up(unique, 40, key))
    expire_records(ddb, tables, key)
    # When the same key is sent with 5000
    second = invoke(wallets.handler, top_up(unique, 5000, key))
    # Then 5000 is charged for real (never credited under the 40's charge)
    assert second[0] == 201 and second[2]["chargeId"] != first[2]["chargeId"]
    assert sorted(call.amount for call in provider.calls("charge")) == [40, 5000]
    assert balance(unique) == 5040 == net_charged(provider)


# -- 13.2: a late first attempt never refunds the charge its retry committed


def test_a_late_first_attempt_does_not_refund_the_charge_its_retry_committed(
    wired, ddb, tables, unique
):
    # Given one clock for claims and leases, and a provider that stalls the first charge
    clock = Clock(7_000_000.0)
    runtime.idempotency.set(
        idempotency.IdempotencyStore(
            client=ddb,
            table=tables["idempotency"],
            clock=clock,
        )
    )
    stalled, resume = threading.Event(), threading.Event()
    first_call = threading.Lock()

    def stall_first(wallet_id: str, amount: int, reference: str) -> None:
        if first_call.acquire(blocking=False):
            stalled.set()
            resume.wait(20)

    provider = FakeProvider(before_charge=stall_first)
    fast_wallets(
        ddb,
        tables,
        provider,
        leases=lease.Leases(client=ddb, table=tables["leases"], clock=clock),
        wait_ms=0,
    )
    key = f"late-{unique}"
    refusals = counted("wallets", "RefundRefused")
    with ThreadPoolExecutor(1) as pool:
        # When the first attempt is paused inside the provider past its claim and its lease
        late = pool.submit(invoke, wallets.handler, top_up(unique, 70, key))
        assert stalled.wait(20)
        clock.now += 120
        # And the client's retry takes the claim over, charges under the key and commits
        retried = invoke(wallets.handler, top_up(unique, 70, key))
        resume.set()
        first = late.result(30)
    # Then the first attempt, handed the same charge, does not refund what the retry credited
    assert retried[0] == 201
    assert provider.calls("refund") == []
    assert (first[0], first[2]["chargeId"]) == (201, retried[2]["chargeId"])
    assert balance(unique) == 70 == net_charged(provider)
    assert (
        counted("wallets", "RefundRefused") == refusals + 1
    )  # contention is counted, never hidden


# -- 13.3: a resent transaction that may have landed is OUTCOME_UNKNOWN, and keeps its claim


def create_event(event_id: str, capacity: int = 5) -> None:
    body = json.dumps({"eventId": event_id, "name": "E", "capacity": capacity})
    status, _, _ = invoke(events.handler, proxy_event("POST", "/events", "/events", body=body))
    assert status == 201


def register(event_id: str, user_id: str, key: str | None) -> dict[str, Any]:
    return keyed_post(
        "/events/{eventId}/registrations", {"eventId": event_id}, {"userId": user_id}, key
    )


def registered(event_id: str) -> int:
    status, _, body = invoke(
        events.handler,
        proxy_event(
            "GET", "/events/{eventId}", f"/events/{event_id}", params={"eventId": event_id}
        ),
    )
    assert status == 200
    return int(body["registered"])


def test_an_applied_transaction_whose_resends_are_throttled_is_outcome_unknown(
    wired, ddb, dynamodb_local, unique
):
    create_event(unique)
    # Given the registration's transaction is applied but its reply lost, and every resend throttled
    client = dynamodb_local.client(config=retry.client_config())
    faults = Faults(client)
    faults.lose_reply("TransactWriteItems", 1)
    faults.throttle("TransactWriteItems", 100)
    wired(client)
    unknown = counted_anywhere("OutcomeUnknown")
    # When a keyed registration runs
    status, _, body = invoke(events.handler, register(unique, "u1", key=f"reg-{unique}"))
    # Then the client is not told "nothing was applied": it was
    assert (status, body["error"]) == (503, "OUTCOME_UNKNOWN")
    assert counted_anywhere("OutcomeUnknown") == unknown + 1
    wired(ddb)
    assert registered(unique) == 1
    # And the key stays claimed: its retry is told to wait, not ALREADY_REGISTERED for its own seat
    status, _, body = invoke(events.handler, register(unique, "u1", key=f"reg-{unique}"))
    assert (status, body["error"]) == (409, "IDEMPOTENCY_IN_PROGRESS")


def test_retry_call_reports_a_maybe_applied_attempt_as_outcome_unknown():
    from botocore.exceptions import ClientError, ReadTimeoutError

    answers: list[BaseException] = [ReadTimeoutError(endpoint_url="x")] + [
        ClientError({"Error": {"Code": "ThrottlingException"}}, "TransactWriteItems")
    ] * 3

    def send() -> None:
        raise answers.pop(0)

    backoff = retry.Backoff(attempts=4, sleep=lambda _: None)
    try:
        retry.call(send, backoff=backoff, idempotent=True)
    except retry.OutcomeUnknown:
        pass
    else:  # RetriesExhausted would promise "nothing was applied"
        raise AssertionError("expected OutcomeUnknown")


# -- 13.4: temporary refusals are not a key's final answer


def test_a_locked_top_up_is_not_stored_and_its_retry_runs(wired, ddb, tables, unique):
    # Given a wallet whose lease someone else holds, and top-ups that do not wait for it
    provider = FakeProvider()
    fast_wallets(ddb, tables, provider, wait_ms=0)
    leases = locks.leases(ddb, tables["leases"])
    holder = leases.acquire(f"wallet/{unique}", "someone-else", 60_000)
    key = f"lock-{unique}"
    released = counted("idempotency", "ClaimReleased")
    refused = invoke(wallets.handler, top_up(unique, 15, key))
    assert (refused[0], refused[2]["error"]) == (409, "LOCKED") and "Retry-After" in refused[1]
    assert counted("idempotency", "ClaimReleased") == released + 1
    # When the holder lets go and the client retries with the same key
    leases.release(holder)
    again = invoke(wallets.handler, top_up(unique, 15, key))
    # Then the retry runs (LOCKED was temporary), charged and credited once
    assert again[0] == 201 and "Idempotent-Replayed" not in again[1]
    assert balance(unique) == 15 == net_charged(provider)


# -- 13.5: a rejected request leaves nothing behind


def test_keyed_404s_leave_no_idempotency_record(wired, ddb, tables, unique):
    product_key, event_key = f"p404-{unique}", f"e404-{unique}"
    status, _, _ = invoke(products.handler, purchase(unique, {"quantity": 1}, key=product_key))
    assert status == 404
    status, _, _ = invoke(events.handler, register(unique, "u1", key=event_key))
    assert status == 404
    assert records_of(ddb, tables, product_key) == []
    assert records_of(ddb, tables, event_key) == []


# -- 13.6: a key on a route that does not take one is refused


def test_an_idempotency_key_on_a_reservation_is_400_and_holds_nothing(wired, unique):
    created = proxy_event(
        "POST", "/inventory", "/inventory", body=json.dumps({"sku": unique, "units": 10})
    )
    assert invoke(inventory.handler, created)[0] == 201
    reserve = proxy_event(
        "POST",
        "/inventory/{sku}/reservations",
        f"/inventory/{unique}/reservations",
        body=json.dumps({"quantity": 2}),
        headers={"Content-Type": "application/json", "Idempotency-Key": f"r-{unique}"},
        params={"sku": unique},
    )
    answers = [invoke(inventory.handler, reserve) for _ in range(2)]
    assert [(s, b["error"]) for s, _, b in answers] == [(400, "BAD_REQUEST")] * 2
    status, _, exact = invoke(
        inventory.handler,
        proxy_event(
            "GET", "/inventory/{sku}/exact", f"/inventory/{unique}/exact", params={"sku": unique}
        ),
    )
    assert status == 200 and exact["reserved"] == 0 and exact["available"] == 10


# -- a replay is the first answer, headers included


def test_a_replayed_create_repeats_location_and_etag(wired, unique):
    event = proxy_event(
        "POST",
        "/products",
        "/products",
        body=json.dumps({"productId": unique, "name": "P", "stock": 3}),
        headers={"Content-Type": "application/json", "Idempotency-Key": f"h-{unique}"},
    )
    first, second = invoke(products.handler, event), invoke(products.handler, event)
    assert first[0] == second[0] == 201 and second[2] == first[2]
    assert second[1]["Idempotent-Replayed"] == "true"
    assert second[1]["Location"] == first[1]["Location"] == f"/products/{unique}"
    assert second[1]["ETag"] == first[1]["ETag"] == '"1"'


def test_replayed_purchase_and_top_up_repeat_their_headers(wired, ddb, tables, unique):
    # Both commit their answer inside the domain transaction, headers included
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    buy = purchase(unique, {"quantity": 1}, key=f"hp-{unique}")
    first, second = invoke(products.handler, buy), invoke(products.handler, buy)
    assert second[1]["ETag"] == first[1]["ETag"] == '"2"'
    fast_wallets(ddb, tables, FakeProvider())
    pay = top_up(unique, 5, key=f"hw-{unique}")
    first, second = invoke(wallets.handler, pay), invoke(wallets.handler, pay)
    assert second[1]["Location"] == first[1]["Location"] == f"/wallets/{unique}"
    assert second[1]["Idempotent-Replayed"] == "true"


def test_a_throttled_request_whose_key_release_is_throttled_too_is_503(
    wired, ddb, tables, dynamodb_local, unique
):
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    # Given the claim can be written but the purchase's read and the claim's release are throttled
    client = dynamodb_local.client(config=retry.client_config())
    faults = Faults(client)
    faults.throttle("GetItem", 100)
    faults.throttle("DeleteItem", 100)
    wired(client)
    failed = counted("idempotency", "ClaimReleaseFailed")
    status, headers, body = invoke(
        products.handler, purchase(unique, {"quantity": 1}, key=f"dbl-{unique}")
    )
    # Then an outage answer with a retry time (the claim lapses by then), never a 500
    assert (status, body["error"]) == (503, "THROTTLED")
    assert int(headers["Retry-After"]) >= 1
    assert counted("idempotency", "ClaimReleaseFailed") == failed + 1
    wired(ddb)
    assert stock_of(ddb, tables, unique) == (5, 1)
