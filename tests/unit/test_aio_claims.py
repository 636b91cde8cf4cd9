"""turnstile_ddb.aio.claims against turnstile_ddb.claims: the same parameters, and on the same
units the same answer or the same error, with the same metrics counted and the same table after.
The async client here is moto's, awaited (sim.ddb.Awaited); tests/integration runs aiobotocore
against DynamoDB Local, and tests/sim/test_reserving_drivers_agree.py compares the drivers call for
call."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sim.ddb import Awaited, moto_dynamodb
from sim.reserving import create_units
from tests.unit.test_aio_front_doors import outcome, parameters
from turnstile_ddb import _core, aio, claims, retry

UNITS = claims.UnitTable("units", "claimable", ("sku", "sk"))
POOLS = ["s#0", "s#1", "s#2", "s#3"]
NOWAIT = retry.Backoff(attempts=3, sleep=lambda seconds: None)
NOW_MS = 1_700_000_000_000


@pytest.mark.parametrize("name", aio.claims.__all__)
def test_each_async_claims_function_takes_the_sync_ones_parameters(name):
    sync, coroutine = getattr(claims, name), getattr(aio.claims, name)
    assert inspect.iscoroutinefunction(coroutine)
    assert parameters(coroutine) == parameters(sync)


@pytest.fixture
def units() -> Iterator[Callable[[int], Any]]:
    """A function making a fresh moto table of ``each`` free units in each of the four pools."""
    with moto_dynamodb() as client:

        def fresh(each: int) -> Any:
            if "units" in client.list_tables()["TableNames"]:
                client.delete_table(TableName="units")
            create_units(client, UNITS, POOLS, each)
            return client

        yield fresh


def reserve_args(quantity: int) -> dict[str, Any]:
    return {
        "pools": POOLS,
        "quantity": quantity,
        "holder": lambda lead: f"r-{lead['sk']}",
        "now_ms": NOW_MS,
        "until_ms": NOW_MS + 60_000,
        "options": claims.ReserveOptions(backoff=NOWAIT, rand=lambda: 0.5),
    }


def held(quantity: int, client: Any) -> claims.Claimed:
    return claims.reserve(client, UNITS, **reserve_args(quantity))


# (name, units in each pool, what to do given the client; its keyword arguments; a first step)
CASES: list[tuple[str, int, str, Callable[[Any], dict[str, Any]]]] = [
    ("reserve one", 5, "reserve", lambda client: reserve_args(1)),
    ("reserve over pools", 1, "reserve", lambda client: reserve_args(3)),
    ("reserve from one pool", 4, "reserve", lambda client: reserve_args(3)),
    ("not enough", 1, "reserve", lambda client: reserve_args(5)),
    ("bad quantity", 1, "reserve", lambda client: reserve_args(0)),
    (
        "confirm",
        2,
        "confirm",
        lambda client: {"keys": (c := held(3, client)).keys, "holder": c.holder, "now_ms": NOW_MS},
    ),
    (
        "confirm lost",
        2,
        "confirm",
        lambda client: {"keys": held(2, client).keys, "holder": "other", "now_ms": NOW_MS},
    ),
    (
        "release",
        2,
        "release",
        lambda client: {"keys": (c := held(3, client)).keys, "holder": c.holder},
    ),
    ("release lost", 2, "release", lambda client: {"keys": held(1, client).keys, "holder": "x"}),
    ("lead", 2, "holders_units", lambda client: {"lead": held(2, client).keys[0]}),
    ("no lead", 2, "holders_units", lambda client: {"lead": {"sku": "s", "sk": "none"}}),
]


@pytest.mark.parametrize(("name", "each", "primitive", "given"), CASES, ids=[c[0] for c in CASES])
def test_both_claims_front_doors_answer_and_raise_alike(units, name, each, primitive, given):
    sync, coroutine = getattr(claims, primitive), getattr(aio.claims, primitive)
    extra: dict[str, Any] = {} if primitive == "reserve" else {"backoff": NOWAIT}
    if primitive == "release":
        extra["rand"] = lambda: 0.5  # the released units' claimable-at values
    # Given the same units (and the same reservation before, if any)
    client = units(each)
    arguments = {**given(client), **extra}
    by_sync = outcome(lambda: sync(client, UNITS, **arguments))
    table_after_sync = sorted(map(str, client.scan(TableName="units")["Items"]))
    client = units(each)
    arguments = {**given(client), **extra}
    # When each front door runs the primitive, then the outcomes and the tables agree
    by_async = outcome(lambda: asyncio.run(coroutine(Awaited(client), UNITS, **arguments)))
    assert by_async == by_sync
    assert sorted(map(str, client.scan(TableName="units")["Items"])) == table_after_sync


def effects_of(client: Any, read_ahead: bool, pages_per_pool: int = 4) -> list[Any]:
    """The effects one reservation of 3 units yields (its protocol driven by the sync driver)."""
    arguments = reserve_args(3)
    options = claims.ReserveOptions(backoff=NOWAIT, rand=lambda: 0.5, pages_per_pool=pages_per_pool)
    hold = claims._Hold(arguments["holder"], NOW_MS, NOW_MS + 60_000, None)
    steps = claims.reserve_protocol(UNITS, POOLS, 3, hold, options, read_ahead=read_ahead)
    seen: list[Any] = []

    def recording() -> _core.Steps[Any]:
        answer, failure = None, None
        while True:
            try:
                effect = steps.send(answer) if failure is None else steps.throw(failure)
            except StopIteration as stop:
                return stop.value
            seen.append(effect)
            answer, failure = None, None
            try:
                answer = yield effect
            except Exception as exc:  # noqa: BLE001 - handed back to the protocol
                failure = exc

    _core.run(client, recording())
    return seen


def queries(effects: list[Any]) -> list[Any]:
    calls = [c for e in effects for c in (e.calls if isinstance(e, _core.Gather) else [e])]
    return [c.params for c in calls if isinstance(c, _core.Call) and c.operation == "query"]


def test_the_async_protocol_reads_the_other_pools_ahead_in_one_gather(units):
    # Given four pools of two units, none of which shows the three units wanted
    by_sync = effects_of(units(2), read_ahead=False)
    by_async = effects_of(units(2), read_ahead=True)
    # Then the sync protocol reads pool after pool, range after range (no Gather), and the
    # async one reads the first pool, then both ranges of the three others in ONE Gather
    assert not any(isinstance(e, _core.Gather) for e in by_sync)
    (gather,) = [e for e in by_async if isinstance(e, _core.Gather)]
    assert len(gather.calls) == 3 * 2

    # and both ask for the same ranges (each pool read whole either way; the page Limits
    # differ, a read ahead not knowing what the pools before it showed)
    def ranges(effects: list[Any]) -> list[str]:
        return sorted(str({**q, "Limit": None}) for q in queries(effects))

    assert ranges(by_async) == ranges(by_sync)
    assert len(queries(by_sync)) == 4 * 2


def test_reading_ahead_stays_within_the_pages_per_pool_bound(units):
    # Given reads bounded to one Query per pool
    by_async = effects_of(units(2), read_ahead=True, pages_per_pool=1)
    # Then the Gather asks for one page of each other pool, not one per range
    (gather,) = [e for e in by_async if isinstance(e, _core.Gather)]
    assert len(gather.calls) == 3
    pools = [q["ExpressionAttributeValues"][":pool"]["S"] for q in queries(by_async)]
    assert all(pools.count(pool) <= 1 for pool in POOLS)
