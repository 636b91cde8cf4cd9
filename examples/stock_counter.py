"""Stock without a read: ten units, forty buyers, ten restocks of two; nothing oversold or lost.

A sale is ``versioned.decrement`` (``SET stock = stock - :amount`` guarded by ``stock >= :amount``),
a restock ``versioned.increment`` (``SET stock = stock + :amount``, only on an existing item): one
write each, no read to go stale, so they never conflict, and each moves the version by one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from _local import client, create_table

from turnstile_ddb import retry, versioned

ddb = client()
table = create_table(ddb, "stock", "sku")
key = {"sku": "mug"}
ddb.put_item(
    TableName=table, Item={"sku": {"S": "mug"}, "stock": {"N": "10"}, "version": {"N": "1"}}
)


def act(n: int) -> str:
    if n % 5 == 0:  # every fifth caller restocks two units
        versioned.increment(
            ddb, table=table, key=key, attr="stock", amount=2, backoff=retry.Backoff()
        )
        return "restocked"
    try:
        versioned.decrement(
            ddb, table=table, key=key, attr="stock", amount=1, backoff=retry.Backoff()
        )
    except versioned.Insufficient as refused:
        return f"refused ({refused.available} left)"
    return "sold"


with ThreadPoolExecutor(max_workers=10) as pool:
    outcomes = list(pool.map(act, range(50)))

item = versioned.read(ddb, table, key, retry.Backoff())
assert item is not None
sold, restocks = outcomes.count("sold"), outcomes.count("restocked")
refused = len(outcomes) - sold - restocks
print(f"{sold} sold, {restocks} restocks, {refused} refused; stock {item['stock']}")
# Every unit is accounted for, and every write (not the refusals) moved the version once
assert item["stock"] == 10 + 2 * restocks - sold >= 0
assert item["version"] == 1 + sold + restocks
