"""Unit reservations: units are items; four buyers reserve three each from a pool of ten.

Free units carry a random claimable-at value in a sparse index (pool, claimableAt). A reservation
reads candidates from the index and claims them in ONE transaction, each unit conditioned on being
free; units someone else took first are replaced from the candidates read. No unit is ever held
twice.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from _local import client, create_table

from turnstile_ddb import claims, codec, retry

ddb = client()
table = create_table(ddb, "units", "sku", sort_key="sk", index=("claimable", "pool", "claimableAt"))
units = claims.UnitTable(table=table, index="claimable", key_attrs=("sku", "sk"))
for n in range(10):
    key = {"sku": "poster", "sk": f"unit#{n:03}"}
    item = claims.new_unit(units, key, pool="poster", claimable_at=claims.new_claimable_at())
    ddb.put_item(TableName=table, Item=codec.encode_item(item))


def reserve(buyer: str) -> list[str]:
    now_ms = int(time.time() * 1000)
    try:
        taken = claims.reserve(
            ddb,
            units,
            pools=["poster"],
            quantity=3,
            holder=lambda lead: buyer,
            now_ms=now_ms,
            until_ms=now_ms + 60_000,
            owner=buyer,
            options=claims.ReserveOptions(backoff=retry.Backoff()),
        )
    except claims.NotEnough:
        return []
    return [key["sk"] for key in taken.keys]


with ThreadPoolExecutor(max_workers=4) as pool:
    held = list(pool.map(reserve, ["ann", "bob", "cy", "di"]))

every = [unit for units_of_one in held for unit in units_of_one]
print(
    f"reservations: {[len(h) for h in held]}; {len(every)} units held, {len(set(every))} distinct"
)
assert len(every) == len(set(every)) == 9 and sorted(len(h) for h in held) == [0, 3, 3, 3]
