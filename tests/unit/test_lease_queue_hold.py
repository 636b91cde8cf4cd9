"""``LeaseQueue.hold``: the queue's acquisition, its heartbeat and the release in one ``with``; and
a queue request resent after a throttle carries the clock as read for the resend (as the request
built inside ``retry.call``'s operation always did). moto, no thread: the heartbeat's loop is
handed to a ``start`` that runs nothing until the block is left."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sim.ddb import create_table, moto_dynamodb
from turnstile_ddb import codec, lease, lease_queue, retry

TABLE = "leases"
NOWAIT = retry.Backoff(attempts=3, sleep=lambda seconds: None)


@pytest.fixture
def client() -> Iterator[Any]:
    with moto_dynamodb() as moto:
        create_table(moto, TABLE, "resource")
        yield moto


def item(client: Any) -> dict[str, Any]:
    raw = client.get_item(TableName=TABLE, Key={"resource": {"S": "r"}})["Item"]
    return codec.decode_item(raw) or {}


def test_hold_acquires_beats_and_releases_also_on_an_error(client, monkeypatch):
    # Given a queue whose heartbeat loops are recorded, not run
    started: list[Any] = []

    def start(loop: Any) -> Any:
        started.append(loop)
        return lambda: None

    def heartbeat(self: Any, held: Any, *, remaining_ms: Any = None) -> lease_queue.Heartbeat:
        return lease_queue.Heartbeat(self.leases, held, period_ms=100, ttl_ms=300, start=start)

    monkeypatch.setattr(lease_queue.LeaseQueue, "heartbeat", heartbeat)
    queue = lease_queue.LeaseQueue(lease.Leases(client, TABLE, backoff=NOWAIT))
    # When a body holding "r" raises
    with pytest.raises(LookupError), queue.hold("r", "alice", wait_ms=1_000) as beat:
        assert item(client)["owner"] == "alice" and beat.lease.fence == 1
        raise LookupError
    # Then its heartbeat was started, and the lease released on leaving
    assert len(started) == 1
    after = item(client)
    assert after["expiresAt"] == 0 and "releasedAt" in after
    # And the next holder is served at once, fence 2
    with queue.hold("r", "bob", wait_ms=1_000) as second:
        assert second.lease.fence == 2


class Throttling:
    """A client whose first queue request is throttled; every request's ``:now`` noted."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.nows: list[str] = []

    def update_item(self, **params: Any) -> Any:
        now = params.get("ExpressionAttributeValues", {}).get(":now", {}).get("N")
        if "ADD #tickets" in params["UpdateExpression"]:
            self.nows.append(now)
            if len(self.nows) == 1:
                error = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
                raise ClientError(error, "UpdateItem")  # type: ignore[arg-type]
        return self.real.update_item(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_resent_ticket_request_reads_the_clock_again(client):
    # Given a clock that moves a second on every read, and a throttled first ticket request
    ticks = iter(range(1_000, 2_000))
    throttling = Throttling(client)
    leases = lease.Leases(throttling, TABLE, backoff=NOWAIT, clock=lambda: float(next(ticks)))  # type: ignore[arg-type]
    leases.acquire("r", "alice", 60_000)
    queue = lease_queue.LeaseQueue(leases)
    # When a waiter queues (it gives up at once: alice holds)
    with pytest.raises(lease_queue.WaitTimedOut):
        queue.acquire("r", "bob", wait_ms=0)
    # Then the resend carried a later :now than the throttled send
    first, resent = throttling.nows
    assert int(resent) > int(first)
