"""A sharded counter's shards are read in pages of at most 100 keys (BatchGetItem's limit), the
pages sent as one Gather: in order through the synchronous front door, at once through
turnstile_ddb.aio (sim.model.Model, which refuses a BatchGetItem of more than 100 keys as
DynamoDB does)."""

from __future__ import annotations

import asyncio
from typing import Any

from sim.ddb import create_table
from sim.model import Model
from turnstile_ddb import aio, codec, retry, sharded

TABLE = "products"
NOWAIT = retry.Backoff(attempts=3, sleep=lambda seconds: None)


class Recording:
    """A client that passes every call to ``real`` and records its name and key count."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.sent: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.real, name)

        def call(**params: Any) -> Any:
            keys = sum(len(r["Keys"]) for r in params.get("RequestItems", {}).values())
            self.sent.append((name, keys))
            return method(**params)

        return call


def stocked(shards: int) -> tuple[Model, sharded.ShardedCounter]:
    real = Model()
    create_table(real, TABLE, "productId")
    counter = sharded.ShardedCounter(TABLE, "productId", "p1", shards, "stock")
    for item in sharded.shard_items(counter, 3 * shards):
        real.put_item(TableName=TABLE, Item=codec.encode_item(item))
    return real, counter


def test_a_counter_of_more_shards_than_one_batch_get_names_is_read_whole():
    # Given a counter of 150 shards holding 3 units each
    real, counter = stocked(150)
    client: Any = Recording(real)
    # When every shard is read
    counts = sharded.read_all(client, counter, NOWAIT)
    # Then every count comes back, from two BatchGetItems (100 keys, then 50), sent in order
    assert counts == [3] * 150
    assert client.sent == [("batch_get_item", 100), ("batch_get_item", 50)]


class BothPagesOrNothing:
    """An asyncio client whose BatchGetItem answers only once two are in flight together (each
    waits, bounded, for the other to arrive): reading pages one after another cannot finish."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.arrived = 0
        self.both = asyncio.Event()
        self.in_flight_together = 0

    async def batch_get_item(self, **params: Any) -> Any:
        self.arrived += 1
        if self.arrived == 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), timeout=5)
        self.in_flight_together = max(self.in_flight_together, self.arrived)
        return self.real.batch_get_item(**params)


def test_the_asyncio_front_door_sends_the_pages_of_a_read_at_once():
    # Given a counter of 150 shards and a client that answers only pages sent together
    real, counter = stocked(150)
    client: Any = BothPagesOrNothing(real)
    # When the asyncio front door reads every shard
    counts = asyncio.run(aio.sharded.read_all(client, counter, NOWAIT))
    # Then both pages were in flight at once, and every count came back
    assert client.in_flight_together == 2
    assert counts == [3] * 150
