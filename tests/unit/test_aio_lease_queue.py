"""turnstile_ddb.aio.lease_queue against turnstile_ddb.lease_queue: the same parameters, one
script of queue operations (served, a wait that gives up and leaves, a ticket passed over, the
fast path) answering, raising and counting alike on the same table; ``async with hold`` with its
heartbeat a task that leaves nothing pending; a waiter cancelled while it waits leaves the queue
as a synchronous waiter interrupted at the same nap. The async client is moto's, awaited."""

from __future__ import annotations

import ast
import asyncio
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.ddb import Awaited, create_table, moto_dynamodb
from turnstile_ddb import aio, codec, lease, lease_queue, metrics, retry

TABLE = "leases"
NOWAIT = retry.Backoff(attempts=3, sleep=lambda seconds: None)
SETTINGS = lease_queue.QueueSettings(heartbeat_ms=100, expiry_ms=300, poll_ms=10)


def parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", ["acquire", "deadline", "heartbeat", "hold"])
def test_each_async_queue_operation_takes_the_sync_ones_parameters(name):
    theirs = getattr(lease_queue.LeaseQueue, name)
    ours = getattr(aio.lease_queue.LeaseQueue, name)
    assert parameters(ours) == parameters(theirs)


def test_the_async_queue_and_heartbeat_take_the_same_options():
    assert parameters(aio.lease_queue.LeaseQueue) == parameters(lease_queue.LeaseQueue)
    assert parameters(aio.lease_queue.Heartbeat) == parameters(lease_queue.Heartbeat)
    assert inspect.iscoroutinefunction(aio.lease_queue.LeaseQueue.acquire)


def test_the_async_front_door_stays_thin():
    # A line budget, and no loop: the waiting is the protocols' (turnstile_ddb._queue_waiting)
    source = Path(inspect.getfile(aio.lease_queue)).read_text()
    assert len(source.splitlines()) <= 170
    loops = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.While | ast.For)]
    assert loops == []


class Ticking:
    """A clock that moves 40 ms on every read: waits run out after a known number of reads."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 0.04
        return self.now


@pytest.fixture
def client() -> Iterator[Any]:
    with moto_dynamodb() as moto:
        create_table(moto, TABLE, "resource")
        yield moto


def scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k != "acquisition"}
    if isinstance(value, lease.Lease):
        return (
            value.fence,
            value.ticket,
            value.expires_at_ms,
            value.attempts,
            scrub(value.previous),
        )
    return value


def outcome(run: Callable[[], Any]) -> tuple[Any, ...]:
    before = metrics.tally.snapshot()
    try:
        answer: tuple[Any, ...] = ("answered", scrub(run()))
    except Exception as exc:  # noqa: BLE001 - the outcome compared
        shown = (getattr(exc, "position", None), getattr(exc, "attempts", None))
        answer = ("raised", type(exc), str(exc), shown)
    after = metrics.tally.snapshot()
    # rounded: a timing's total grows across runs, so its differences carry float noise
    counted = {key: round(value - before.get(key, 0), 6) for key, value in after.items()}
    return (*answer, {key: value for key, value in counted.items() if value})


def items(client: Any) -> list[Any]:
    found = [scrub(codec.decode_item(raw)) for raw in client.scan(TableName=TABLE)["Items"]]
    return sorted(found, key=lambda item: str(item["resource"]))


def empty(client: Any) -> None:
    for raw in client.scan(TableName=TABLE)["Items"]:
        client.delete_item(TableName=TABLE, Key={"resource": raw["resource"]})


def script(leases: Any, queue: Any, wait: Callable[[Any], Any]) -> list[Any]:
    """The same queue operations through either front door (``wait`` awaits or not)."""
    first = wait(queue.acquire("r", "alice", wait_ms=1_000))
    steps = [
        lambda: first,
        lambda: wait(queue.acquire("r", "bob", wait_ms=0)),  # held: gives up, leaves
        lambda: wait(queue.acquire("r", "carol", wait_ms=200)),  # naps, gives up
        lambda: wait(leases.release(first)),
        lambda: wait(queue.acquire("r", "dave", wait_ms=1_000)),  # past the two who left
        lambda: wait(leases.acquire("r", "erin", 1_000)),
        lambda: wait(queue.acquire("s", "frank", wait_ms=1_000)),
        lambda: wait(leases.release(wait(queue.acquire("s", "frank", wait_ms=1_000)))),
        lambda: wait(queue.acquire("s", "gina", wait_ms=1_000)),  # the fast path
    ]
    return [outcome(step) for step in steps]


def test_one_queue_script_answers_raises_and_counts_alike(client):
    # Given the sync queue run on a fresh table, its clocks ticking and its naps instant
    clock, monotonic = Ticking(), Ticking(0.0)
    leases = lease.Leases(client, TABLE, backoff=NOWAIT, clock=clock)
    naps: list[float] = []
    queue = lease_queue.LeaseQueue(leases, SETTINGS, sleep=naps.append, monotonic=monotonic)
    by_sync = script(leases, queue, lambda answer: answer)
    after_sync = items(client)
    empty(client)
    # When the async queue runs the same script from the same start
    clock, monotonic = Ticking(), Ticking(0.0)
    aleases = aio.lease.Leases(Awaited(client), TABLE, backoff=NOWAIT, clock=clock)
    anaps: list[float] = []
    aqueue = aio.lease_queue.LeaseQueue(aleases, SETTINGS, sleep=anaps.append, monotonic=monotonic)
    by_async = script(aleases, aqueue, asyncio.run)
    # Then every step answered, raised and counted alike, with the same naps, and the table
    # (lease items and tombstones) ended alike
    assert by_async == by_sync
    assert anaps == naps and naps
    assert items(client) == after_sync
    kinds = [o[1] if o[0] == "raised" else o[0] for o in by_sync]
    assert kinds == [
        "answered", lease_queue.WaitTimedOut, lease_queue.WaitTimedOut, "answered", "answered",
        lease.Held, "answered", "answered", "answered",
    ]  # fmt: skip


class Interrupted(BaseException):
    """What stops a synchronous waiter inside its nap (as a KeyboardInterrupt would)."""


def test_a_waiter_cancelled_while_it_waits_leaves_the_queue_as_an_interrupted_sync_one(client):
    # Given alice holding "r" and a sync waiter interrupted in its first nap
    leases = lease.Leases(client, TABLE, backoff=NOWAIT, clock=lambda: 1_000.0)
    held = leases.acquire("r", "alice", 60_000)

    def interrupted(seconds: float) -> None:
        raise Interrupted

    sync_queue = lease_queue.LeaseQueue(leases, SETTINGS, sleep=interrupted)
    with pytest.raises(Interrupted):
        sync_queue.acquire("r", "bob", wait_ms=60_000)
    by_sync = items(client)
    # And the same start again, with an async waiter cancelled in its first nap
    empty(client)
    aleases = aio.lease.Leases(Awaited(client), TABLE, backoff=NOWAIT, clock=lambda: 1_000.0)
    held = asyncio.run(aleases.acquire("r", "alice", 60_000))

    async def cancelled() -> set[asyncio.Task[Any]]:
        napping = asyncio.Event()

        async def nap(seconds: float) -> None:
            napping.set()
            await asyncio.sleep(3_600)

        queue = aio.lease_queue.LeaseQueue(aleases, SETTINGS, sleep=nap)
        waiter = asyncio.create_task(queue.acquire("r", "bob", wait_ms=60_000))
        await asyncio.wait_for(napping.wait(), timeout=30)  # a bound for a hung test
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return asyncio.all_tasks() - {asyncio.current_task()}

    # Then nothing is left pending, and the queue is as the sync waiter left it: its ticket
    # taken, not left (no tombstone): passed over like any waiter that does not come
    assert asyncio.run(cancelled()) == set()
    assert items(client) == by_sync
    (item,) = by_sync
    assert item["tickets"] == 1 and item["head"] == 1 and "left" not in item
    assert held.fence == 1


def test_async_with_hold_beats_as_a_task_and_leaves_nothing_pending(client):
    # Given a queue whose heartbeat naps are instant (a renewal every turn of the loop)
    aleases = aio.lease.Leases(Awaited(client), TABLE, backoff=NOWAIT)
    queue = aio.lease_queue.LeaseQueue(aleases, SETTINGS)

    async def held_a_while() -> tuple[int, bool, set[asyncio.Task[Any]]]:
        async with queue.hold("r", "alice", wait_ms=1_000) as beat:
            for _ in range(200):  # bounded: two renewals are due within two periods
                if beat.renewals >= 2:
                    break
                await asyncio.sleep(SETTINGS.heartbeat_ms / 1000)
        pending = asyncio.all_tasks() - {asyncio.current_task()}
        return beat.renewals, beat.lost.is_set(), pending

    renewals, lost, pending = asyncio.run(held_a_while())
    # Then it renewed, was not lost, the task is gone, and the lease was released on leaving
    assert renewals >= 2 and not lost and pending == set()
    (item,) = items(client)
    assert item["owner"] == "alice" and item["expiresAt"] == 0 and "releasedAt" in item


def test_a_heartbeat_whose_lease_was_taken_says_lost_and_ends(client):
    # Given alice's lease, taken over behind her back (a higher fence on the item)
    aleases = aio.lease.Leases(Awaited(client), TABLE, backoff=NOWAIT)
    queue = aio.lease_queue.LeaseQueue(aleases, SETTINGS)
    held = asyncio.run(queue.acquire("r", "alice", wait_ms=1_000))
    client.update_item(
        TableName=TABLE,
        Key={"resource": {"S": "r"}},
        UpdateExpression="SET #o = :o ADD #f :one",
        ExpressionAttributeNames={"#o": "owner", "#f": "fence"},
        ExpressionAttributeValues=codec.values(o="mallory", one=1),
    )

    async def beating() -> bool:
        async with queue.heartbeat(held) as beat:
            await asyncio.wait_for(beat.lost.wait(), timeout=30)  # a bound for a hung test
            assert beat._task is not None
            await asyncio.wait([beat._task], timeout=30)
            return beat._task.done() and beat.renewals == 0

    # Then the renewal was refused, lost is set, and the task ended by itself
    assert asyncio.run(beating())
