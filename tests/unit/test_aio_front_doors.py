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
from turnstile_ddb import (
    aio,
    capacity,
    codec,
    creation,
    idempotency,
    metrics,
    retry,
    slots,
    transact,
    versioned,
)

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


def test_a_front_door_takes_its_client_by_position_or_by_name(fresh):
    # Given the sync read, which takes its client either way
    client = fresh()
    expected = versioned.read(client=client, table=TABLE, key=KEY, backoff=NOWAIT)
    awaited = Awaited(client)
    # Then the async one, built from the same protocol, answers the same either way (its static
    # type, Concatenate[client, ...], says positional; at run time it takes the name as sync does)
    named = aio.versioned.read(client=awaited, table=TABLE, key=KEY, backoff=NOWAIT)  # type: ignore[call-arg]
    by_name = asyncio.run(named)
    by_position = asyncio.run(aio.versioned.read(awaited, TABLE, KEY, backoff=NOWAIT))
    assert by_name == by_position == expected
    assert expected is not None and expected["stock"] == 3
    # And it is named and documented after its sync twin
    assert aio.versioned.read.__name__ == "read"
    assert aio.versioned.read.__doc__ == ":func:`turnstile_ddb.versioned.read`, awaited."


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


# capacity, slots and the idempotency store: the same pairs, then the same outcomes on one table
# (a counter "c" with room for one, a member table and slots all in TABLE, keyed by productId).
STORE_METHODS = ("begin", "complete", "release", "complete_op")
PAIRS_MORE = [
    *[(getattr(capacity, name), getattr(aio.capacity, name)) for name in aio.capacity.__all__],
    *[(getattr(slots, name), getattr(aio.slots, name)) for name in aio.slots.__all__],
    *[
        (
            getattr(idempotency.IdempotencyStore, name),
            getattr(aio.idempotency.IdempotencyStore, name),
        )
        for name in STORE_METHODS
    ],
]
COUNTER = capacity.CapacityRow(TABLE, {"productId": "c"})


@pytest.mark.parametrize(("sync", "coroutine"), PAIRS_MORE, ids=lambda f: f.__qualname__)
def test_the_ported_capacity_slots_and_store_take_the_same_parameters(sync, coroutine):
    assert inspect.iscoroutinefunction(coroutine) or sync.__name__ == "complete_op"
    assert sync.__name__ == coroutine.__name__
    assert parameters(coroutine) == parameters(sync)


def test_the_async_store_has_the_sync_ones_fields():
    sync_fields = inspect.signature(idempotency.IdempotencyStore).parameters
    async_fields = inspect.signature(aio.idempotency.IdempotencyStore).parameters
    assert [(p.name, p.kind, p.default) for p in async_fields.values()] == [
        (p.name, p.kind, p.default) for p in sync_fields.values()
    ]
    # and refuses the same layouts with the same words
    names = idempotency.RecordNames(token="expiresAt")
    with pytest.raises(ValueError) as by_sync:
        idempotency.IdempotencyStore(None, "t", names=names)  # type: ignore[arg-type]
    with pytest.raises(ValueError) as by_async:
        aio.idempotency.IdempotencyStore(None, "t", names=names)  # type: ignore[arg-type]
    assert str(by_async.value) == str(by_sync.value)


def member(name: str) -> capacity.Member:
    return capacity.Member(TABLE, {"productId": name}, {"kind": "member"})


# (name, module, primitive, positional arguments after the client)
MORE_CASES: list[tuple[str, str, str, tuple[Any, ...]]] = [
    ("join", "capacity", "join", (COUNTER, member("m1"))),
    (
        "join full",
        "capacity",
        "join",
        (capacity.CapacityRow(TABLE, {"productId": "f"}), member("m2")),
    ),
    ("join again", "capacity", "join", (COUNTER, member("m0"))),
    ("join no counter", "capacity", "join", (capacity.CapacityRow(TABLE, KEY), member("m1"))),
    ("leave", "capacity", "leave", (COUNTER, member("m0"))),
    ("leave not member", "capacity", "leave", (COUNTER, member("m9"))),
    ("create", "slots", "create", (TABLE, [{"productId": "s3"}, {"productId": "s1"}])),
    ("book", "slots", "book", (TABLE, {"productId": "s2"}, "h1")),
    ("book taken", "slots", "book", (TABLE, {"productId": "s1"}, "h1")),
    ("book own", "slots", "book", (TABLE, {"productId": "s1"}, "h0")),
    ("book none", "slots", "book", (TABLE, {"productId": "s9"}, "h1")),
    ("book any", "slots", "book_any", (TABLE, [{"productId": "s1"}, {"productId": "s2"}], "h1")),
    ("book any none", "slots", "book_any", (TABLE, [{"productId": "s1"}], "h1")),
    ("release", "slots", "release", (TABLE, {"productId": "s1"}, "h0")),
    ("release other", "slots", "release", (TABLE, {"productId": "s1"}, "h1")),
]


def seeded(client: Any) -> Any:
    """KEY plus counters "c" (limit 2, one member "m0") and "f" (full), slots s1 (held by h0)
    and s2."""
    rows: list[dict[str, Any]] = [
        {"productId": "c", "count": 1, "limit": 2, "version": 1},
        {"productId": "f", "count": 1, "limit": 1, "version": 4},
        {"productId": "m0", "kind": "member"},
        {"productId": "s1", "holder": "h0", "version": 2},
        {"productId": "s2", "version": 1},
    ]
    for row in rows:
        client.put_item(TableName=TABLE, Item=codec.encode_item(row))
    return client


@pytest.mark.parametrize(
    ("name", "module", "primitive", "args"), MORE_CASES, ids=[c[0] for c in MORE_CASES]
)
def test_capacity_and_slots_answer_and_raise_alike(fresh, name, module, primitive, args):
    sync = getattr({"capacity": capacity, "slots": slots}[module], primitive)
    coroutine = getattr(getattr(aio, module), primitive)
    client = seeded(fresh())
    by_sync = outcome(lambda: sync(client, *args, backoff=NOWAIT))
    table_after_sync = client.scan(TableName=TABLE)["Items"]
    client = seeded(fresh())
    by_async = outcome(lambda: asyncio.run(coroutine(Awaited(client), *args, backoff=NOWAIT)))
    assert by_async == by_sync
    assert sorted(map(str, client.scan(TableName=TABLE)["Items"])) == sorted(
        map(str, table_after_sync)
    )


def test_the_store_begins_replays_refuses_and_releases_alike(fresh):
    def store_for(client: Any, asynchronous: bool) -> Any:
        ticks = iter(range(1_000, 2_000))
        clock = lambda: float(next(ticks))  # noqa: E731 - a clock that moves one second a read
        options: dict[str, Any] = {"backoff": NOWAIT, "clock": clock, "key_attr": "productId"}
        if asynchronous:
            return aio.idempotency.IdempotencyStore(Awaited(client), TABLE, **options)
        return idempotency.IdempotencyStore(client, TABLE, **options)

    def script(store: Any, awaited: Callable[[Any], Any]) -> list[Any]:
        steps: list[Any] = []
        first = awaited(store.begin("k1", "fp1"))
        steps.append(outcome(lambda: awaited(store.begin("k1", "fp1"))))  # still running
        steps.append(outcome(lambda: awaited(store.complete(first, {"status": 201}))))
        steps.append(outcome(lambda: awaited(store.begin("k1", "fp1"))))  # replay
        steps.append(outcome(lambda: awaited(store.begin("k1", "fp2"))))  # key reused
        second = awaited(store.begin("k2", "fp1"))
        steps.append(outcome(lambda: awaited(store.release(second))))
        steps.append(outcome(lambda: awaited(store.release(second))))  # nothing left to give
        return [(s[0], s[1] if s[0] == "raised" else repr(s[1]), s[-1]) for s in steps]

    by_sync = script(store_for(fresh(), False), lambda value: value)
    by_async = script(store_for(fresh(), True), asyncio.run)
    assert by_async == by_sync
    assert [s[1] for s in by_sync][:4] == [
        idempotency.StillRunning,
        "True",
        repr(idempotency.Replay({"status": 201})),
        idempotency.KeyReused,
    ]
