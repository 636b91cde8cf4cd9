"""Sharded takes guided by what this process knows of its shards
(``turnstile_ddb.sharded.ShardHints``),
on DynamoDB Local: the first write goes to a shard with stock and not throttled lately, a refusal
reads only the shards whose count is not known, and refusals stay exact under real threads with
the hints trusted for the whole run (checked from the recorded history and the table)."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest

from tests.helpers import Faults
from turnstile_ddb import codec, metrics, retry, sharded

pytestmark = pytest.mark.integration


def counter_of(tables: Any, base: str, shards: int) -> sharded.ShardedCounter:
    return sharded.ShardedCounter(
        table=tables["products"], key_attr="productId", base=base, shards=shards, count_attr="stock"
    )


def stock(client: Any, counter: sharded.ShardedCounter, counts: list[int]) -> None:
    for shard, count in enumerate(counts):
        client.put_item(
            TableName=counter.table,
            Item=codec.encode_item({**counter.key(shard), counter.count_attr: count}),
        )


class Sent:
    """The shard each UpdateItem wrote, and the keys each BatchGetItem read, until :meth:`stop`
    (the client is the session's: a hook left on it would see every later test's calls)."""

    EVENT = "provide-client-params.dynamodb"

    def __init__(self, client: Any) -> None:
        self.writes: list[str] = []
        self.reads: list[list[str]] = []
        self.client = client
        client.meta.events.register(self.EVENT, self._record)

    def stop(self) -> None:
        self.client.meta.events.unregister(self.EVENT, self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "UpdateItem":
            self.writes.append(params["Key"]["productId"]["S"])
        elif model.name == "BatchGetItem":
            (request,) = params["RequestItems"].values()
            self.reads.append([key["productId"]["S"] for key in request["Keys"]])


@pytest.fixture
def watch(ddb: Any) -> Any:
    """``watch()`` starts a :class:`Sent` on the session's client, stopped after the test."""
    started: list[Sent] = []

    def start() -> Sent:
        started.append(Sent(ddb))
        return started[-1]

    yield start
    for sent in started:
        sent.stop()


def take(client: Any, counter: sharded.ShardedCounter, quantity: int, hints: Any) -> Any:
    untrusted = sharded.SoldOutHints(trust_seconds=0.0)
    options = sharded.TakeOptions(hints=sharded.Hints(shards=hints, sold_out=untrusted))
    return sharded.take(client, counter, quantity, options)


def test_the_first_write_goes_to_the_shard_known_to_have_stock(ddb, tables, unique, watch):
    # Given two shards, this process having learned (from a write's answer) that shard 0 is empty
    counter = counter_of(tables, unique, 2)
    stock(ddb, counter, [0, 20])
    hints = sharded.ShardHints(trust_seconds=0.0)  # known counts guide, never refuse, here
    hints.count(counter, 0, 0)
    sent = watch()
    # When ten takes of one unit are made
    taken = [take(ddb, counter, 1, hints) for _ in range(10)]
    # Then every one wrote shard 1 first, and only shard 1: no failover, no read
    assert [t.shards for t in taken] == [(1,)] * 10
    assert sent.writes == [f"{unique}#1"] * 10 and sent.reads == []


def test_a_shard_known_short_of_q_loses_to_one_that_holds_q(ddb, tables, unique, watch):
    counter = counter_of(tables, unique, 2)
    stock(ddb, counter, [2, 9])
    hints = sharded.ShardHints(trust_seconds=0.0)
    hints.count(counter, 0, 2)
    hints.count(counter, 1, 9)
    sent = watch()
    # A take of 3 never tries shard 0 (2 left), though it was learned with more than shard 1 had
    assert take(ddb, counter, 3, hints).shards == (1,)
    assert sent.writes == [f"{unique}#1"]


def test_a_throttled_shard_is_avoided_while_its_throttle_is_recent(ddb, tables, unique, watch):
    # Given two shards with stock, and a clock this test moves
    counter = counter_of(tables, unique, 2)
    stock(ddb, counter, [50, 50])
    now = [1000.0]
    hints = sharded.ShardHints(trust_seconds=0.0, clock=lambda: now[0])
    sent = watch()
    faults = Faults(ddb)
    # When the first take's write is throttled
    faults.throttle("UpdateItem", 1)
    metrics.tally.reset()
    first = take(ddb, counter, 1, hints)
    hot = sent.writes[0]
    assert metrics.tally.get(sharded.PATTERN, "Throttle") == 1
    # Then that take failed over to the other shard, and the next twenty avoid the hot shard
    other = f"{unique}#{first.shards[0]}"
    assert other != hot
    for _ in range(20):
        take(ddb, counter, 1, hints)
    assert hot not in sent.writes[2:]
    # And once the throttle is older than throttle_seconds, the shard is chosen again
    now[0] += hints.throttle_seconds + 0.1
    for _ in range(20):
        take(ddb, counter, 1, hints)
    assert hot in sent.writes[22:]


def test_a_refusal_reads_only_the_shards_whose_count_it_does_not_know(ddb, tables, unique, watch):
    # Given 4 shards holding 0, 0, 1, 0, and this process knowing shards 0 and 1 read empty just now
    counter = counter_of(tables, unique, 4)
    stock(ddb, counter, [0, 0, 1, 0])
    hints = sharded.ShardHints(trust_seconds=3600.0)
    hints.count(counter, 0, 0)
    hints.count(counter, 1, 0)
    sent = watch()
    # When 2 units are asked for
    with pytest.raises(sharded.Exhausted) as refused:
        take(ddb, counter, 2, hints)
    # Then one write (the better of two choices: a shard not known empty) was refused, and the
    # read covered the other unknown shards only, never all four
    assert refused.value.total == 1 and not refused.value.raced
    assert len(sent.writes) == 1 and sent.writes[0] in {f"{unique}#2", f"{unique}#3"}
    (read,) = sent.reads
    assert sorted(read) == sorted({f"{unique}#2", f"{unique}#3"} - set(sent.writes))
    # And now that every count is known, the next refusal makes no call at all
    metrics.tally.reset()
    with pytest.raises(sharded.Exhausted):
        take(ddb, counter, 2, hints)
    assert len(sent.writes) == 1 and len(sent.reads) == 1
    assert metrics.tally.get(sharded.PATTERN, "ShortHint") == 1
    # While one unit, which the shards do hold, is still sold
    assert take(ddb, counter, 1, hints).shards == (2,)


def test_this_processs_restock_forgets_the_counts_it_knew(ddb, tables, unique):
    counter = counter_of(tables, unique, 2)
    stock(ddb, counter, [0, 0])
    hints = sharded.ShardHints(trust_seconds=3600.0)  # the process's own, given to add()
    hints.count(counter, 0, 0)
    hints.count(counter, 1, 0)
    sharded.add(ddb, counter, 4, hints=sharded.Hints(shards=hints))
    assert hints.known(counter) == {}
    assert take(ddb, counter, 3, hints).remaining >= 0


def test_refusals_are_exact_under_threads_with_the_hints_trusted_all_along(ddb, tables, unique):
    # Given 8 shards holding 60 units, 16 threads taking 1 to 3 units until each is refused, all
    # sharing one set of hints trusted for an hour (no restock happens: counts only go down)
    client = ddb
    counter = counter_of(tables, unique, 8)
    stock(client, counter, sharded.split(60, 8))
    hints = sharded.ShardHints(trust_seconds=3600.0)
    history: list[dict[str, Any]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(16)
    metrics.tally.reset()

    def worker(index: int) -> None:
        rand = random.Random(index)
        barrier.wait()
        while True:
            quantity = rand.choice([1, 2, 3])
            entry: dict[str, Any] = {"q": quantity, "start": time.monotonic()}
            try:
                take(client, counter, quantity, hints)
                entry["outcome"] = "sold"
            except sharded.Exhausted as exc:
                entry.update(outcome="refused", total=exc.total, raced=exc.raced)
            entry["end"] = time.monotonic()
            with lock:
                history.append(entry)
            if entry["outcome"] == "refused" and quantity == 1:
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then everything was sold, exactly: the shards are all empty and nothing went below zero
    sold = sum(e["q"] for e in history if e["outcome"] == "sold")
    assert sold == 60
    assert sharded.read_all(client, counter, retry.Backoff()) == [0] * 8
    # And no refusal came while the shards together held enough: at a refusal's end, even
    # counting every sale that had started by then, fewer than q units were left
    refusals = [e for e in history if e["outcome"] == "refused"]
    assert refusals and not any(e["raced"] for e in refusals)
    for refusal in refusals:
        started = sum(
            e["q"] for e in history if e["outcome"] == "sold" and e["start"] < refusal["end"]
        )
        assert 60 - started < refusal["q"], refusal
    # And once every count was known, refusals were answered without reading the shards again
    assert metrics.tally.get(sharded.PATTERN, "ShortHint") >= 1
