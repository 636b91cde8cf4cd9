"""Resizing a sharded counter: one shard grown to eight while it sells, shrunk to two after.

Eight threads buy one or two units at a time from a counter created with one shard, each thread
with its own hints, while the main thread grows it (``sharded.resize``): one transaction moves
units into the new shards and writes the new shard count on every shard, conditioned on the
layout it read. The buyers learn the new count from the shards they meet. Once the rush is over
it shrinks back (a shrink drops a shard only while its count holds still, so it waits for a quiet
counter). Nothing is sold twice or lost: what the buyers took plus what the shards hold is the
stock.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from _local import client, create_table

from turnstile_ddb import codec, retry, sharded

ddb = client()
table = create_table(ddb, "flash", "id")
stock = sharded.ShardedCounter(table=table, key_attr="id", base="console", shards=1, count_attr="n")
for item in sharded.shard_items(stock, 1500):
    ddb.put_item(TableName=table, Item=codec.encode_item(item))

started = threading.Event()


def buyer(seed: int) -> int:
    options = sharded.TakeOptions(backoff=retry.Backoff(), hints=sharded.Hints())
    quantity, bought = 1 + seed % 2, 0
    while True:
        try:
            sharded.take(ddb, stock, quantity, options)
        except sharded.Exhausted:
            return bought  # fewer than `quantity` left: the rest is on the shards
        bought += quantity
        started.set()


with ThreadPoolExecutor(max_workers=8) as pool:
    bought = pool.map(buyer, range(8))
    started.wait(timeout=30)
    grown = sharded.resize(ddb, stock, 8)  # a flash sale: eight times one key's write rate
    sold = sum(bought)
shrunk = sharded.resize(ddb, stock, 2)  # the rush is over

left = sharded.read_all(ddb, stock)
print(f"grew {grown.before}->{grown.after}, shrank {shrunk.before}->{shrunk.after}")
print(f"sold {sold}, left {sum(left)} on {len(left)} shards")
assert sold + sum(left) == 1500 and len(left) == 2 and min(left) >= 0
