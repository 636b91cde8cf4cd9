"""Shard counts that follow the load: a counter created with one shard grows while buyers take.

Every take tells the process's load window what it met (the window rides on its hints); after
each take the resizer asks its policy, a few comparisons and no call, and once the rate nears
what the shards can take it resizes the counter, under a lease so one resizer acts at a time.
DynamoDB Local does not throttle, so the policy is told one key takes 20 units a second: eight
buyers taking as fast as they can outgrow one shard. A resize moves units, it never loses one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from _local import client, create_table

from turnstile_ddb import adaptive, codec, lease, sharded

ddb = client()
table = create_table(ddb, "stock", "id")
stock = sharded.ShardedCounter(
    table=table, key_attr="id", base="flash-sale", shards=1, count_attr="count"
)
for item in sharded.shard_items(stock, 1000):
    ddb.put_item(TableName=table, Item=codec.encode_item(item))

# One window, one Hints and one Resizer for the process, shared by every take.
window = adaptive.LoadWindow()
hints = sharded.Hints(load=window)
policy = adaptive.ResizePolicy(one_key_limit=20, max_shards=8)
leases = lease.Leases(ddb, create_table(ddb, "leases", "resource"))
resizer = adaptive.Resizer(ddb, leases, policy, window, hints=hints)
options = sharded.TakeOptions(hints=hints)


def buy(_: int) -> sharded.Resized | None:
    sharded.take(ddb, stock, 1, options)
    return resizer.maybe_resize(stock)


with ThreadPoolExecutor(max_workers=8) as pool:
    resizes = [resized for resized in pool.map(buy, range(400)) if resized is not None]

now = hints.shards.current(stock)  # the counter as these hints last learned it
left = sum(sharded.read_all(ddb, now))
print(f"resized {[(r.before, r.after) for r in resizes]}; {left} of 1000 left after 400 sales")
assert now.shards == resizes[-1].after > 1 and left == 600
