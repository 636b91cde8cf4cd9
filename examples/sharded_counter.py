"""Sharded counter: a hot item's stock split over shards; thirty buyers of five, stock one hundred.

Each take is ``SET count = count - :q`` conditioned on ``count >= :q`` on one shard, trying other
shards when one runs dry. Exactly twenty takes succeed and the shards end at zero, never negative.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from _local import client, create_table

from turnstile_ddb import codec, retry, sharded

ddb = client()
table = create_table(ddb, "stock", "id")
stock = sharded.ShardedCounter(
    table=table, key_attr="id", base="hot-item", shards=4, count_attr="count"
)
for item in sharded.shard_items(stock, 100):
    ddb.put_item(TableName=table, Item=codec.encode_item(item))


# One Hints object for the process, shared by every take (and given to any restock).
options = sharded.TakeOptions(backoff=retry.Backoff(), hints=sharded.Hints())


def buy(_: int) -> bool:
    try:
        sharded.take(ddb, stock, 5, options)
    except sharded.Exhausted:
        return False
    return True


with ThreadPoolExecutor(max_workers=8) as pool:
    sold = sum(pool.map(buy, range(30)))

left = sharded.read_all(ddb, stock, retry.Backoff())
print(f"{sold} of 30 purchases succeeded; shards now {left}")
assert sold == 20 and left == [0, 0, 0, 0]
