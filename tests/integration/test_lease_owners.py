"""Which acquisition a lease item records, and what a release may still change.

Over HTTP a lease's owner is the caller's identity, shared by all of one user's concurrent
requests: the fence tells two of their leases apart, and the acquisition id the item records tells
a request whose reply was lost whether its write was the one applied. Faults DynamoDB Local never
produces (a lost reply) are injected with a botocore hook on a client of the test's own. A client
may also resend ``DELETE`` on a lease it already released; the queue reads ``releasedAt`` as the
moment the lease came free, so only a live lease's release may write it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from botocore.exceptions import ReadTimeoutError

from local.dynamodb_local import DynamoDBLocal
from service.domain import locks as domain
from service.domain.errors import Locked
from tests.helpers import Clock, item
from turnstile_ddb import lease, retry
from turnstile_ddb.lease_queue import LeaseQueue, QueueSettings

SETTINGS = QueueSettings(heartbeat_ms=100, expiry_ms=300, poll_ms=20, margin_ms=100)


@pytest.fixture
def faulty(dynamodb_local: DynamoDBLocal) -> Iterator[Any]:
    """A client of its own (hooks stay off the session's shared one)."""
    client = dynamodb_local.client(config=retry.client_config())
    yield client
    client.close()


def lose_reply_of(
    client: Any, operation: str, nth: int, meanwhile: Callable[[], None], *, applied: bool = True
) -> None:
    """Send the ``nth`` call of ``operation`` for real (not if ``applied`` is False: the request
    itself was lost), run ``meanwhile`` on another thread to its end, then raise a read timeout as
    if the reply had been lost on the way back."""
    seen = [0]

    def hook(request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        name = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        if name != operation:
            return
        seen[0] += 1
        if seen[0] != nth:
            return
        if applied:
            requests.post(request.url, data=request.body, headers=dict(request.headers), timeout=10)
        other = threading.Thread(target=meanwhile)
        other.start()
        other.join()
        raise ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register("before-send.dynamodb", hook, unique_id=uuid.uuid4().hex)


def one_users_two_requests(
    faulty: Any, ddb: Any, table: str, start: float
) -> tuple[Clock, domain.Locks, domain.Locks]:
    """A stopped clock, request A's locks (on the faulty client) and request B's."""
    clock, monotonic = Clock(start), [0.0]
    return clock, locks_on(faulty, table, clock, monotonic), locks_on(ddb, table, clock, monotonic)


def locks_on(client: Any, table: str, clock: Clock, monotonic: list[float]) -> domain.Locks:
    """The service's locks on ``client``, with a clock and sleeps the test moves by hand."""

    def nap(seconds: float) -> None:
        clock.now += seconds
        monotonic[0] += seconds

    leases = lease.Leases(client=client, table=table, clock=clock, backoff=retry.Backoff())
    waiting = LeaseQueue(leases, SETTINGS, sleep=nap, monotonic=lambda: monotonic[0])
    return domain.Locks(leases, waiting)


def request_a(a_side: domain.Locks, resource: str) -> dict[str, Any] | Locked:
    """Request A: queue for ``resource`` as alice (one-second lease, 2 s wait)."""
    try:
        return a_side.acquire(resource, "alice", 1, wait_ms=2_000)
    except Locked as refused:
        return refused


def assert_not_handed(a_answer: dict[str, Any] | Locked, b_fence: int) -> None:
    """A is told the lock is held, or holds a fence of its own: never B's."""
    assert isinstance(a_answer, Locked) or a_answer["fence"] != b_fence, (
        f"both requests hold fence {b_fence}"
    )


def test_two_requests_of_one_user_are_never_handed_the_same_fence_after_a_lost_claim_reply(
    faulty, ddb, tables, unique
):
    # Given two concurrent requests of one user: request A queues for a free lock (waitMs) with
    # a one-second lease, and its claim is applied but the reply lost; while A's claim is in
    # doubt its lease runs out and request B, same user, takes the lock plainly
    table, resource = tables["leases"], f"same-user-{unique}"
    clock, a_side, b_side = one_users_two_requests(faulty, ddb, table, 8_400_000.0)
    answers: dict[str, Any] = {}

    def request_b() -> None:
        clock.now += 5  # A's one-second lease is over
        answers["B"] = b_side.acquire(resource, "alice", 60)

    lose_reply_of(faulty, "UpdateItem", 2, request_b)  # call 1: the ticket, call 2: the claim
    # When request A settles its claim by reading the item
    a_answer = request_a(a_side, resource)
    # Then B holds the lock, and A was not handed B's fence
    current = item(ddb, table, resource)
    assert current is not None and current["fence"] == answers["B"]["fence"]
    assert_not_handed(a_answer, answers["B"]["fence"])


def test_a_lost_grab_is_never_taken_for_the_same_users_lease_of_the_same_millisecond(
    faulty, ddb, tables, unique
):
    # Given request A of a user, whose process saw the lock quiet (it took and released it), so
    # its next acquisition tries the one-write grab; the grab is lost before it reaches the
    # database, and meanwhile request B of the same user takes the lock plainly, in the same
    # millisecond and for the same ttlSeconds (so with the same expiresAt)
    resource = f"same-user-grab-{unique}"
    _, a_side, b_side = one_users_two_requests(faulty, ddb, tables["leases"], 8_450_000.0)
    first = a_side.acquire(resource, "alice", 1, wait_ms=0)
    a_side.release(resource, "alice", first["fence"])
    answers: dict[str, Any] = {}

    def request_b() -> None:
        answers["B"] = b_side.acquire(resource, "alice", 1)

    lose_reply_of(faulty, "UpdateItem", 1, request_b, applied=False)  # its next call: the grab
    # When request A settles its grab by reading the item
    a_answer = request_a(a_side, resource)
    # Then A was not handed B's fence
    assert_not_handed(a_answer, answers["B"]["fence"])


def test_a_resent_release_does_not_move_the_queues_clocks(ddb, tables, unique):
    # Given a holder that released its lease at t
    table, clock = tables["leases"], Clock(8_500_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    resource = f"resent-release-{unique}"
    held = leases.acquire(resource, "A", 10_000)
    clock.now += 1
    leases.release(held)
    released_at = item(ddb, table, resource)["releasedAt"]  # type: ignore[index]
    # When it sends the release again later (a retry, a client resending DELETE)
    clock.now += 4
    leases.release(held)
    # Then it is answered as done, and the release time the queue passes a dead head by is the first
    current = item(ddb, table, resource)
    assert current is not None
    assert (current["releasedAt"], current["expiresAt"]) == (released_at, 0)


def test_releasing_a_lease_that_ran_out_does_not_move_the_queues_clocks(ddb, tables, unique):
    # Given a holder whose lease ran out at t, nobody having taken it since
    table, clock = tables["leases"], Clock(8_600_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    resource = f"late-release-{unique}"
    held = leases.acquire(resource, "A", 1_000)
    clock.now += 5
    # When it releases (it no longer holds the lease: it is free since t)
    leases.release(held)
    # Then it is answered as done, but the lease item keeps saying it came free at t
    current = item(ddb, table, resource)
    assert current is not None
    assert current["expiresAt"] <= held.expires_at_ms
    assert current.get("releasedAt", 0) <= held.expires_at_ms
