"""turnstile_ddb.aio.claims against turnstile_ddb.claims: the same parameters, and on the same
units the same answer or the same error, with the same metrics counted and the same table after.
The async client here is moto's, awaited (sim.ddb.Awaited); tests/integration runs aiobotocore
against DynamoDB Local, and tests/sim/test_reserving_drivers_agree.py compares the drivers call for
call."""

from __future__ import annotations

import asyncio
import dataclasses
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


def without_queries(outcome: tuple[Any, ...]) -> tuple[Any, ...]:
    """A front door's outcome with a reservation's Query count set aside."""
    if len(outcome) > 1 and isinstance(outcome[1], claims.Claimed):
        return (outcome[0], dataclasses.replace(outcome[1], queries=0), *outcome[2:])
    return outcome


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
    # (reading ahead, the asyncio front door may send fewer Queries: Claimed.queries aside)
    assert without_queries(by_async) == without_queries(by_sync)
    if isinstance(by_sync[1], claims.Claimed):
        assert by_async[1].queries <= by_sync[1].queries
    assert sorted(map(str, client.scan(TableName="units")["Items"])) == table_after_sync


def effects_of(
    client: Any, read_ahead: bool, pages_per_pool: int = 4, hints: claims.PoolHints | None = None
) -> list[Any]:
    """The effects one reservation of 3 units yields (its protocol driven by the sync driver)."""
    arguments = reserve_args(3)
    options = claims.ReserveOptions(
        backoff=NOWAIT, rand=lambda: 0.5, pages_per_pool=pages_per_pool, hints=hints
    )
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


def reads_before_the_claim(effects: list[Any]) -> list[Any]:
    """The read effects (a Query or a Gather of Queries) sent before the first write."""
    first_write = next(
        i for i, e in enumerate(effects) if isinstance(e, _core.Call) and e.operation != "query"
    )
    return [e for e in effects[:first_write] if isinstance(e, _core.Call | _core.Gather)]


def claimable_range(query: Any) -> tuple[int, int]:
    values = query["ExpressionAttributeValues"]
    return int(values[":low"]["N"]), int(values[":high"]["N"])


def test_the_async_protocol_reads_the_other_pools_ahead_in_one_gather(units):
    # Given four pools of two units, none of which shows the three units wanted
    by_sync = effects_of(units(2), read_ahead=False)
    by_async = effects_of(units(2), read_ahead=True)
    # Then the sync protocol reads pool after pool, range after range (no Gather), and the
    # async one reads the first pool, then the three others in ONE Gather, each in one Query
    # over its whole claimable-at range (a pool showing fewer than a page is then known whole)
    assert not any(isinstance(e, _core.Gather) for e in by_sync)
    (gather,) = [e for e in by_async if isinstance(e, _core.Gather)]
    first = queries(by_async)[0]["ExpressionAttributeValues"][":pool"]
    others = [
        c.params for c in gather.calls if c.params["ExpressionAttributeValues"][":pool"] != first
    ]
    assert len(others) == 3
    assert {claimable_range(query) for query in others} == {(0, NOW_MS)}
    # so it asks for fewer Queries than the sync protocol, which reads each pool in two ranges
    assert len(queries(by_sync)) == 4 * 2
    assert len(queries(by_async)) < len(queries(by_sync))


def test_reading_ahead_stays_within_the_pages_per_pool_bound(units):
    # Given reads bounded to one Query per pool
    by_async = effects_of(units(2), read_ahead=True, pages_per_pool=1)
    # Then the Gather asks for one page of each other pool, not one per range
    (gather,) = [e for e in by_async if isinstance(e, _core.Gather)]
    assert len(gather.calls) == 3
    pools = [q["ExpressionAttributeValues"][":pool"]["S"] for q in queries(by_async)]
    assert all(pools.count(pool) <= 1 for pool in POOLS)


def test_a_short_first_pool_and_the_others_are_read_in_two_round_trips(units):
    # Given four pools of two units: the first pool's first range is short of the three wanted
    by_async = effects_of(units(2), read_ahead=True)
    # Then the asyncio front door's reads take two round trips before its claim: the first
    # range of the first pool, then its second range together with the other pools (the sync
    # one: eight, one Query each)
    reads = reads_before_the_claim(by_async)
    assert len(reads) == 2
    assert len(reads_before_the_claim(effects_of(units(2), read_ahead=False))) == 8


def test_a_stocked_first_pool_is_read_alone(units):
    # Given pools of twenty units, whose first range from the pivot shows the three wanted
    by_async = effects_of(units(20), read_ahead=True)
    # Then nothing is read ahead: one Query, then the claim
    assert [type(e) for e in reads_before_the_claim(by_async)] == [_core.Call]


def test_a_pool_read_ahead_with_more_than_a_page_is_read_from_its_pivot(units):
    # Given a first pool of two units and three pools of twenty (rand 0.5: s#2 comes first)
    def stock() -> Any:
        client = units(20)
        for n in range(2, 20):
            client.delete_item(TableName="units", Key={"sku": {"S": "s"}, "sk": {"S": f"s#2/{n}"}})
        return client

    by_async = effects_of(stock(), read_ahead=True)
    # Then the Gather's whole-range Query of the next pool is not a run from its pivot: that
    # pool is read again from its pivot, as the sync protocol reads it
    after = by_async[by_async.index(next(e for e in by_async if isinstance(e, _core.Gather))) + 1 :]
    pivoted = [q for q in queries(after) if q["ExpressionAttributeValues"][":pool"]["S"] == "s#0"]
    assert [claimable_range(q) for q in pivoted] == [(2**19, NOW_MS)]
    # and both front doors claim the same units (the same table after)
    tables = []
    for reserve in (
        lambda c: claims.reserve(c, UNITS, **reserve_args(3)),
        lambda c: asyncio.run(aio.claims.reserve(Awaited(c), UNITS, **reserve_args(3))),
    ):
        client = stock()
        reserve(client)
        tables.append(sorted(map(str, client.scan(TableName="units")["Items"])))
    assert tables[0] == tables[1]


def test_hints_that_know_the_first_pool_short_read_every_pool_at_once(units):
    # Given pool hints kept across reservations, and pools of two units (a first reservation
    # read every pool to its end: each is known to hold two)
    hints = claims.PoolHints()
    client = units(2)
    effects_of(client, read_ahead=True, hints=hints)
    # When the asyncio front door's protocol reserves again with them
    reads = reads_before_the_claim(effects_of(client, read_ahead=True, hints=hints))
    # Then its reads are one round trip: every pool, the first one included, in one Gather
    (gather,) = reads
    assert isinstance(gather, _core.Gather) and len(gather.calls) == len(POOLS)
    # while the sync protocol still reads the pools one after another, none of them ahead
    by_sync = reads_before_the_claim(effects_of(units(2), read_ahead=False, hints=hints))
    assert not any(isinstance(e, _core.Gather) for e in by_sync)
