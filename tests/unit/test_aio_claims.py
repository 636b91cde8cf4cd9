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
from turnstile_ddb import aio, claims, retry

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
