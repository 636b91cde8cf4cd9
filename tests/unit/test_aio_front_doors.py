"""turnstile_ddb.aio against the synchronous front doors: for every ported primitive the same
parameters (names, kinds, defaults), and on the same table the same answer or the same error, with
the same metrics counted. The async client here is moto's, awaited (sim.ddb.Awaited), so what is
compared is the two drivers and the two error edges; tests/integration runs aiobotocore itself."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sim.ddb import Awaited, create_table, moto_dynamodb
from turnstile_ddb import aio, codec, creation, metrics, retry, transact, versioned

TABLE = "products"
KEY = {"productId": "p1"}
NOWAIT = retry.Backoff(attempts=3, sleep=lambda seconds: None)

PAIRS = [
    (retry.call, aio.retry.call),
    (transact.transact_write, aio.transact.transact_write),
    (creation.create_if_absent, aio.creation.create_if_absent),
    *[(getattr(versioned, name), getattr(aio.versioned, name)) for name in aio.versioned.__all__],
]


def parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize(("sync", "coroutine"), PAIRS, ids=lambda f: f.__module__)
def test_each_async_front_door_takes_the_sync_ones_parameters(sync, coroutine):
    assert inspect.iscoroutinefunction(coroutine)
    assert sync.__name__ == coroutine.__name__
    # defaults compared by value; retry_on's default is a lambda in each module
    theirs = [(n, k, d if n != "retry_on" else "a lambda") for n, k, d in parameters(sync)]
    ours = [(n, k, d if n != "retry_on" else "a lambda") for n, k, d in parameters(coroutine)]
    assert ours == theirs


def throttled(operation: str) -> ClientError:
    error = {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}
    return ClientError(error, operation)  # type: ignore[arg-type]


def refuse_no(item):
    raise LookupError(f"decided no at stock {item['stock']}")


def order(item, changes):
    return [{"Put": {"TableName": TABLE, "Item": codec.encode_item({"productId": "order1"})}}]


# (name, primitive, arguments): each is run on a table holding KEY with stock 3, version 1.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("decrement", "decrement", {"table": TABLE, "key": KEY, "attr": "stock", "amount": 2}),
    ("insufficient", "decrement", {"table": TABLE, "key": KEY, "attr": "stock", "amount": 9}),
    ("no attribute", "decrement", {"table": TABLE, "key": KEY, "attr": "stok", "amount": 1}),
    (
        "no item",
        "decrement",
        {"table": TABLE, "key": {"productId": "x"}, "attr": "stock", "amount": 1},
    ),
    ("bad amount", "decrement", {"table": TABLE, "key": KEY, "attr": "stock", "amount": 0}),
    ("no table", "decrement", {"table": "nope", "key": KEY, "attr": "stock", "amount": 1}),
    ("increment", "increment", {"table": TABLE, "key": KEY, "attr": "stock", "amount": 4}),
    (
        "increment none",
        "increment",
        {"table": TABLE, "key": {"productId": "x"}, "attr": "stock", "amount": 1},
    ),
    ("bump", "bump", {"table": TABLE, "key": KEY, "changes": {"name": "b"}}),
    (
        "bump refused",
        "bump",
        {
            "table": TABLE,
            "key": KEY,
            "changes": {"name": "b"},
            "condition": versioned.Condition("#xs > :xn", {"#xs": "stock"}, {":xn": 5}),
        },
    ),
    (
        "if version",
        "update_if_version",
        {"table": TABLE, "key": KEY, "expected": 1, "changes": {"a": 1}},
    ),
    (
        "mismatch",
        "update_if_version",
        {"table": TABLE, "key": KEY, "expected": 7, "changes": {"a": 1}},
    ),
    (
        "versioned",
        "update_versioned",
        {
            "table": TABLE,
            "key": KEY,
            "decide": lambda item: {"stock": item["stock"] - 1},
            "conflicts": NOWAIT,
            "also": order,
        },
    ),
    (
        "decided no",
        "update_versioned",
        {"table": TABLE, "key": KEY, "decide": refuse_no, "conflicts": NOWAIT},
    ),
]


@pytest.fixture
def fresh() -> Iterator[Callable[[], Any]]:
    """A function that empties moto's table and puts KEY back (stock 3, version 1)."""
    with moto_dynamodb() as client:
        create_table(client, TABLE, "productId")

        def reset() -> Any:
            for raw in client.scan(TableName=TABLE)["Items"]:
                client.delete_item(TableName=TABLE, Key={"productId": raw["productId"]})
            item = {**KEY, "stock": 3, "version": 1}
            client.put_item(TableName=TABLE, Item=codec.encode_item(item))
            return client

        yield reset


def outcome(run: Callable[[], Any]) -> tuple[Any, ...]:
    """What a call answered or raised, and the metrics it counted."""
    before = metrics.tally.snapshot()
    try:
        answer: tuple[Any, ...] = ("answered", run())
    except Exception as exc:  # noqa: BLE001 - the outcome compared
        answer = ("raised", type(exc), str(exc), getattr(exc, "current", None))
    after = metrics.tally.snapshot()
    counted = {key: value - before.get(key, 0) for key, value in after.items()}
    return (*answer, {key: value for key, value in counted.items() if value})


@pytest.mark.parametrize(("name", "primitive", "arguments"), CASES, ids=[c[0] for c in CASES])
def test_both_front_doors_answer_and_raise_alike(fresh, name, primitive, arguments):
    arguments = {**arguments, "backoff": NOWAIT}
    sync = getattr(versioned, primitive)
    coroutine = getattr(aio.versioned, primitive)
    # Given the same table, when each front door runs the primitive, then the outcomes agree
    client = fresh()
    by_sync = outcome(lambda: sync(client, **arguments))
    table_after_sync = client.scan(TableName=TABLE)["Items"]
    client = fresh()
    by_async = outcome(lambda: asyncio.run(coroutine(Awaited(client), **arguments)))
    assert by_async == by_sync
    assert sorted(map(str, client.scan(TableName=TABLE)["Items"])) == sorted(
        map(str, table_after_sync)
    )


def test_a_read_and_a_cancelled_transaction_agree(fresh):
    client = fresh()
    element = versioned.bump_op(TABLE, KEY, {"a": 1}, expected=9)
    by_sync = (
        outcome(lambda: versioned.read(client, TABLE, KEY, NOWAIT)),
        outcome(lambda: transact.transact_write(client, [element], backoff=NOWAIT)),
    )
    awaited = Awaited(client)
    by_async = (
        outcome(lambda: asyncio.run(aio.versioned.read(awaited, TABLE, KEY, NOWAIT))),
        outcome(
            lambda: asyncio.run(aio.transact.transact_write(awaited, [element], backoff=NOWAIT))
        ),
    )
    assert by_async == by_sync
    assert by_sync[1][1] is transact.Cancelled


def test_retry_call_gives_up_alike_on_throttling():
    # Given an operation that is always throttled, as a function and as a coroutine function
    def sync_operation() -> None:
        raise throttled("GetItem")

    async def async_operation() -> None:
        raise throttled("GetItem")

    kwargs: dict[str, Any] = {"backoff": NOWAIT, "idempotent": True, "pattern": "parity"}
    by_sync = outcome(lambda: retry.call(sync_operation, **kwargs))
    by_async = outcome(lambda: asyncio.run(aio.retry.call(async_operation, **kwargs)))
    # Then both give up after three attempts with the same error and the same counts
    assert by_async == by_sync
    assert by_sync[1] is retry.RetriesExhausted
    assert by_sync[-1] == {("parity", "Throttle"): 3, ("parity", "RetriesExhausted"): 1}


@pytest.mark.parametrize(
    ("item", "token"),
    [({"productId": "new"}, None), (KEY, None), ({"productId": "t"}, "req-1")],
    ids=["created", "exists", "resent"],
)
def test_a_create_answers_alike_through_both_front_doors(fresh, item, token):
    # Given the item "t" already created by request req-1 (a resend finds it as its own)
    arguments = {"table": TABLE, "item": item, "key_attr": "productId", "backoff": NOWAIT}
    arguments["token"] = token

    def by_sync(client: Any) -> Any:
        return creation.create_if_absent(client, **arguments)

    def by_async(client: Any) -> Any:
        return asyncio.run(aio.creation.create_if_absent(Awaited(client), **arguments))

    outcomes = []
    for run in (by_sync, by_async):
        client = fresh()
        first = {"productId": "t", creation.TOKEN: "req-1"}
        client.put_item(TableName=TABLE, Item=codec.encode_item(first))
        outcomes.append(outcome(functools.partial(run, client)))
    assert outcomes[1] == outcomes[0]
    assert outcomes[0][0] == ("raised" if item is KEY else "answered")
