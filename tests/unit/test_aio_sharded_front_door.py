"""turnstile_ddb.aio.sharded against turnstile_ddb.sharded: the same parameters (names, kinds,
defaults; the async take without the keywords of 0.3), and on the same table the same answer or
the same error with the same metrics counted (moto's client, awaited: sim.ddb.Awaited)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from sim.ddb import Awaited
from tests.unit.test_aio_front_doors import NOWAIT, TABLE, fresh, outcome, parameters
from turnstile_ddb import aio, capacity, codec, sharded

__all__ = ["fresh"]  # the fixture, used by name

PAIRS = [(getattr(sharded, name), getattr(aio.sharded, name)) for name in aio.sharded.__all__]
STOCK = sharded.ShardedCounter(TABLE, "productId", "s", 3, "stock")
PLACES = sharded.ShardedCounter(TABLE, "productId", "c", 2, "count")
GONE = sharded.ShardedCounter(TABLE, "productId", "none", 2, "stock")


@pytest.mark.parametrize(("sync", "coroutine"), PAIRS, ids=lambda f: f.__name__)
def test_each_async_sharded_function_takes_the_sync_ones_parameters(sync, coroutine):
    assert asyncio.iscoroutinefunction(coroutine)
    assert sync.__name__ == coroutine.__name__
    theirs = [p for p in parameters(sync) if p[0] != "legacy"]
    ours = parameters(coroutine)
    # defaults compared by value; set_total's ``also`` default is a lambda in each module
    assert [(n, k, d if n != "also" else "a default") for n, k, d in ours] == [
        (n, k, d if n != "also" else "a default") for n, k, d in theirs
    ]


def options() -> sharded.TakeOptions:
    return sharded.TakeOptions(backoff=NOWAIT, rand=random.Random(7))


def member(name: str) -> capacity.Member:
    return capacity.Member(TABLE, {"productId": name}, {"kind": "member"})


# (name, primitive, positional arguments after the client, keyword arguments), each run on a
# table holding STOCK (1, 0, 2 units) and PLACES (shard 0 full with member m0, shard 1 empty).
CASES: list[tuple[str, str, tuple[Any, ...], Callable[[], dict[str, Any]]]] = [
    ("take", "take", (STOCK, 1), lambda: {"options": options()}),
    ("take across", "take", (STOCK, 3), lambda: {"options": options()}),
    ("take too many", "take", (STOCK, 4), lambda: {"options": options()}),
    ("take none", "take", (GONE, 1), lambda: {"options": options()}),
    ("read items", "read_items", (STOCK, NOWAIT), dict),
    ("read all", "read_all", (STOCK, NOWAIT), dict),
    ("read none", "read_all", (GONE, NOWAIT), dict),
    ("add", "add", (STOCK, 5), lambda: {"backoff": NOWAIT, "stamp": {"v": 2}}),
    ("add none", "add", (GONE, 5), lambda: {"backoff": NOWAIT}),
    ("set total", "set_total", (STOCK, 7), lambda: {"backoff": NOWAIT}),
    ("join", "join", (PLACES, member("m1")), lambda: {"options": options()}),
    ("join again", "join", (PLACES, member("m0")), lambda: {"options": options()}),
    ("leave", "leave", (PLACES, member("m0")), lambda: {"options": options()}),
    ("leave not member", "leave", (PLACES, member("m9")), lambda: {"options": options()}),
    ("grow", "resize", (STOCK, 5), lambda: {"backoff": NOWAIT}),
    ("shrink", "resize", (STOCK, 1), lambda: {"backoff": NOWAIT}),
    ("grow places", "resize", (PLACES, 4), lambda: {"capacity": True, "backoff": NOWAIT}),
    ("shrink places", "resize", (PLACES, 1), lambda: {"capacity": True, "backoff": NOWAIT}),
    ("resize none", "resize", (GONE, 3), lambda: {"backoff": NOWAIT}),
]


def seeded(client: Any) -> Any:
    rows = [
        *({**STOCK.key(k), "stock": n} for k, n in enumerate([1, 0, 2])),
        {**PLACES.key(0), "count": 1, "limit": 1, "version": 1},
        {**PLACES.key(1), "count": 0, "limit": 1, "version": 1},
        {"productId": "m0", "kind": "member", "shard": 0},
    ]
    for row in rows:
        client.put_item(TableName=TABLE, Item=codec.encode_item(row))
    return client


@pytest.mark.parametrize(("name", "primitive", "args", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_the_sharded_front_doors_answer_and_raise_alike(fresh, name, primitive, args, kwargs):
    sync = getattr(sharded, primitive)
    coroutine = getattr(aio.sharded, primitive)
    client = seeded(fresh())
    by_sync = outcome(lambda: sync(client, *args, **kwargs()))
    table_after_sync = client.scan(TableName=TABLE)["Items"]
    client = seeded(fresh())
    by_async = outcome(lambda: asyncio.run(coroutine(Awaited(client), *args, **kwargs())))
    assert by_async == by_sync
    assert sorted(map(str, client.scan(TableName=TABLE)["Items"])) == sorted(
        map(str, table_after_sync)
    )
