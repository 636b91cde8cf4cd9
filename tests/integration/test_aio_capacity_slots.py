"""turnstile_ddb.aio's capacity, slots and idempotency store against DynamoDB Local with
aiobotocore: many tasks on one event loop racing for fewer places than tasks, and the table
checked against the answers. (asyncio.run inside each test: no plugin.)"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.integration.test_aio_versioned import dynamodb
from turnstile_ddb import aio, capacity, codec, idempotency, retry

pytest.importorskip("aiobotocore.session")

# Thirty joins on one counter conflict a lot: a budget that outlasts them (bounded, not timed).
BACKOFF = retry.Backoff(attempts=60, base=0.005, cap=0.1)


@pytest.fixture
def table(ddb: Any, unique: str) -> str:
    name = f"aio-places-{unique}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def rows(ddb: Any, table: str) -> dict[str, dict[str, Any]]:
    items = ddb.scan(TableName=table, ConsistentRead=True)["Items"]
    return {str(item["pk"]): item for item in map(codec.decode_item, items) if item}


def test_thirty_joins_on_one_loop_fill_exactly_the_ten_places(ddb, dynamodb_local, table):
    # Given a counter with ten places and thirty tasks on one loop, each joining once
    counter = capacity.CapacityRow(table, {"pk": "event"})
    ddb.put_item(
        TableName=table,
        Item=codec.encode_item({"pk": "event", "count": 0, "limit": 10, "version": 1}),
    )

    async def join(client: Any, n: int) -> str:
        member = capacity.Member(table, {"pk": f"member-{n}"}, {"event": "event"})
        try:
            await aio.capacity.join(client, counter, member, backoff=BACKOFF)
        except capacity.Full:
            return "full"
        return f"member-{n}"

    async def main() -> list[str]:
        async with dynamodb(dynamodb_local.endpoint) as client:
            return list(await asyncio.gather(*(join(client, n) for n in range(30))))

    # When they all run
    started = time.perf_counter()
    answers = asyncio.run(main())
    print(f"30 async joins for 10 places on one loop: {time.perf_counter() - started:.3f} s")
    # Then ten joined, twenty were told it is full, and the table holds exactly those ten
    joined = sorted(a for a in answers if a != "full")
    assert len(joined) == 10 and answers.count("full") == 20
    stored = rows(ddb, table)
    assert sorted(pk for pk in stored if pk != "event") == joined
    assert stored["event"]["count"] == 10 and stored["event"]["version"] == 11


def test_twenty_bookings_of_five_slots_give_each_slot_one_holder(ddb, dynamodb_local, table):
    # Given five slots and twenty tasks on one loop, each booking any free one
    keys = [{"pk": f"slot-{n}"} for n in range(5)]

    async def book(client: Any, holder: str) -> tuple[str, Any]:
        slot = await aio.slots.book_any(client, table, keys, holder, backoff=BACKOFF)
        return holder, None if slot is None else slot["pk"]

    async def main() -> tuple[int, list[tuple[str, Any]]]:
        async with dynamodb(dynamodb_local.endpoint) as client:
            created = await aio.slots.create(client, table, keys, backoff=BACKOFF)
            booked = await asyncio.gather(*(book(client, f"req-{n}") for n in range(20)))
            return created, list(booked)

    # When they all run
    started = time.perf_counter()
    created, answers = asyncio.run(main())
    print(f"20 async bookings of 5 slots on one loop: {time.perf_counter() - started:.3f} s")
    # Then five holders got five different slots, fifteen got none, and the table agrees
    assert created == 5
    won = {slot: holder for holder, slot in answers if slot is not None}
    assert len(won) == 5 and sum(1 for _, slot in answers if slot is None) == 15
    stored = rows(ddb, table)
    assert {pk: item["holder"] for pk, item in stored.items()} == won
    assert all(item["version"] == 2 for item in stored.values())


def test_twenty_tasks_beginning_one_key_run_it_once_and_then_replay(ddb, dynamodb_local, table):
    # Given twenty tasks on one loop beginning the same idempotency key for the same request
    async def main() -> tuple[list[Any], list[Any]]:
        async with dynamodb(dynamodb_local.endpoint) as client:
            store = aio.idempotency.IdempotencyStore(client, table, key_attr="pk")

            async def begin() -> Any:
                try:
                    return await store.begin("order-1", "fp")
                except idempotency.StillRunning:
                    return "still running"

            first = await asyncio.gather(*(begin() for _ in range(20)))
            (owner,) = [a for a in first if isinstance(a, idempotency.InProgress)]
            assert await store.complete(owner, {"status": 201})
            again = await asyncio.gather(*(begin() for _ in range(20)))
            return list(first), list(again)

    first, again = asyncio.run(main())
    # Then exactly one ran it, nineteen were told it is running, and afterwards all replay
    assert first.count("still running") == 19
    assert again == [idempotency.Replay({"status": 201})] * 20
    assert rows(ddb, table)["order-1"]["status"] == idempotency.COMPLETED
