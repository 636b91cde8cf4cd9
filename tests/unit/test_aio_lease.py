"""turnstile_ddb.aio.lease against turnstile_ddb.lease: the same parameters for every operation,
and one script of lease operations (acquire, a wait that gives up, renew, release, the guarded
transaction, the fenced write, their refusals) answering, raising and counting alike on the same
table. The async client is moto's, awaited (sim.ddb.Awaited)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sim.ddb import Awaited, create_table, moto_dynamodb
from turnstile_ddb import aio, codec, lease, metrics, retry

TABLE = "leases"
NOWAIT = retry.Backoff(attempts=3, sleep=lambda seconds: None)
METHODS = ["acquire", "acquire_wait", "renew", "release", "transact", "hold", "guard"]
METHODS += ["wire_key", "names", "now_ms", "time_left_ms"]


def parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", METHODS)
def test_each_async_lease_operation_takes_the_sync_ones_parameters(name):
    assert parameters(getattr(aio.lease.Leases, name)) == parameters(getattr(lease.Leases, name))


def test_the_async_leases_take_the_same_options_and_fenced_update_its_parameters():
    assert parameters(aio.lease.Leases) == parameters(lease.Leases)
    assert parameters(aio.lease.fenced_update) == parameters(lease.fenced_update)
    assert inspect.iscoroutinefunction(aio.lease.fenced_update)
    for name in ("acquire", "acquire_wait", "renew", "release", "transact"):
        assert inspect.iscoroutinefunction(getattr(aio.lease.Leases, name)), name


class Ticking:
    """A clock that moves 40 ms on every read: a wait runs out after a known number of reads."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 0.04
        return self.now


@pytest.fixture
def client() -> Iterator[Any]:
    with moto_dynamodb() as moto:
        create_table(moto, TABLE, "resource")
        create_table(moto, "things", "id")
        yield moto


def scrub(value: Any) -> Any:
    """``value`` with every acquisition id (random, new on every acquisition) left out."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k != "acquisition"}
    if isinstance(value, lease.Lease):
        return (value.fence, value.expires_at_ms, value.attempts, scrub(value.previous))
    return value


def outcome(run: Callable[[], Any]) -> tuple[Any, ...]:
    before = metrics.tally.snapshot()
    try:
        answer: tuple[Any, ...] = ("answered", scrub(run()))
    except Exception as exc:  # noqa: BLE001 - the outcome compared
        answer = ("raised", type(exc), str(exc), scrub(getattr(exc, "current", None)))
    after = metrics.tally.snapshot()
    counted = {key: value - before.get(key, 0) for key, value in after.items()}
    return (*answer, {key: value for key, value in counted.items() if value})


def table_items(client: Any) -> list[Any]:
    return [scrub(codec.decode_item(raw)) for raw in client.scan(TableName=TABLE)["Items"]]


def script(leases: Any, fenced: Callable[..., Any], wait: Callable[[Any], Any]) -> list[Any]:
    """The same operations, through either front door (``wait`` awaits a coroutine or not)."""
    put = {"Put": {"TableName": "things", "Item": codec.encode_item({"id": "a", "n": 1})}}
    first = wait(leases.acquire("r1", "alice", 5_000))
    steps = [
        lambda: first,
        lambda: wait(leases.acquire("r1", "bob", 5_000)),
        lambda: wait(leases.acquire_wait("r1", "bob", 5_000, wait_ms=300, waits=NOWAIT)),
        lambda: wait(leases.renew(first, 6_000)),
        lambda: wait(leases.transact(first, [put])),
        lambda: wait(fenced(table="things", key={"id": "b"}, fence=2, changes={"n": 2})),
        lambda: wait(fenced(table="things", key={"id": "b"}, fence=2, changes={"n": 3})),
        lambda: wait(leases.release(first)),
        lambda: wait(leases.release(first)),
        lambda: wait(leases.transact(first, [put])),
        lambda: wait(leases.renew(first, 1_000)),
    ]
    return [outcome(step) for step in steps]


def test_one_script_answers_raises_and_counts_alike(client):
    # Given the sync front door run on a fresh table with a ticking clock
    by_sync = script(
        lease.Leases(client, TABLE, backoff=NOWAIT, clock=Ticking()),
        lambda **kw: lease.fenced_update(client, backoff=NOWAIT, **kw),
        lambda answer: answer,
    )
    table_after_sync = table_items(client)
    for name in (TABLE, "things"):
        for raw in client.scan(TableName=name)["Items"]:
            key = {"resource": raw["resource"]} if name == TABLE else {"id": raw["id"]}
            client.delete_item(TableName=name, Key=key)
    # When the async front door runs the same script from the same start
    awaited = Awaited(client)
    by_async = script(
        aio.lease.Leases(awaited, TABLE, backoff=NOWAIT, clock=Ticking()),
        lambda **kw: aio.lease.fenced_update(awaited, backoff=NOWAIT, **kw),
        asyncio.run,
    )
    # Then every step answered, raised and counted alike, and the lease table ended alike
    assert by_async == by_sync
    assert table_items(client) == table_after_sync
    kinds = [o[1] if o[0] == "raised" else o[0] for o in by_sync]
    assert kinds == [
        "answered", lease.Held, lease.Held, "answered", "answered", "answered",
        lease.StaleFence, "answered", "answered", lease.LeaseLost, lease.LeaseLost,
    ]  # fmt: skip


def test_async_with_releases_the_lease_on_leaving_also_on_an_error(client):
    leases = aio.lease.Leases(Awaited(client), TABLE, backoff=NOWAIT)

    async def hold_and_fail() -> int:
        with pytest.raises(LookupError):
            async with leases.hold("r1", "alice", 5_000, wait_ms=0, waits=NOWAIT) as held:
                raise LookupError(held.fence)
        async with leases.hold("r1", "bob", 5_000, wait_ms=0, waits=NOWAIT) as second:
            return second.fence

    # Given a holder whose body raised, then bob's hold takes the lease at once, fence 2
    assert asyncio.run(hold_and_fail()) == 2
    raw = client.get_item(TableName=TABLE, Key={"resource": {"S": "r1"}})["Item"]
    item = codec.decode_item(raw) or {}
    assert item["owner"] == "bob" and item["expiresAt"] == 0 and "releasedAt" in item
