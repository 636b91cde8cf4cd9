"""Resizing sharded counters and capacities against DynamoDB Local while real threads take,
restock, join and leave (``turnstile_ddb.sharded.resize``). Each thread keeps its own hints, so
most of them act on a shard count a resize has just changed; the recorded history of answers is
checked against the table: the total exact, nothing sold twice, no shard below zero or over its
limit, shard items exactly those of the last layout, members counted once and every one able to
leave."""

from __future__ import annotations

import itertools
import random
import threading
import traceback
from typing import Any

import pytest

from turnstile_ddb import capacity, codec, errors, metrics, retry, sharded

BACKOFF = retry.Backoff(attempts=60, base=0.002, cap=0.05)
STOCK = 300
RESIZES = (4, 8, 2, 6, 1, 5)
PLACES = 24
TRIES = 400  # a thread's operations at most (a bound, never reached when all goes well)


@pytest.fixture
def table(pk_table: str) -> str:
    return pk_table


def rows(ddb: Any, table: str) -> dict[str, dict[str, Any]]:
    items = ddb.scan(TableName=table, ConsistentRead=True)["Items"]
    return {str(item["pk"]): item for item in (codec.decode_item(i) or {} for i in items)}


def shards_of(found: dict[str, dict[str, Any]], base: str) -> dict[int, dict[str, Any]]:
    return {int(pk.split("#")[1]): item for pk, item in found.items() if pk.startswith(f"{base}#")}


def assert_one_layout(found: dict[str, dict[str, Any]], base: str, generation: int) -> int:
    """Shard items exist exactly for k < the stored count, all at the last generation."""
    shards = shards_of(found, base)
    layouts = {(int(item["shards"]), int(item["layout"])) for item in shards.values()}
    assert len(layouts) == 1, layouts
    ((count, stored),) = layouts
    assert sorted(shards) == list(range(count))
    assert stored == generation
    return count


def resizer(
    ddb: Any, counter: sharded.ShardedCounter, done: threading.Event, capacity_: bool
) -> list[sharded.Resized]:
    made = []
    try:
        for shards in RESIZES:
            made.append(
                sharded.resize(
                    ddb, counter, shards, capacity=capacity_, backoff=BACKOFF, attempts=50
                )
            )
    finally:
        done.set()  # the others stop on it, whatever happened here
    return made


def run_threads(targets: list[Any]) -> None:
    failures: list[BaseException] = []

    def guarded(target: Any) -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            traceback.print_exc()
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish"
    assert not failures, failures


def test_a_counter_resized_under_takes_and_restocks_keeps_its_total(ddb, table):
    # Given 300 units on one shard, six buyers and a restocker, each with its own hints
    counter = sharded.ShardedCounter(table, "pk", "stock", 1, "count")
    for row in sharded.shard_items(counter, STOCK):
        ddb.put_item(TableName=table, Item=codec.encode_item(row))
    done = threading.Event()
    lock = threading.Lock()
    taken: list[tuple[int, tuple[int, ...]]] = []
    added: list[int] = []
    lost: list[int] = []  # calls that lost every race to the resizes (Retryable: no write)
    resized: list[sharded.Resized] = []

    def buyer(seed: int) -> None:
        rand = random.Random(seed)
        options = sharded.TakeOptions(backoff=BACKOFF, hints=sharded.Hints(), rand=rand)
        for _ in range(TRIES):
            quantity = rand.choice([1, 2, 3])
            try:
                got = sharded.take(ddb, counter, quantity, options)
            except sharded.Exhausted:
                if done.is_set():
                    return
                continue
            except errors.LostEveryRace:  # its reads kept meeting a resize: nothing written
                lost.append(seed)
                continue
            with lock:
                taken.append((quantity, got.shards))
            if done.is_set() and rand.random() < 0.2:
                return

    def restocker() -> None:
        hints = sharded.Hints()
        while not done.is_set():
            sharded.add(ddb, counter, 5, backoff=BACKOFF, hints=hints)
            with lock:
                added.append(5)

    # When the counter is resized six times (1 -> 4 -> 8 -> 2 -> 6 -> 1 -> 5) meanwhile
    run_threads(
        [
            *(lambda s=s: buyer(s) for s in range(6)),
            restocker,
            lambda: resized.extend(resizer(ddb, counter, done, capacity_=False)),
        ]
    )
    # Then every resize applied once, the total is exact and no shard went below zero
    found = rows(ddb, table)
    shards = assert_one_layout(found, "stock", resized[-1].generation)
    assert [r.after for r in resized] == list(RESIZES)
    assert all(a.generation < b.generation for a, b in itertools.pairwise(resized))
    counts = [int(item["count"]) for item in shards_of(found, "stock").values()]
    assert shards == RESIZES[-1]
    assert min(counts) >= 0
    sold = sum(quantity for quantity, _ in taken)
    print(
        f"sold {sold} in {len(taken)} takes ({len(lost)} lost every race), restocked "
        f"{sum(added)}, resizes {resized}"
    )
    assert sum(counts) == STOCK + sum(added) - sold
    assert len(taken) > len(RESIZES)  # the takes did race the resizes


def test_a_capacity_resized_under_joins_and_leaves_counts_each_member_once(ddb, table):
    # Given 24 places on two shards and eight people joining and leaving, own hints each
    places = sharded.ShardedCounter(table, "pk", "event", 2, "count")
    for row in sharded.shard_items(places, 0, limit=PLACES // 2, version=1):
        ddb.put_item(TableName=table, Item=codec.encode_item(row))
    done = threading.Event()
    resized: list[sharded.Resized] = []
    lost: list[int] = []  # joins and leaves that lost every race to the resizes (no write)

    def person(seed: int) -> None:
        rand = random.Random(seed)
        options = sharded.TakeOptions(backoff=BACKOFF, hints=sharded.Hints(), rand=rand)
        for turn in range(TRIES):
            member = capacity.Member(table, {"pk": f"member-{seed}-{turn}"})
            try:
                sharded.join(ddb, places, member, options)
                if rand.random() < 0.6:  # some stay: places the resizes must carry
                    sharded.leave(ddb, places, member, options)
            except sharded.Full:
                continue
            except errors.LostEveryRace:  # a member who did not get to leave stays one
                lost.append(seed)
            if done.is_set():
                return

    # When the capacity is resized six times meanwhile
    run_threads(
        [
            *(lambda s=s: person(s) for s in range(8)),
            lambda: resized.extend(resizer(ddb, places, done, capacity_=True)),
        ]
    )
    # Then the places are all there, no shard over its limit, each member counted once
    found = rows(ddb, table)
    assert_one_layout(found, "event", resized[-1].generation)
    shards = shards_of(found, "event").values()
    assert sum(int(item["limit"]) for item in shards) == PLACES
    assert all(0 <= int(item["count"]) <= int(item["limit"]) for item in shards)
    members = [pk for pk in found if pk.startswith("member-")]
    assert sum(int(item["count"]) for item in shards) == len(members)
    print(f"{len(members)} members stay ({len(lost)} calls lost every race); resizes {resized}")
    # And every member can leave, whatever shard it recorded: the counts come back to zero
    hints = sharded.Hints()
    for pk in members:
        member = capacity.Member(table, {"pk": pk})
        sharded.leave(ddb, places, member, sharded.TakeOptions(backoff=BACKOFF, hints=hints))
    after = shards_of(rows(ddb, table), "event").values()
    assert [int(item["count"]) for item in after] == [0] * RESIZES[-1]


def test_resize_bounds_and_a_resize_to_the_same_count(ddb, table):
    counter = sharded.ShardedCounter(table, "pk", "stock", 3, "count")
    for row in sharded.shard_items(counter, 10):
        ddb.put_item(TableName=table, Item=codec.encode_item(row))
    # A resize past one transaction's items is refused before any call
    with pytest.raises(ValueError, match="1 to 100"):
        sharded.resize(ddb, counter, 101)
    with pytest.raises(ValueError, match="1 to 100"):
        sharded.resize(ddb, counter, 0)
    # The same count writes nothing
    same = sharded.resize(ddb, counter, 3)
    assert (same.before, same.after, same.items, same.generation) == (3, 3, 0, 0)
    assert "layout" not in rows(ddb, table)["stock#0"]
    # A grow spreads the units evenly over the new shards, in one transaction of 5 items
    grown = sharded.resize(ddb, counter, 5)
    assert (grown.before, grown.after, grown.generation, grown.items) == (3, 5, 1, 5)
    assert sorted(sharded.read_all(ddb, counter)) == [2, 2, 2, 2, 2]
    # A caller still at 3 shards reads all five (its reads learn the layout)
    assert len(sharded.read_items(ddb, counter)) == 5
    # A shrink adds the dropped shards' units to the kept ones, one dropped shard a step
    shrunk = sharded.resize(ddb, counter, 2)
    assert (shrunk.before, shrunk.after, shrunk.generation) == (5, 2, 4)
    assert (shrunk.moved, shrunk.items) == (6, 5 + 4 + 3)
    assert sum(sharded.read_all(ddb, counter)) == 10
    # A take of a caller whose hints still say 5 shards lands, or refuses only when short
    hints = sharded.Hints()
    hints.shards.relayout(counter, sharded.Layout(5, 1))
    taken = sharded.take(ddb, counter, 4, sharded.TakeOptions(hints=hints))
    assert hints.shards.layout(counter) == sharded.Layout(2, 4)
    assert taken.shards and max(taken.shards) < 2
    with pytest.raises(sharded.Exhausted):
        sharded.take(ddb, counter, 7, sharded.TakeOptions(hints=hints))
    # A restock with stale hints adds over the shards there are
    stale = sharded.Hints()
    stale.shards.relayout(counter, sharded.Layout(5, 1))
    sharded.add(ddb, counter, 4, hints=stale)
    assert sum(sharded.read_all(ddb, counter)) == 10
    # A resize losing every race says so
    assert issubclass(errors.LostEveryRace, retry.RetriesExhausted)


def test_two_resizers_at_once_never_apply_both_and_keep_the_total(ddb, table):
    # Given 120 units on one shard and two resizers racing from the same layouts, while takes go on
    counter = sharded.ShardedCounter(table, "pk", "stock", 1, "count")
    for row in sharded.shard_items(counter, 120):
        ddb.put_item(TableName=table, Item=codec.encode_item(row))
    done = threading.Event()
    lock = threading.Lock()
    made: list[sharded.Resized] = []
    sold: list[int] = []

    def resizing(targets: tuple[int, ...]) -> None:
        for shards in targets:
            resized = sharded.resize(ddb, counter, shards, backoff=BACKOFF, attempts=50)
            with lock:
                made.append(resized)

    def buyer() -> None:
        options = sharded.TakeOptions(backoff=BACKOFF, hints=sharded.Hints())
        while not done.is_set():
            try:
                sharded.take(ddb, counter, 1, options)
            except sharded.Exhausted:
                return
            with lock:
                sold.append(1)

    def both() -> None:
        try:
            run_threads([lambda: resizing((3, 7, 2, 5)), lambda: resizing((6, 2, 8, 4))])
        finally:
            done.set()

    # When they run together (every resize transaction that applies is counted)
    applied = metrics.Tally()
    metrics.add_sink(applied)
    try:
        run_threads([both, buyer, buyer])
    finally:
        metrics.remove_sink(applied)
    # Then the transactions that applied form one chain of generations, one higher each (two
    # from one read would share one), the table holds the last layout, no unit made or lost
    found = rows(ddb, table)
    last = max(made, key=lambda r: r.generation)
    shards = assert_one_layout(found, "stock", last.generation)
    assert applied.get("sharded", "ShardResize") == last.generation
    assert shards == last.after
    assert sum(int(item["count"]) for item in shards_of(found, "stock").values()) == 120 - len(sold)


class _HeldWrite:
    """``client``, except that its first ``TransactWriteItems`` waits until ``meanwhile()`` has
    run: a resizer whose transaction leaves after another resizer's whole resize."""

    def __init__(self, client: Any, meanwhile: Any) -> None:
        self.client, self.meanwhile = client, meanwhile

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def transact_write_items(self, **request: Any) -> Any:
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            meanwhile()
        return self.client.transact_write_items(**request)


def test_of_two_resizes_from_one_read_the_second_is_refused(ddb, table):
    # Given 20 units on three shards (10, 10, 0), read by a shrink to two shards whose
    # transaction is held until a grow to five shards, from the same layout, has applied; the
    # grow leaves the third shard (at or under its share) as it was, so only the generation
    # both read tells the two apart
    counter = sharded.ShardedCounter(table, "pk", "stock", 3, "count")
    for row, count in zip(sharded.shard_items(counter, 0), (10, 10, 0), strict=True):
        ddb.put_item(TableName=table, Item=codec.encode_item({**row, "count": count}))
    grown: list[sharded.Resized] = []
    held: Any = _HeldWrite(ddb, lambda: grown.append(sharded.resize(ddb, counter, 5)))
    conflicts = metrics.Tally()
    metrics.add_sink(conflicts)
    # When the shrink's transaction is sent after the grow's (one attempt: no read again)
    try:
        with pytest.raises(errors.LostEveryRace):
            sharded.resize(held, counter, 2, backoff=BACKOFF, attempts=1)
    finally:
        metrics.remove_sink(conflicts)
    # Then the grow applied, the shrink was refused (counted as a conflict), and the shards are
    # the grow's five, one layout, the 20 units exact
    assert [(g.before, g.after, g.generation) for g in grown] == [(3, 5, 1)]
    assert conflicts.get("sharded", "ResizeConflict") == 1
    found = rows(ddb, table)
    assert assert_one_layout(found, "stock", 1) == 5
    assert sum(int(item["count"]) for item in shards_of(found, "stock").values()) == 20
    assert sum(sharded.read_all(ddb, counter)) == 20


def test_a_capacity_resized_as_a_counter_is_refused(ddb, table):
    places = sharded.ShardedCounter(table, "pk", "event", 2, "count")
    for row in sharded.shard_items(places, 0, limit=6, version=1):
        ddb.put_item(TableName=table, Item=codec.encode_item(row))
    with pytest.raises(ValueError, match="capacity=True"):
        sharded.resize(ddb, places, 4)
    assert sum(int(i["limit"]) for i in shards_of(rows(ddb, table), "event").values()) == 12
