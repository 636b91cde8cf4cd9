"""Sharded counters' hints are the caller's (API shape, moto): a restock given the hints makes
them forget, a call given none remembers nothing, every hint map keeps at most ``max_counters``
counters, ``TakeOptions`` holds take's settings (the 0.3 keywords still work, warning), and a
sharded capacity joins and leaves through :func:`turnstile_ddb.sharded.join` / ``leave``."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from turnstile_ddb import capacity, codec, errors, retry, sharded
from turnstile_ddb.deprecation import TurnstileDeprecationWarning


class Calls:
    """The DynamoDB operations the client sends (and the parameters of each), until stopped."""

    EVENT = "provide-client-params.dynamodb"

    def __init__(self, client: Any) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.client = client
        client.meta.events.register(self.EVENT, self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.sent.append((model.name, params))

    def names(self) -> Counter[str]:
        return Counter(name for name, _ in self.sent)

    def stop(self) -> None:
        self.client.meta.events.unregister(self.EVENT, self._record)


@pytest.fixture
def calls(moto_ddb: Any) -> Iterator[Calls]:
    watched = Calls(moto_ddb)
    yield watched
    watched.stop()


def stocked(client: Any, table: str, counts: list[int], base: str = "p1") -> sharded.ShardedCounter:
    counter = sharded.ShardedCounter(table, "productId", base, len(counts), "stock")
    for shard, count in enumerate(counts):
        client.put_item(
            TableName=table, Item=codec.encode_item({**counter.key(shard), "stock": count})
        )
    return counter


def trusted() -> sharded.Hints:
    """Hints that trust what they learn for an hour (no test here depends on time passing)."""
    return sharded.Hints(
        shards=sharded.ShardHints(trust_seconds=3600.0),
        sold_out=sharded.SoldOutHints(trust_seconds=3600.0),
    )


def test_a_restock_by_add_tells_the_injected_hints_to_forget(moto_ddb, moto_tables, calls):
    # Given a sold-out counter, and hints that learnt so (trusted for an hour)
    counter = stocked(moto_ddb, moto_tables["products"], [0, 0])
    hints = trusted()
    options = sharded.TakeOptions(hints=hints)
    with pytest.raises(sharded.Exhausted):
        sharded.take(moto_ddb, counter, 1, options)
    assert hints.sold_out.fresh(counter) and hints.shards.known(counter) == {0: 0, 1: 0}
    # When units are added with the same hints
    sharded.add(moto_ddb, counter, 4, hints=hints)
    # Then the hints forgot the counter, and the next take sells
    assert not hints.sold_out.empty(counter) and hints.shards.known(counter) == {}
    assert sharded.take(moto_ddb, counter, 1, options).remaining >= 0


def test_set_total_tells_the_injected_hints_the_new_total(moto_ddb, moto_tables):
    counter = stocked(moto_ddb, moto_tables["products"], [3, 3])
    hints = trusted()
    hints.shards.count(counter, 0, 3)
    # Setting the total to zero marks the counter empty (a take refuses without a call) ...
    sharded.set_total(moto_ddb, counter, 0, hints=hints)
    assert hints.sold_out.fresh(counter) and hints.shards.known(counter) == {}
    # ... and setting it again forgets that
    sharded.set_total(moto_ddb, counter, 5, hints=hints)
    assert not hints.sold_out.empty(counter)
    taken = sharded.take(moto_ddb, counter, 2, sharded.TakeOptions(hints=hints))
    assert taken.remaining in (0, 1)  # shards of 3 and 2: what the served shard still holds


def test_a_take_without_hints_remembers_nothing_after_it_returns(moto_ddb, moto_tables, calls):
    # Given a counter a first take (no hints given) found sold out
    counter = stocked(moto_ddb, moto_tables["products"], [0, 0])
    with pytest.raises(sharded.Exhausted):
        sharded.take(moto_ddb, counter, 1)
    # When it is stocked behind the library's back and taken from again, still without hints
    stocked(moto_ddb, moto_tables["products"], [0, 2])
    before = len(calls.sent)
    taken = sharded.take(moto_ddb, counter, 1, sharded.TakeOptions(rand=random.Random(7)))
    # Then the take started with a write, as for a counter never seen (no memory of "sold out")
    assert calls.sent[before][0] == "UpdateItem"
    assert taken.shards == (1,)


def test_the_multi_shard_take_guards_every_shard_with_its_own_count(moto_ddb, moto_tables, calls):
    # Given two shards of one unit each, and a take of two (no single shard holds it)
    counter = stocked(moto_ddb, moto_tables["products"], [1, 1])
    taken = sharded.take(moto_ddb, counter, 2)
    # Then it was one transaction over both shards, each conditioned on holding its part
    (transaction,) = [params for name, params in calls.sent if name == "TransactWriteItems"]
    updates = [element["Update"] for element in transaction["TransactItems"]]
    assert [update["ConditionExpression"] for update in updates] == ["#count >= :take"] * 2
    assert sorted(taken.shards) == [0, 1] and taken.remaining == 0
    assert sharded.read_all(moto_ddb, counter) == [0, 0]


def counter_named(k: int) -> sharded.ShardedCounter:
    return sharded.ShardedCounter("t", "id", f"c{k}", 2, "count")


def test_shard_hints_keep_at_most_max_counters_the_least_recent_dropped_first():
    hints = sharded.ShardHints(trust_seconds=3600.0, max_counters=8)
    for k in range(100):
        hints.count(counter_named(k), 0, k)
        if k >= 1:
            hints.known(counter_named(0))  # counter 0 is used all along: it stays
    assert hints.remembered() == 8
    assert hints.known(counter_named(0)) == {0: 0}
    assert hints.known(counter_named(99)) == {0: 99}
    assert hints.known(counter_named(50)) == {}  # dropped: least recently used


def test_sold_out_hints_keep_at_most_max_counters():
    hints = sharded.SoldOutHints(max_counters=8)
    for k in range(100):
        hints.mark(counter_named(k), True)
    assert hints.remembered() == 8
    assert hints.empty(counter_named(99)) and not hints.empty(counter_named(0))


def test_the_default_bound_is_1024_counters():
    hints = sharded.Hints()
    for k in range(3000):
        hints.shards.throttled(counter_named(k), 1)
        hints.sold_out.mark(counter_named(k), True)
    assert (hints.shards.remembered(), hints.sold_out.remembered()) == (1024, 1024)
    assert hints.shards.max_counters == hints.sold_out.max_counters == 1024


def test_take_options_are_frozen_with_defaults():
    options = sharded.TakeOptions()
    assert (options.rounds, options.hints, options.rand) == (4, None, None)
    assert options.backoff == retry.Backoff()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.rounds = 1  # type: ignore[misc]


def test_the_keywords_of_0_3_still_work_with_a_warning(moto_ddb, moto_tables):
    counter = stocked(moto_ddb, moto_tables["products"], [0, 0])
    known = sharded.ShardHints(trust_seconds=3600.0)
    with (
        pytest.warns(TurnstileDeprecationWarning, match="TakeOptions"),
        pytest.raises(sharded.Exhausted),
    ):
        sharded.take(moto_ddb, counter, 1, backoff=retry.Backoff(), known=known, rounds=1)
    assert known.known(counter) == {0: 0, 1: 0}  # the hints given were the ones used
    with pytest.raises(TypeError):
        sharded.take(moto_ddb, counter, 1, sharded.TakeOptions(), backoff=retry.Backoff())
    with pytest.raises(TypeError):
        sharded.take(moto_ddb, counter, 1, bakcoff=retry.Backoff())


@pytest.mark.parametrize("name", ["ROUNDS", "hints", "shard_hints", "read_with", "read_shards"])
def test_names_that_left_the_surface_warn_and_still_answer(name):
    with pytest.warns(TurnstileDeprecationWarning, match=f"sharded.{name} is deprecated"):
        value = getattr(sharded, name)
    assert value is not None and name not in sharded.__all__


def test_the_deprecated_process_hints_hold_no_state():
    with pytest.warns(TurnstileDeprecationWarning):
        first: Any = sharded.hints
    first.mark(counter_named(1), True)
    with pytest.warns(TurnstileDeprecationWarning):
        assert not sharded.hints.empty(counter_named(1))  # type: ignore[attr-defined]


def capacity_of(table: str, limits: list[int]) -> sharded.ShardedCounter:
    return sharded.ShardedCounter(
        table, "eventId", "e1", len(limits), "registered", (("sk", "SHARD"),), "capacity"
    )


def member(table: str, user: str) -> capacity.Member:
    return capacity.Member(table, {"eventId": f"e1#{user}", "sk": f"REG#{user}"}, {"userId": user})


def test_a_sharded_capacity_fills_exactly_and_a_leave_frees_a_place(moto_ddb, moto_tables):
    # Given a capacity of two places over two shards, and hints shared by every call
    table = moto_tables["events"]
    counter = capacity_of(table, [1, 1])
    for shard in range(2):
        item = {**counter.key(shard), "registered": 0, "capacity": 1, "version": 1}
        moto_ddb.put_item(TableName=table, Item=codec.encode_item(item))
    options = sharded.TakeOptions(hints=sharded.Hints())
    # When three members join
    joined = [sharded.join(moto_ddb, counter, member(table, u), options) for u in ("a", "b")]
    with pytest.raises(sharded.Full) as full:
        sharded.join(moto_ddb, counter, member(table, "c"), options)
    # Then two got one shard each, the third was refused from one read, and nobody joins twice
    assert sorted(joined) == [0, 1]
    assert (full.value.count, full.value.limit, full.value.raced) == (2, 2, False)
    assert options.hints is not None and options.hints.sold_out.empty(counter)
    with pytest.raises(capacity.AlreadyMember):
        sharded.join(moto_ddb, counter, member(table, "a"), options)
    # And a leave gives the place back on the shard recorded, and the hints forget "full"
    assert sharded.leave(moto_ddb, counter, member(table, "a"), options) == joined[0]
    assert not options.hints.sold_out.empty(counter)
    assert sharded.join(moto_ddb, counter, member(table, "c"), options) == joined[0]
    with pytest.raises(capacity.NotMember):
        sharded.leave(moto_ddb, counter, member(table, "a"), options)


def test_a_join_without_shards_is_missing(moto_ddb, moto_tables):
    table = moto_tables["events"]
    with pytest.raises(sharded.Missing):
        sharded.join(moto_ddb, capacity_of(table, [1, 1]), member(table, "a"))


class Seen:
    """A load observer that keeps what it is told."""

    def __init__(self) -> None:
        self.kinds: list[tuple[str, int]] = []

    def saw(self, counter: sharded.ShardedCounter, kind: str, units: int = 1) -> None:
        self.kinds.append((kind, units))


def test_the_calls_tell_the_load_observer_what_they_saw(moto_ddb, moto_tables):
    # Given a counter of two shards, and hints with a load observer
    counter = stocked(moto_ddb, moto_tables["products"], [2, 1])
    seen = Seen()
    options = sharded.TakeOptions(hints=sharded.Hints(load=seen), rand=random.Random(3))
    # When a take sells, one is refused, a restock adds and a resize runs
    sharded.take(moto_ddb, counter, 1, options)
    with pytest.raises(sharded.Exhausted):
        sharded.take(moto_ddb, counter, 9, options)
    sharded.add(moto_ddb, counter, 4, hints=options.hints)
    sharded.resize(moto_ddb, counter, 3, hints=options.hints)
    # Then the observer heard each, with its units
    assert seen.kinds[0] == ("taken", 1)
    assert ("refused", 9) in seen.kinds and ("restocked", 4) in seen.kinds
    assert options.hints is not None and options.hints.shards.layout(counter).shards == 3


def test_a_caller_with_an_old_shard_count_learns_the_new_one_from_a_shard(moto_ddb, moto_tables):
    # Given a counter grown from two shards to four, and a caller that still says two
    counter = stocked(moto_ddb, moto_tables["products"], [4, 4])
    sharded.resize(moto_ddb, counter, 4)
    hints = sharded.Hints()
    # When it reads, and when it takes more than its two shards hold
    assert len(sharded.read_all(moto_ddb, counter)) == 4
    taken = sharded.take(moto_ddb, counter, 2, sharded.TakeOptions(hints=hints))
    # Then its hints learned the layout from the shard it met, and the read saw all four
    assert hints.shards.layout(counter) == sharded.Layout(4, 1)
    assert hints.shards.current(counter).shards == 4
    assert sum(sharded.read_all(moto_ddb, counter)) == 8 - 2 and taken.remaining >= 0
    # And a shrink back to one is learned from the shards that are gone
    sharded.resize(moto_ddb, counter, 1)
    sharded.take(moto_ddb, counter, 1, sharded.TakeOptions(hints=hints))
    assert hints.shards.layout(counter).shards == 1
    assert sharded.read_all(moto_ddb, counter) == [5]


class Shifting:
    """A client whose shards show two layouts for the first ``moving`` reads (a resize going
    on, one step after another), then one."""

    def __init__(self, moving: int) -> None:
        self.moving = moving
        self.reads = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.reads += 1
        ((table, request),) = RequestItems.items()
        settled = self.reads > self.moving
        items = [
            {**key, "count": {"N": "1"}, "shards": {"N": "2"},
             "layout": {"N": "1" if settled or key["pk"]["S"].endswith("#0") else "0"}}
            for key in request["Keys"]
        ]  # fmt: skip
        return {"Responses": {table: items}, "UnprocessedKeys": {}}


def test_a_read_chasing_a_resize_pauses_between_its_later_reads():
    # Given a counter whose shards disagree on their layout for three reads
    counter = sharded.ShardedCounter("stock", "pk", "hot", 2, "count")
    slept: list[float] = []
    backoff = retry.Backoff(base=0.01, cap=0.01, sleep=slept.append, rand=lambda: 1.0)
    client = Shifting(moving=3)
    # When it is read, the second read comes at once and each later one after a pause
    assert sharded.read_all(client, counter, backoff=backoff) == [1, 1]  # type: ignore[arg-type]
    assert client.reads == 4 and slept == [0.01, 0.01]
    # And a resize that never settles is a lost race after RELAYOUT_READS reads
    slept.clear()
    with pytest.raises(errors.LostEveryRace):
        sharded.read_all(Shifting(moving=99), counter, backoff=backoff)  # type: ignore[arg-type]
    assert len(slept) == sharded.RELAYOUT_READS - 2


class ThrottledWrites:
    """A client whose next ``times`` single-item writes are throttled (not sent); the rest go
    to ``client``."""

    def __init__(self, client: Any, times: int) -> None:
        self.client = client
        self.times = times

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def update_item(self, **params: Any) -> Any:
        if self.times > 0:
            self.times -= 1
            code, message = "ProvisionedThroughputExceededException", "injected"
            raise ClientError({"Error": {"Code": code, "Message": message}}, "UpdateItem")
        return self.client.update_item(**params)


def test_rounds_whose_writes_were_throttled_never_end_in_a_refusal(moto_ddb, moto_tables):
    # Given 10 units on two shards, and the next six writes throttled (the keys over their limit)
    counter = stocked(moto_ddb, moto_tables["products"], [5, 5])
    client = ThrottledWrites(moto_ddb, 6)
    quiet = retry.Backoff(attempts=8, base=0, cap=0, sleep=lambda s: None)
    # When a take allowed one lost race goes on through them
    options = sharded.TakeOptions(backoff=quiet, rounds=1)
    taken = sharded.take(client, counter, 1, options)  # type: ignore[arg-type]
    # Then it sells (six throttled rounds are the backoff's to bound, not lost races)
    assert taken.remaining == 4 and sum(sharded.read_all(moto_ddb, counter)) == 9
    # And throttled past the backoff's attempts, it stays throttled: never "sold out"
    client.times = 20
    with pytest.raises(errors.StayedThrottled):
        sharded.take(client, counter, 1, options)  # type: ignore[arg-type]
    assert sum(sharded.read_all(moto_ddb, counter)) == 9
