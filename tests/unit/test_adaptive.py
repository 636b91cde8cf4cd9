"""turnstile_ddb.adaptive: the load window, the resize policy (on a fake clock, against a model
of DynamoDB's per-key limit: a shard throttles only when the load is over its share of the
capacity) and the resizer's decisions that need no resize (the lease held by another).

Given / When / Then: given a counter's load over time, when the policy decides, then it grows
under throttles, never flaps under a constant load, shrinks after a quiet period, waits out its
cooldown, and refuses a policy that could flap."""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from sim.ddb import Awaited, create_table, moto_dynamodb
from turnstile_ddb import adaptive, aio, lease, metrics, retry, sharded

COUNTER = sharded.ShardedCounter("stock", "pk", "hot", 1, "count")
POLICY = adaptive.ResizePolicy()
LIMIT = POLICY.one_key_limit


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Model:
    """A counter under a constant or stepped offered rate, as DynamoDB's per-key limit treats it:
    served = min(offered, shards * limit); every unit over the capacity is a throttled write,
    ``retries`` times over (a throttled take fails over to other shards)."""

    shards: int
    policy: adaptive.ResizePolicy = POLICY
    retries: int = 1
    step: float = 0.25
    clock: Clock = field(default_factory=Clock)
    moves: list[adaptive.Decision] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.window = adaptive.LoadWindow(clock=self.clock)

    def run(self, offered: float, seconds: float) -> list[float]:
        """``seconds`` at ``offered`` units per second, deciding every step; each step's served
        rate."""
        served_rates = []
        for _ in range(round(seconds / self.step)):
            self.clock.now += self.step
            capacity = self.shards * self.policy.one_key_limit
            served = min(offered, capacity)
            served_rates.append(served)
            if served:
                self.window.saw(COUNTER, "taken", round(served * self.step))
            over = round((offered - served) * self.step * self.retries)
            if over:
                self.window.saw(COUNTER, "throttled", over)
            seen = self.window.observe(COUNTER)
            decision = self.policy.decide(seen, self.shards, self.clock.now)
            if decision is not None:
                self.moves.append(decision)
                self.shards = decision.target
                self.window.resized(COUNTER)
        return served_rates

    def directions(self) -> str:
        return "".join(move.direction[0] for move in self.moves)


# -- the window --------------------------------------------------------------------------------


def test_the_window_gives_rates_over_its_last_seconds_and_forgets_older_ones():
    clock = Clock(100.05)  # off the buckets' edges
    window = adaptive.LoadWindow(window=5.0, recent=5.0, buckets=10, clock=clock)
    for _ in range(50):  # 10 s at 100 units/s and 5 throttles/s
        clock.now += 0.2
        window.saw(COUNTER, "taken", 20)
        window.saw(COUNTER, "throttled", 1)
    seen = window.observe(COUNTER)
    assert 4.5 <= seen.span <= 5.0
    assert 95 <= seen.taken <= 105
    assert 4.75 <= seen.throttled <= 5.25
    assert 80 <= seen.peak <= 120  # two or three saws of 20 in a 0.5 s bucket
    assert seen.last_taken == seen.last_throttled == seen.last_activity == clock.now
    clock.now += 5.0
    later = window.observe(COUNTER)
    assert later.taken == later.throttled == later.peak == 0
    assert later.last_taken == seen.last_taken


def test_the_peak_is_the_busiest_bucket_of_the_whole_window():
    clock = Clock(100.05)
    window = adaptive.LoadWindow(window=30.0, recent=5.0, buckets=30, clock=clock)
    window.saw(COUNTER, "taken", 3000)
    clock.now += 1.0
    window.saw(COUNTER, "left", 500)
    clock.now += 20.0
    seen = window.observe(COUNTER)
    assert seen.taken == seen.left == 0  # older than recent
    assert seen.peak == 3000.0  # units per second of its 1 s bucket
    clock.now += 10.0
    assert window.observe(COUNTER).peak == 0


def test_a_counter_first_seen_lately_is_measured_over_the_time_since():
    clock = Clock()
    window = adaptive.LoadWindow(clock=clock)
    window.saw(COUNTER, "taken", 100)
    clock.now += 1.0
    seen = window.observe(COUNTER)
    assert seen.span == 1.0
    assert seen.taken == 100.0


def test_a_counter_never_seen_gives_nothing_to_decide_on():
    seen = adaptive.LoadWindow().observe(COUNTER)
    assert seen.started is None
    assert POLICY.decide(seen, 50, 1e9) is None


def test_a_resize_forgets_the_throttles_of_the_old_layout_and_keeps_the_sales():
    clock = Clock()
    window = adaptive.LoadWindow(clock=clock)
    window.saw(COUNTER, "taken", 10)
    window.saw(COUNTER, "throttled", 10)
    window.saw(COUNTER, "conflict", 10)
    window.resized(COUNTER)
    seen = window.observe(COUNTER)
    assert seen.throttled == seen.conflicts == 0
    assert seen.taken > 0
    assert seen.last_resized == clock.now


def test_the_window_remembers_at_most_max_counters():
    window = adaptive.LoadWindow(max_counters=3)
    for k in range(10):
        window.saw(sharded.ShardedCounter("t", "pk", f"c{k}", 1, "count"), "taken")
    assert window.remembered() == 3


def test_threads_seeing_one_counter_lose_no_unit():
    # No DynamoDB here (and no moto): only the window's own lock is under test
    clock = Clock()
    window = adaptive.LoadWindow(window=60.0, clock=clock)
    start = threading.Barrier(8)

    def see() -> None:
        start.wait(timeout=30)
        for _ in range(2000):
            window.saw(COUNTER, "taken")

    threads = [threading.Thread(target=see) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    clock.now += 1.0
    seen = window.observe(COUNTER)
    assert seen.taken * seen.span == 16_000


# -- the policy ----------------------------------------------------------------------------------


def test_throttles_grow_a_counter_at_once_by_at_least_the_grow_factor():
    model = Model(shards=1)
    model.run(offered=1.5 * LIMIT, seconds=1)
    assert model.directions() == "u"
    assert model.shards >= 2
    assert "throttles/s" in model.moves[0].reason


def test_a_throttled_grow_is_capped_however_many_throttles_are_counted():
    model = Model(shards=2, retries=20)
    model.run(offered=50 * LIMIT, seconds=0.25)
    assert model.shards == 8  # 2 * grow_cap


def test_a_local_rate_near_the_capacity_grows_before_any_throttle():
    model = Model(shards=2)
    model.run(offered=1.7 * LIMIT, seconds=6)  # 85% of 2000/s, never throttled
    assert model.directions() == "u"
    assert model.shards * LIMIT >= 1.5 * 1.7 * LIMIT * 0.9  # headroom, measured a little low
    assert "lower bound" in model.moves[0].reason


RATES = [0, 50, 700, 800, 999, 1000, 1100, 1600, 2500, 4000, 8000, 12_000, 40_000, 90_000]


@pytest.mark.parametrize("retries", [1, 3])
@pytest.mark.parametrize("start", [1, 2, 8, 30, 100])
@pytest.mark.parametrize("rate", RATES)
def test_a_constant_load_never_flaps(rate, start, retries):
    # Given a constant offered rate and any starting shard count
    model = Model(shards=start, retries=retries)
    # When the policy decides every 250 ms for four minutes
    served = model.run(offered=rate, seconds=240)
    # Then its moves are some grows, then at most one shrink (a throttled grow's overshoot, or a
    # start too large), never a grow after a shrink; and two more minutes change nothing
    assert re.fullmatch(r"u*d?", model.directions()), model.moves
    assert all(move.target != move.current for move in model.moves)
    settled = model.shards
    more = Model(shards=settled, retries=retries, clock=model.clock)
    more.window = model.window
    more.run(offered=rate, seconds=120)
    assert more.moves == []
    # and it serves the whole load once settled (up to the 100-shard bound)
    assert served[-1] == min(rate, 100 * LIMIT)
    print(f"rate {rate}/s from {start} shard(s): {model.directions() or '-'} -> {settled}")


def test_a_constant_load_settles_where_growing_and_shrinking_agree():
    for rate in RATES[1:]:
        model = Model(shards=1)
        model.run(offered=rate, seconds=600)
        # capacity at least load / grow_at (else it grows), at most what a shrink would leave
        grown = POLICY.needed(rate, 1 / POLICY.grow_at)
        assert model.shards >= grown, rate
        assert model.shards <= POLICY.needed(rate, POLICY.shrink_headroom) / POLICY.shrink_below
        print(f"{rate}/s settles at {model.shards} shards ({model.directions()})")


def test_a_quiet_counter_shrinks_to_min_shards_after_shrink_after_and_not_before():
    model = Model(shards=1)
    model.run(offered=8 * LIMIT, seconds=40)
    grown = model.shards
    assert grown >= 12
    model.run(offered=0, seconds=POLICY.shrink_after - 1)
    assert model.shards == grown
    model.run(offered=0, seconds=2)
    assert model.shards == 1
    assert model.moves[-1].direction == "down"
    assert "no unit taken" in model.moves[-1].reason


def test_a_ramp_up_and_down_is_served_within_10_s_of_each_step_and_ends_small():
    # The benchmark's ramp, under the same model: 30 s steps from 0.2x to 8x one key's limit
    # and back; sales >= 0.8 x min(offered, 8 x one key) from 10 s into every step up; at most
    # 2 shards within 60 s of the ramp's end
    model = Model(shards=1)
    steps = [0.2, 0.5, 1, 2, 4, 8, 4, 2, 1, 0.5, 0.2]
    previous = 0.0
    for factor in steps:
        offered = factor * LIMIT
        served = model.run(offered=offered, seconds=30)
        if offered > previous:
            after_10s = served[round(10 / model.step) :]
            assert min(after_10s) >= 0.8 * min(offered, 8 * LIMIT), (factor, model.moves)
        print(f"{factor}x: {model.shards} shards, lowest served {min(served):.0f}/s")
        previous = offered
    model.run(offered=0, seconds=60)
    assert model.shards <= 2
    assert re.fullmatch(r"u+d+", model.directions()), model.directions()


def test_within_the_cooldown_nothing_is_decided_even_under_throttles():
    model = Model(shards=1)
    model.run(offered=8 * LIMIT, seconds=0.25)
    assert model.directions() == "u"
    after = model.shards
    model.run(offered=100 * LIMIT, seconds=POLICY.cooldown - 0.5)
    assert model.shards == after
    model.run(offered=100 * LIMIT, seconds=1)
    assert model.shards > after


def test_a_counter_whose_counts_are_near_zero_shrinks_and_says_why():
    # Given 20 shards and a trickle of sales among many refusals and failovers (the shards
    # hold almost nothing, so most writes are refused)
    clock = Clock()
    window = adaptive.LoadWindow(clock=clock)
    for _ in range(int(30 / 0.5)):
        clock.now += 0.5
        window.saw(COUNTER, "taken", 5)
        window.saw(COUNTER, "conflict", 20)
        window.saw(COUNTER, "refused", 20)
    decision = POLICY.decide(window.observe(COUNTER), 20, clock.now)
    # Then it shrinks to what the sales need, and the reason names the near-zero counts
    assert decision is not None
    assert (decision.direction, decision.target) == ("down", 1)
    assert "near zero" in decision.reason


def test_a_sold_out_counter_only_refusing_shrinks_to_min_shards():
    clock = Clock()
    window = adaptive.LoadWindow(clock=clock)
    policy = adaptive.ResizePolicy(min_shards=2)
    for _ in range(int(POLICY.shrink_after) + 1):
        clock.now += 1.0
        window.saw(COUNTER, "refused", 50)
    decision = policy.decide(window.observe(COUNTER), 16, clock.now)
    assert decision is not None
    assert (decision.direction, decision.target) == ("down", 2)


def test_members_leaving_count_as_load_on_a_sharded_capacity():
    clock = Clock()
    window = adaptive.LoadWindow(clock=clock)
    for _ in range(20):
        clock.now += 0.25
        window.saw(COUNTER, "taken", 110)  # joins
        window.saw(COUNTER, "left", 110)
    decision = POLICY.decide(window.observe(COUNTER), 1, clock.now)
    assert decision is not None
    assert decision.direction == "up"


@pytest.mark.parametrize(
    ("changes", "field_named"),
    [
        ({"one_key_limit": 0}, "one_key_limit"),
        ({"grow_at": 0}, "grow_at"),
        ({"grow_at": 1.2}, "grow_at"),
        ({"grow_throttles": -1}, "grow_throttles"),
        ({"headroom": 1.1}, "headroom"),  # 0.8 * 1.1 < 1: a grow would grow again
        ({"shrink_headroom": 1.2}, "shrink_headroom"),  # below headroom: shrink after grow
        ({"grow_factor": 1.0}, "grow_factor"),
        ({"grow_cap": 1.5}, "grow_cap"),
        ({"shrink_after": 0}, "shrink_after"),
        ({"cooldown": -1}, "cooldown"),
        ({"min_shards": 0}, "min_shards"),
        ({"min_shards": 5, "max_shards": 4}, "max_shards"),
        ({"max_shards": 101}, "max_shards"),
    ],
)
def test_a_policy_that_cannot_work_is_refused_naming_the_field(changes, field_named):
    with pytest.raises(ValueError, match=field_named):
        adaptive.ResizePolicy(**changes)


@pytest.mark.parametrize(
    ("changes", "field_named"),
    [({"window": 0}, "window"), ({"buckets": 0}, "buckets"), ({"max_counters": 0}, "max_counters")],
)
def test_a_window_that_cannot_work_is_refused_naming_the_field(changes, field_named):
    with pytest.raises(ValueError, match=field_named):
        adaptive.LoadWindow(**changes)


# -- the resizer, where no resize is due or another resizer holds the lease ------------------------


@pytest.fixture
def client() -> Iterator[Any]:
    with moto_dynamodb() as moto:
        create_table(moto, "leases", "resource")
        create_table(moto, "stock", "pk")
        yield moto


def throttled_window(clock: Clock) -> adaptive.LoadWindow:
    window = adaptive.LoadWindow(clock=clock)
    for _ in range(10):
        clock.now += 0.1
        window.saw(COUNTER, "throttled", 5)
    return window


def test_no_call_is_made_when_no_resize_is_due():
    class NoCalls:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"called {name}")

    resizer = adaptive.Resizer(NoCalls(), lease.Leases(NoCalls(), "leases"))  # type: ignore[arg-type]
    resizer.load.saw(COUNTER, "taken")
    assert resizer.maybe_resize(COUNTER) is None


def test_a_lease_held_by_another_resizer_skips_the_resize_counts_it_and_cools_down(client, caplog):
    clock = Clock()
    leases = lease.Leases(client, "leases", backoff=retry.Backoff(sleep=lambda s: None))
    other = adaptive.Resizer(client, leases, owner="other")
    leases.acquire("resize/stock/hot/count", "other", 60_000)
    resizer = adaptive.Resizer(client, leases, load=throttled_window(clock), owner="me")
    assert other.owner == "other"
    before = metrics.tally.get("adaptive", "ResizeSkipped")
    with caplog.at_level(logging.INFO, logger="turnstile_ddb.adaptive"):
        assert resizer.maybe_resize(COUNTER) is None
    assert metrics.tally.get("adaptive", "ResizeSkipped") == before + 1
    assert "another resizer ('other') holds the lease" in caplog.text
    # and within the cooldown it does not ask for the lease again
    assert resizer.decide(COUNTER) is None


def parameters(function: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_the_async_resizer_takes_the_sync_ones_parameters():
    assert parameters(aio.adaptive.Resizer) == parameters(adaptive.Resizer)
    sync, awaited = adaptive.Resizer.maybe_resize, aio.adaptive.Resizer.maybe_resize
    assert parameters(awaited) == parameters(sync)
    assert inspect.iscoroutinefunction(awaited)


def test_the_async_resizer_skips_a_held_lease_as_the_sync_one_does(client):
    clock = Clock()
    lease.Leases(client, "leases").acquire("resize/stock/hot/count", "other", 60_000)
    leases = aio.lease.Leases(Awaited(client), "leases")
    resizer = aio.adaptive.Resizer(Awaited(client), leases, load=throttled_window(clock))
    before = metrics.tally.get("adaptive", "ResizeSkipped")
    assert resizer.decide(COUNTER) is not None
    assert asyncio.run(resizer.maybe_resize(COUNTER)) is None
    assert metrics.tally.get("adaptive", "ResizeSkipped") == before + 1
    assert resizer.decide(COUNTER) is None  # cooling down


class CountingWindow(adaptive.LoadWindow):
    """A window that counts how often it was looked at."""

    looks = 0

    def observe(self, counter: sharded.ShardedCounter, now: float | None = None) -> Any:
        self.looks += 1
        return super().observe(counter, now)


def test_the_hot_path_looks_at_the_window_at_most_every_quarter_second():
    class NoCalls:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"called {name}")

    clock = Clock()
    window = CountingWindow(clock=clock)
    resizer = adaptive.Resizer(NoCalls(), lease.Leases(NoCalls(), "leases"), load=window)  # type: ignore[arg-type]
    window.saw(COUNTER, "taken")
    for _ in range(100):
        assert resizer.maybe_resize(COUNTER) is None
    assert window.looks == 1
    clock.now += 0.25
    assert resizer.maybe_resize(COUNTER) is None
    assert window.looks == 2
    assert resizer.decide(COUNTER) is None  # asking the policy directly always looks
    assert window.looks == 3


def test_every_decision_moves_within_the_range_in_the_direction_it_names():
    # Given 5000 random observations (seeded) and shard counts, Then a decision's target is in
    # min_shards..max_shards, differs from the current count, and lies the way it says
    rand = random.Random(44)
    policy = adaptive.ResizePolicy(min_shards=2, max_shards=40)
    decided = 0
    for _ in range(5000):
        now = 1000.0
        seen = adaptive.Observation(
            window=30.0,
            span=rand.choice([1.0, 5.0]),
            taken=rand.choice([0.0, rand.uniform(0, 60_000)]),
            left=rand.choice([0.0, rand.uniform(0, 5_000)]),
            throttled=rand.choice([0.0, rand.uniform(0, 10_000)]),
            conflicts=rand.uniform(0, 100),
            refused=rand.uniform(0, 100),
            peak=rand.choice([0.0, rand.uniform(0, 2_000), rand.uniform(0, 60_000)]),
            started=now - rand.uniform(0, 100),
            last_taken=rand.choice([None, now - rand.uniform(0, 60)]),
            last_throttled=rand.choice([None, now - rand.uniform(0, 60)]),
            last_resized=rand.choice([None, now - rand.uniform(0, 60)]),
        )
        current = rand.randint(policy.min_shards, policy.max_shards)
        decision = policy.decide(seen, current, now)
        if decision is None:
            continue
        decided += 1
        assert policy.min_shards <= decision.target <= policy.max_shards
        assert decision.current == current != decision.target
        assert (decision.target > current) == (decision.direction == "up")
        assert decision.reason
    assert decided > 1000  # the observations did reach the rules


def test_a_resizer_that_cannot_hold_a_lease_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="lease_ms"):
        adaptive.Resizer(Any, lease.Leases(Any, "leases"), lease_ms=0)  # type: ignore[arg-type]


def test_a_capacity_grows_earlier_and_further_than_a_counter():
    # Given a policy, and its version for capacities
    small = adaptive.ResizePolicy(one_key_limit=20)
    early = small.for_capacities()
    assert (early.grow_at, early.headroom, early.shrink_headroom) == (0.4, 3.0, 3.5)
    assert early.cooldown == small.cooldown
    assert early.one_key_limit == 10  # a join writes its shard in a transaction: two units
    # (a policy already earlier than that keeps its own figures)
    eager = adaptive.ResizePolicy(grow_at=0.3, headroom=4, shrink_headroom=5).for_capacities()
    assert (eager.grow_at, eager.headroom, eager.shrink_headroom) == (0.3, 4, 5)
    # When a process sees 10 units/s on two shards (a quarter of their capacity as a counter's,
    # half as a capacity's)
    clock = Clock()
    window = adaptive.LoadWindow(clock=clock)
    two = COUNTER.with_shards(2)
    for _ in range(50):
        clock.now += 0.1
        window.saw(two, "taken", 1)
    leases = lease.Leases(None, "leases")  # type: ignore[arg-type]
    resizer = adaptive.Resizer(None, leases, small, window)  # type: ignore[arg-type]
    # Then a counter stays (below grow_at 0.8), a capacity grows to 3 times its load
    assert resizer.decide(two) is None
    decision = resizer.decide(two, capacity=True)
    assert decision is not None and decision.direction == "up"
    rate = window.observe(two, clock.now).taken  # about 10/s, as the window measures it
    assert decision.target == early.needed(rate, early.headroom) >= 3
