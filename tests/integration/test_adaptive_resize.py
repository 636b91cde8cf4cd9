"""turnstile_ddb.adaptive against DynamoDB Local: two "processes" (each its own window, hints and
resizer, sharing the lease table), three threads each, take one unit at a time from a counter
created with one shard and ask their resizer after every take. DynamoDB Local does not throttle,
so the policy is told one key takes 10 units/s: the load grows the counter.

Then: the shard count grew (by resizes this test made, under one lease at a time), shard items
exist exactly for k < N, and the total is exact: the initial stock minus the units the buyers
were told they took."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from turnstile_ddb import adaptive, codec, lease, metrics, retry, sharded

STOCK = 2_000
THREADS = 3  # per process
TAKES = 120  # per thread: 720 in all, well under the stock
BACKOFF = retry.Backoff(attempts=60, base=0.005, cap=0.1)
POLICY = adaptive.ResizePolicy(one_key_limit=10, cooldown=0.5, shrink_after=600, max_shards=8)


@pytest.fixture
def tables(ddb: Any, unique: str) -> tuple[str, str]:
    names = (f"adaptive-{unique}", f"adaptive-leases-{unique}")
    for name, key in zip(names, ("pk", "resource"), strict=True):
        ddb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    return names


class Process:
    """What one process holds: its window, hints and resizer; what its buyers were answered."""

    def __init__(self, ddb: Any, leases: lease.Leases, name: str) -> None:
        self.window = adaptive.LoadWindow()
        self.hints = sharded.Hints(load=self.window)
        self.resizer = adaptive.Resizer(
            ddb, leases, POLICY, self.window, hints=self.hints, owner=name
        )
        self.options = sharded.TakeOptions(backoff=BACKOFF, hints=self.hints)
        self.taken = 0
        self.resizes: list[sharded.Resized] = []
        self.lock = threading.Lock()


def test_threads_taking_while_resizers_decide_grow_the_counter_and_lose_no_unit(ddb, tables):
    table, lease_table = tables
    counter = sharded.ShardedCounter(table, "pk", "flash", 1, "count")
    for item in sharded.shard_items(counter, STOCK):
        ddb.put_item(TableName=table, Item=codec.encode_item(item))
    leases = lease.Leases(ddb, lease_table, backoff=BACKOFF)
    processes = [Process(ddb, leases, f"process-{k}") for k in range(2)]
    before = {name: metrics.tally.get("adaptive", name) for name in adaptive.METRICS}
    start = threading.Barrier(2 * THREADS)
    failures: list[BaseException] = []

    def buy(process: Process) -> None:
        try:
            start.wait(timeout=60)
            for _ in range(TAKES):
                sharded.take(ddb, counter, 1, process.options)
                with process.lock:
                    process.taken += 1
                resized = process.resizer.maybe_resize(counter)
                if resized is not None:
                    with process.lock:
                        process.resizes.append(resized)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [
        threading.Thread(target=buy, args=(process,))
        for process in processes
        for _ in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not [thread for thread in threads if thread.is_alive()]
    assert failures == []

    resizes = [resized for process in processes for resized in process.resizes]
    final = max(resizes, key=lambda resized: resized.generation)
    # the shard count grew, each resize from where the one before left it
    assert final.after > 1
    ordered = sorted(resizes, key=lambda resized: resized.generation)
    assert [resized.generation for resized in ordered] == list(range(1, len(resizes) + 1))
    assert ordered[0].before == 1
    assert all(one.after == next_.before for one, next_ in itertools.pairwise(ordered))
    counted = {name: metrics.tally.get("adaptive", name) - before[name] for name in before}
    assert counted["ResizeUp"] + counted["ResizeDown"] == len(resizes)
    assert counted["ResizeFailed"] == 0
    # shard items exist exactly for k < N, each recording N
    scanned = ddb.scan(TableName=table, ConsistentRead=True)["Items"]
    items = [codec.decode_item(item) or {} for item in scanned]
    assert sorted(item["pk"] for item in items) == sorted(f"flash#{k}" for k in range(final.after))
    assert {int(item["shards"]) for item in items} == {final.after}
    # and the total is exact
    taken = sum(process.taken for process in processes)
    assert taken == 2 * THREADS * TAKES
    grown = sharded.ShardedCounter(table, "pk", "flash", final.after, "count")
    assert sum(sharded.read_all(ddb, grown)) == STOCK - taken
    print(f"{taken} taken, resizes {[(r.before, r.after) for r in resizes]}, metrics {counted}")
