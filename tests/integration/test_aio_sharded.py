"""turnstile_ddb.aio.sharded against DynamoDB Local with aiobotocore: tasks on one event loop, and
loops in threads, taking from one sharded counter and joining one sharded capacity; the recorded
history of answers is checked against the table (nothing oversold, totals exact, each member
counted once, on the shard it recorded)."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from tests.integration.test_aio_versioned import dynamodb
from turnstile_ddb import aio, capacity, codec, retry, sharded

pytest.importorskip("aiobotocore.session")

BACKOFF = retry.Backoff(attempts=60, base=0.005, cap=0.1)
STOCK = 60  # over 6 shards
PLACES = 12  # over 4 shards of 3
TRIES = 200  # a buyer's takes at most (a bound on the loop, never reached when all goes well)


@pytest.fixture
def table(ddb: Any, unique: str) -> str:
    name = f"aio-sharded-{unique}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


class Shop:
    """The counter, the capacity and the history of every answer (appended under a lock: the
    loops in threads share it)."""

    def __init__(self, ddb: Any, table: str) -> None:
        self.table = table
        self.counter = sharded.ShardedCounter(table, "pk", "stock", 6, "count")
        self.places = sharded.ShardedCounter(table, "pk", "event", 4, "count")
        self.history: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        rows = [
            *sharded.shard_items(self.counter, STOCK),
            *sharded.shard_items(self.places, 0, limit=PLACES // 4, version=1),
        ]
        for row in rows:
            ddb.put_item(TableName=table, Item=codec.encode_item(row))

    def record(self, who: str, what: str, answer: Any) -> None:
        with self.lock:
            self.history.append((who, what, answer))

    async def customer(self, client: Any, who: str, hints: sharded.Hints) -> None:
        """Join the event, buy one to three units until sold out, and leave (every other one)."""
        rand = random.Random(who)
        options = sharded.TakeOptions(backoff=BACKOFF, hints=hints, rand=rand)
        member = capacity.Member(self.table, {"pk": f"member-{who}"})
        joined = False
        for _ in range(TRIES):
            try:
                self.record(
                    who, "joined", await aio.sharded.join(client, self.places, member, options)
                )
            except sharded.Full as exc:
                if exc.raced:
                    continue
                self.record(who, "full", (exc.count, exc.limit))
            else:
                joined = True
            break
        for _ in range(TRIES):
            quantity = rand.choice([1, 2, 3])
            try:
                taken = await aio.sharded.take(client, self.counter, quantity, options)
            except sharded.Exhausted as exc:
                if exc.raced:
                    continue
                self.record(who, "sold out", (quantity, exc.total))
                break
            self.record(who, "took", (quantity, taken.shards, taken.remaining))
        if joined and rand.random() < 0.5:
            self.record(who, "left", await aio.sharded.leave(client, self.places, member, options))

    def check(self, ddb: Any) -> None:
        items = [codec.decode_item(i) or {} for i in ddb.scan(TableName=self.table)["Items"]]
        rows = {str(item["pk"]): item for item in items}
        counts = [int(rows[f"stock#{k}"]["count"]) for k in range(self.counter.shards)]
        sold = sum(answer[0] for _, what, answer in self.history if what == "took")
        refusals = [answer for _, what, answer in self.history if what == "sold out"]
        # 0 oversold, the total exact: what the answers sold is what the shards lost
        assert min(counts) >= 0
        assert sold == STOCK - sum(counts)
        assert all(total < quantity for quantity, total in refusals)
        assert sum(counts) < 3  # every buyer stopped on a refusal: at most 2 units left
        # no unit twice: a shard's remaining stock after each single-shard take is distinct
        after: dict[int, list[int]] = defaultdict(list)
        for _, what, answer in self.history:
            if what == "took" and len(answer[1]) == 1:
                after[answer[1][0]].append(answer[2])
        assert all(len(left) == len(set(left)) for left in after.values())
        # each member counted once, on the shard it recorded; the places filled exactly
        joined = {who: shard for who, what, shard in self.history if what == "joined"}
        left = {who for who, what, _ in self.history if what == "left"}
        assert PLACES <= len(joined) <= PLACES + len(left)  # a place left may be taken again
        assert all(
            count == limit for count, limit in (a for _, w, a in self.history if w == "full")
        )
        members = [pk for pk in rows if pk.startswith("member-")]
        for k in range(self.places.shards):
            on_k = [pk for pk in members if rows[pk]["shard"] == k]
            expected = [f"member-{w}" for w, s in joined.items() if s == k and w not in left]
            assert sorted(on_k) == sorted(expected)
            assert rows[f"event#{k}"]["count"] == len(on_k)


def test_thirty_tasks_on_one_loop_sell_exactly_and_count_members_once(ddb, dynamodb_local, table):
    # Given 60 units over 6 shards, 12 places over 4 shards, and 30 customers on one loop
    shop = Shop(ddb, table)
    hints = sharded.Hints()

    async def main() -> None:
        async with dynamodb(dynamodb_local.endpoint) as client:
            await asyncio.gather(*(shop.customer(client, f"c{n}", hints) for n in range(30)))

    # When they all run
    started = time.perf_counter()
    asyncio.run(main())
    print(f"30 async customers on one loop: {time.perf_counter() - started:.3f} s")
    # Then the history and the table agree: nothing oversold, members counted once
    shop.check(ddb)


def test_loops_in_threads_sell_exactly_and_count_members_once(ddb, dynamodb_local, table):
    # Given the same shop and three threads, each with its own loop of ten customers, sharing
    # one Hints (thread-safe)
    shop = Shop(ddb, table)
    hints = sharded.Hints()

    async def loop(name: str) -> None:
        async with dynamodb(dynamodb_local.endpoint) as client:
            await asyncio.gather(*(shop.customer(client, f"{name}.{i}", hints) for i in range(10)))

    threads = [threading.Thread(target=asyncio.run, args=(loop(f"t{n}"),)) for n in range(3)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    print(f"30 async customers on 3 loops: {time.perf_counter() - started:.3f} s")
    assert not any(thread.is_alive() for thread in threads)
    shop.check(ddb)
