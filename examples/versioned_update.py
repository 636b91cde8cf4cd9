"""Versioned update: eight threads add to one balance; no update is lost.

Each write is ``SET balance = :new, version = :next`` guarded by ``version = :expected``; a writer
that lost the race gets the current item back from the failed condition and decides again.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from _local import client, create_table

from turnstile_ddb import retry, versioned

ddb = client()
table = create_table(ddb, "accounts", "id")
key = {"id": "alice"}


def deposit(amount: int) -> versioned.Written:
    return versioned.update_versioned(
        ddb,
        table=table,
        key=key,
        decide=lambda item: {"balance": (item or {}).get("balance", 0) + amount},
        backoff=retry.Backoff(),
        conflicts=retry.Backoff(attempts=50, cap=0.05),
    )


with ThreadPoolExecutor(max_workers=8) as pool:
    written = list(pool.map(deposit, [10] * 40))

item = versioned.read(ddb, table, key, retry.Backoff())
assert item is not None
retries = sum(w.attempts - 1 for w in written)
print(
    f"balance {item['balance']} after 40 deposits of 10 (version {item['version']}, "
    f"{retries} lost races retried)"
)
assert item["balance"] == 400 and item["version"] == 40
