"""Shard counts that follow the load: watch what a process's takes meet, decide, resize.

Three parts, each usable alone:

* :class:`LoadWindow` watches. It is the ``load`` of a :class:`turnstile_ddb.sharded.Hints`
  (``Hints(load=window)``): every take, join, leave and restock given those hints tells it what
  happened (:meth:`LoadWindow.saw`), and it keeps, per counter, the units taken, the throttles,
  the conflicts and the refusals of the last ``window`` seconds (sliding, in ``buckets`` steps),
  and when each last happened. Thread-safe; at most ``max_counters`` counters, the least recently
  seen forgotten first; its clock is injected (``time.monotonic`` by default).
* :class:`ResizePolicy` decides. :meth:`ResizePolicy.decide` is pure arithmetic on an
  :class:`Observation`: a :class:`Decision` (a target shard count, ``"up"`` or ``"down"``, and
  a reason a person can read) or ``None``.
* :class:`Resizer` acts. ``maybe_resize(counter)`` decides (no call when the answer is none,
  and a look at the window at most every ``LOOK_EVERY`` = 0.25 s a counter: in between, a clock
  read and a lookup, cheap enough to run after every take), and when the policy says so takes
  the counter's resize lease without waiting (:class:`turnstile_ddb.lease.Leases`; held by
  someone else: skip), reads shard 0 for the current shard count (another count than the one
  decided on: it was resized meanwhile, skip), and calls :func:`turnstile_ddb.sharded.resize`.

Wiring it (one of each per process, shared by its threads)::

    window = adaptive.LoadWindow()
    hints = sharded.Hints(load=window)
    resizer = adaptive.Resizer(client, leases, load=window, hints=hints)
    sharded.take(client, counter, 1, sharded.TakeOptions(hints=hints))
    resizer.maybe_resize(counter)            # sharded.Resized, or None

``Resizer(client, leases, policy=ResizePolicy(), load=LoadWindow(), *, hints=None, owner=None,
lease_ms=10_000)``: ``client`` a boto3 DynamoDB client (``maybe_resize(..., client=other)``
uses another for one call); ``leases`` the lease table (its settings: the requests go through
the resizer's client, and every call of a resize retries under its ``backoff``); ``hints`` the
hints the takes use (the resize tells them the new layout, and the resizer reads its current
belief of the shard count from them); ``owner`` the lease owner's name (a random one by
default); ``lease_ms`` how long a resize may hold the lease.

**What the policy sees.** Throttles are the global truth: a shard throttles only when its key is
over its write limit, whichever process sent the writes, so one process seeing throttles knows
the counter is too hot, however many processes share it. The rates a process counts itself are a
lower bound of the global rate (other processes take too): growing on them is always justified,
shrinking on them alone is not, so a shrink also waits for ``shrink_after`` seconds without a
throttle and since the last resize. Counts near zero show as refusals and failovers (conflicts)
outnumbering sales; such a counter pays a read of every shard per refusal, and its sales rate is
low, so the shrink rule takes it down; a counter nobody bought from for ``shrink_after`` seconds
(sold out, or forgotten) goes to ``min_shards``.

**The rules** (``L`` = ``one_key_limit``, ``N`` = the current shard count; ``load`` = units
taken plus members left (both write a shard), per second over the window's last ``recent``
seconds; ``peak`` = the highest load of any whole bucket in its last ``window`` seconds)::

    within cooldown of the last resize (or a resize someone else was doing): nothing
    throttled >= grow_throttles:  up to N*grow_factor .. N*grow_cap, as the estimate
                                  load + throttled needs (times headroom)
    load >= grow_at * N * L:      up to ceil(load * headroom / L)            (at least N + 1)
    no sale for shrink_after:     down to min_shards
    no throttle and no resize for shrink_after:
                                  down to M = ceil(peak * shrink_headroom / L),
                                  if M <= N * shrink_below

Grow fast (at once, multiplying), shrink slowly (after ``shrink_after``, to fit the peak, by a
quarter of the shards at least). **No flapping**: a grow leaves the load at most
``1 / headroom`` of the new capacity, below ``grow_at`` (validated: ``grow_at * headroom > 1``),
so it does not grow again on the same load; a shrink goes to a count whose capacity is
``shrink_headroom`` times the peak, at least what a grow would choose (validated:
``shrink_headroom >= headroom``), so a constant load never grows again after a shrink and never
shrinks after a load-driven grow. The one reversal a constant load can see is a throttle-driven
grow that overshot (its estimate counts throttled attempts, failovers included), corrected by
one shrink ``shrink_after`` later. ``tests/unit/test_adaptive.py`` runs the rules against a model
of the per-key limit, for constant loads from 0 to 90 times one key's and every start from 1 to
100 shards: some grows, then at most one shrink, then still.

**One resizer at a time.** The lease (resource ``resize/<table>/<base>/<count attribute>``) is
taken with one non-blocking acquire: held by another resizer, this one skips (``ResizeSkipped``)
and treats the moment as a resize for its cooldown, so it does not ask again on every take. The
resize itself is safe without the lease (each of its writes is conditioned on the layout
generation it read); the lease keeps two processes from acting on two stale decisions.

**Metrics** (pattern ``adaptive``): ``ResizeUp`` and ``ResizeDown`` per resize this resizer made,
``ResizeSkipped`` per decision not carried out because another resizer held the lease or the
shard count read under the lease was not the one decided on (resized meanwhile),
``ResizeFailed`` per resize that gave up (lost every race, stayed throttled, or its outcome is
unknown; the lease table stayed throttled; the next decision reads again): never raised to the
caller, whose own call succeeded. Every decision is logged (logger
``turnstile_ddb.adaptive``, INFO; a failure WARNING) with its reason; the library configures no
handler.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from turnstile_ddb import (
    _checks,
    _core,
    _sharded_resize,
    codec,
    errors,
    lease,
    metrics,
    retry,
    sharded,
)
from turnstile_ddb._sharded_hints import _Recent

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "LOOK_EVERY",
    "METRICS",
    "PATTERN",
    "Decision",
    "LoadWindow",
    "Observation",
    "ResizePolicy",
    "Resizer",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = ("ResizeUp", "ResizeDown", "ResizeSkipped", "ResizeFailed")

PATTERN = "adaptive"

# ResizePolicy.for_capacities: a capacity grows at 40 % of its limit, to 3 times the load
_CAPACITY_GROW_AT = 0.4
_CAPACITY_HEADROOM = 3.0
_CAPACITY_SHRINK_HEADROOM = 3.5

_log = logging.getLogger(__name__)

# Seconds between two looks at one counter's window from maybe_resize (the hot path): in between,
# a call is a clock read and a lookup. A quarter of the default bucket: a grow waits at most that.
LOOK_EVERY = 0.25

# What LoadWindow.saw counts, by kind (turnstile_ddb.sharded's LoadObserver kinds); "restocked"
# and any other kind only mark activity.
_KINDS = ("taken", "left", "throttled", "conflict", "refused")
_SLOT = {kind: index for index, kind in enumerate(_KINDS)}
_AFTER_RESIZE = (_SLOT["throttled"], _SLOT["conflict"])  # what a new layout makes stale


def _positive(owner: str, name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{owner}.{name} must be > 0, not {value!r}")


@dataclass(frozen=True)
class Observation:
    """One counter's load as a :class:`LoadWindow` saw it at one moment. Rates are per second
    over the last ``span`` seconds (the window's ``recent``, or less for a counter first seen
    later); ``peak`` is the highest load (units taken plus members left) of any whole bucket in
    the last ``window`` seconds; the ``last_*`` fields are the clock's time of the last of each
    (``None``: never). ``started``: when the counter was first seen (``None``: never seen,
    nothing to decide on)."""

    window: float
    span: float = 0.0
    taken: float = 0.0
    left: float = 0.0
    throttled: float = 0.0
    conflicts: float = 0.0
    refused: float = 0.0
    peak: float = 0.0
    started: float | None = None
    last_taken: float | None = None
    last_throttled: float | None = None
    last_activity: float | None = None
    last_resized: float | None = None


class _Load:
    """One counter's buckets: ``counts[b * kinds + kind]`` for bucket number ``numbers[b]``."""

    def __init__(self, buckets: int, now: float) -> None:
        self.numbers = [-1] * buckets
        self.counts = array("d", [0.0]) * (buckets * len(_KINDS))
        self.started = now
        self.last: dict[str, float] = {}

    def bucket(self, number: int) -> int:
        """The offset of bucket ``number``'s counts, emptied first if it held an older one."""
        index = number % len(self.numbers)
        offset = index * len(_KINDS)
        if self.numbers[index] != number:
            self.numbers[index] = number
            for slot in range(len(_KINDS)):
                self.counts[offset + slot] = 0.0
        return offset


@dataclass
class LoadWindow:
    """Per counter, what its callers met over the last ``window`` seconds, in ``buckets``
    steps (see the module docstring): implements :class:`turnstile_ddb.sharded.LoadObserver`.
    Rates are averaged over the last ``recent`` seconds (what a grow reacts to); the peak is
    taken over the whole window (what a shrink must fit: make ``window`` longer than the
    policy's ``shrink_after``, so a load that just stopped is shrunk by the quiet rule, to
    ``min_shards``, not first to what its last partial bucket shows). Memory: ``buckets * 5``
    numbers a counter, at most ``max_counters`` counters. Validated when built (``ValueError``
    naming the field)."""

    window: float = 30.0
    recent: float = 5.0
    buckets: int = 30
    clock: Callable[[], float] = time.monotonic
    max_counters: int = 1024
    _loads: _Recent[_Load] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _positive("LoadWindow", "window", self.window)
        _positive("LoadWindow", "recent", self.recent)
        if self.recent > self.window:
            raise ValueError(
                f"LoadWindow.recent must be <= window, not {self.recent!r} > {self.window!r}"
            )
        _checks.at_least("LoadWindow", "buckets", self.buckets, 1)
        _checks.at_least("LoadWindow", "max_counters", self.max_counters, 1)
        self._loads = _Recent(self.max_counters)

    @property
    def width(self) -> float:
        """Seconds a bucket spans."""
        return self.window / self.buckets

    def remembered(self) -> int:
        """How many counters are remembered (at most ``max_counters``)."""
        return len(self._loads)

    def _entry(self, counter: sharded.ShardedCounter, now: float) -> _Load:
        found = self._loads.get(counter.identity)
        if found is not None:
            return found
        return self._loads.put(counter.identity, _Load(self.buckets, now))

    def saw(self, counter: sharded.ShardedCounter, kind: str, units: int = 1) -> None:
        """Count ``units`` of ``kind`` for ``counter`` now (a kind not in the rates, such as
        ``"restocked"``, only marks activity)."""
        now = self.clock()
        with self._loads.lock:
            load = self._entry(counter, now)
            load.last[kind] = load.last["activity"] = now
            slot = _SLOT.get(kind)
            if slot is not None:
                load.counts[load.bucket(math.floor(now / self.width)) + slot] += units

    def resized(self, counter: sharded.ShardedCounter) -> None:
        """A resize of ``counter`` was decided or done now: its throttles and conflicts, which
        described the old layout, are forgotten, and the policy's cooldown starts."""
        now = self.clock()
        with self._loads.lock:
            load = self._entry(counter, now)
            load.last["resized"] = now
            for offset in range(0, len(load.counts), len(_KINDS)):
                for slot in _AFTER_RESIZE:
                    load.counts[offset + slot] = 0.0

    def observe(self, counter: sharded.ShardedCounter, now: float | None = None) -> Observation:
        """``counter``'s rates, peak and last times at ``now`` (the clock's time by default)."""
        now = self.clock() if now is None else now
        width = self.width
        number = math.floor(now / width)
        recent = max(1, math.ceil(self.recent / width - 1e-9))  # buckets, the current one too
        kinds = len(_KINDS)
        sums = [0.0] * kinds
        busiest = 0.0  # units taken or left in the busiest whole bucket
        with self._loads.lock:
            load = self._loads.get(counter.identity)
            if load is None:
                return Observation(self.window)
            counts = load.counts
            for index, seen in enumerate(load.numbers):
                age = number - seen
                if age < 0 or age >= self.buckets:
                    continue
                offset = index * kinds
                if age < recent:
                    for slot in range(kinds):
                        sums[slot] += counts[offset + slot]
                if age > 0:  # the current bucket is not whole yet
                    busiest = max(busiest, counts[offset] + counts[offset + 1])
            last = dict(load.last)
            started = load.started
        covered = (recent - 1) * width + (now - number * width)
        span = max(min(covered, now - started), width)
        rate = dict(zip(_KINDS, (total / span for total in sums), strict=True))
        return Observation(
            window=self.window,
            span=span,
            taken=rate["taken"],
            left=rate["left"],
            throttled=rate["throttled"],
            conflicts=rate["conflict"],
            refused=rate["refused"],
            peak=busiest / width,
            started=started,
            last_taken=last.get("taken"),
            last_throttled=last.get("throttled"),
            last_activity=last.get("activity"),
            last_resized=last.get("resized"),
        )


@dataclass(frozen=True)
class Decision:
    """Resize to ``target`` shards (``direction`` ``"up"`` or ``"down"`` from ``current``),
    because ``reason``."""

    target: int
    direction: Literal["up", "down"]
    current: int
    reason: str


@dataclass(frozen=True)
class ResizePolicy:
    """When to resize, and to what (the rules and why they never flap: the module docstring).

    ``one_key_limit``: units per second one shard's key takes (DynamoDB: 1000 writes).
    ``grow_at``: the share of the capacity (``N * one_key_limit``) the load may reach before a
    grow. ``grow_throttles``: throttles per second that make a grow. ``headroom``: a grow leaves
    the capacity at least this many times the load; ``shrink_headroom`` the same for a shrink.
    ``grow_factor`` / ``grow_cap``: a throttled grow multiplies N by at least / at most these.
    ``shrink_after``: seconds without a throttle, a resize (or a sale, for a shrink to
    ``min_shards``) before a shrink. ``shrink_below``: a shrink (but one to ``min_shards``)
    keeps at most this share of the shards (no shrink by one shard of 24). ``cooldown``:
    seconds after a resize with no decision.
    ``min_shards`` .. ``max_shards``: the range (at most 100, a transaction's item limit).
    Validated when built (``ValueError`` naming the field)."""

    one_key_limit: float = 1000.0
    grow_at: float = 0.8
    grow_throttles: float = 1.0
    headroom: float = 1.5
    shrink_headroom: float = 2.0
    grow_factor: float = 2.0
    grow_cap: float = 4.0
    shrink_after: float = 20.0
    shrink_below: float = 0.75
    cooldown: float = 5.0
    min_shards: int = 1
    max_shards: int = 100

    def __post_init__(self) -> None:
        owner = "ResizePolicy"
        for name in ("one_key_limit", "grow_at", "grow_throttles", "shrink_after"):
            _positive(owner, name, getattr(self, name))
        _checks.at_least(owner, "cooldown", self.cooldown, 0)
        _checks.at_least(owner, "min_shards", self.min_shards, 1)
        _checks.at_least(owner, "max_shards", self.max_shards, self.min_shards)
        if self.max_shards > 100:
            raise ValueError(
                f"{owner}.max_shards must be <= 100 (one transaction's items), "
                f"not {self.max_shards!r}"
            )
        if self.grow_at > 1:
            raise ValueError(f"{owner}.grow_at must be <= 1, not {self.grow_at!r}")
        if not self.grow_at * self.headroom > 1:
            raise ValueError(
                f"{owner}: grow_at * headroom must be > 1 (a grow must leave the load below "
                f"grow_at of the new capacity), not {self.grow_at!r} * {self.headroom!r}"
            )
        if self.shrink_headroom < self.headroom:
            raise ValueError(
                f"{owner}: shrink_headroom must be >= headroom (a shrink must not go below what "
                f"a grow chooses), not {self.shrink_headroom!r} < {self.headroom!r}"
            )
        if not self.grow_factor > 1:
            raise ValueError(f"{owner}.grow_factor must be > 1, not {self.grow_factor!r}")
        _checks.at_least(owner, "grow_cap", self.grow_cap, self.grow_factor)
        if not 0 < self.shrink_below < 1:
            raise ValueError(
                f"{owner}.shrink_below must be between 0 and 1, not {self.shrink_below!r}"
            )

    def for_capacities(self) -> ResizePolicy:
        """This policy as a sharded capacity needs it: half the ``one_key_limit`` (a join or a
        leave writes its shard in a transaction, which DynamoDB charges two write units), and
        growing at no more than 40 % of the capacity (``grow_at`` 0.4), to at least 3 times the
        load (``headroom``; a shrink to 3.5 times the peak), where this policy is not already
        earlier. A capacity's joins and leaves
        are transactions, and so is a resize, which writes every kept shard: once the joins
        hold the shards at their limit, each of those keys is drained the moment it has room,
        and a write that needs room at every one of them at once seldom gets it. So a capacity
        must grow before its limit, far enough that the load can double before the next
        decision and still leave room at every shard (0.4 x 2 = 80 % of its limit; a resize
        was measured to land at 83 %, and not at 100 %). A counter's takes are single writes,
        and its resizes were measured to land above its limit; it keeps this policy."""
        return replace(
            self,
            one_key_limit=self.one_key_limit / 2,
            grow_at=min(self.grow_at, _CAPACITY_GROW_AT),
            headroom=max(self.headroom, _CAPACITY_HEADROOM),
            shrink_headroom=max(self.shrink_headroom, _CAPACITY_SHRINK_HEADROOM),
        )

    def needed(self, rate: float, headroom: float) -> int:
        """The shards whose capacity is ``headroom`` times ``rate``, within the range."""
        wanted = math.ceil(rate * headroom / self.one_key_limit - 1e-9)
        return min(self.max_shards, max(self.min_shards, wanted))

    def decide(self, seen: Observation, current: int, now: float) -> Decision | None:
        """What to do with a counter of ``current`` shards that ``seen`` describes, at ``now``
        (the observing window's clock): a few comparisons, no I/O."""
        if seen.started is None:
            return None
        if seen.last_resized is not None and now - seen.last_resized < self.cooldown:
            return None
        load = seen.taken + seen.left
        if current < self.max_shards:
            grow = self._grow(seen, current, load)
            if grow is not None:
                return grow
        if current > self.min_shards:
            return self._shrink(seen, current, load, now)
        return None

    def _grow(self, seen: Observation, current: int, load: float) -> Decision | None:
        over = f"over the last {seen.span:g} s at {current} shard(s)"
        if seen.throttled >= self.grow_throttles:
            low = math.ceil(current * self.grow_factor)
            high = math.floor(current * self.grow_cap)
            wanted = self.needed(load + seen.throttled, self.headroom)
            target = min(self.max_shards, max(low, min(high, wanted)))
            reason = (
                f"{seen.throttled:.1f} throttles/s {over} (a shard throttles only when its key is"
                f" over {self.one_key_limit:g}/s, whoever writes): {load:.1f} taken/s"
            )
            return Decision(target, "up", current, reason)
        capacity = current * self.one_key_limit
        if load >= self.grow_at * capacity:
            target = min(self.max_shards, max(current + 1, self.needed(load, self.headroom)))
            reason = (
                f"{load:.1f} taken/s {over}, at least {self.grow_at:g} of their {capacity:g}/s "
                "(this process's rate alone, a lower bound of the counter's)"
            )
            return Decision(target, "up", current, reason)
        return None

    def _shrink(self, seen: Observation, current: int, load: float, now: float) -> Decision | None:
        assert seen.started is not None  # decide returned already otherwise
        times = (seen.started, seen.last_throttled, seen.last_resized)
        calm = max(t for t in times if t is not None)
        if now - calm < self.shrink_after:
            return None
        sold = seen.last_taken if seen.last_taken is not None else seen.started
        if now - sold >= self.shrink_after:
            reason = f"no unit taken for {now - sold:.1f} s"
            return Decision(self.min_shards, "down", current, reason)
        target = self.needed(seen.peak, self.shrink_headroom)
        if target > current * self.shrink_below:
            return None
        reason = (
            f"its peak of {seen.peak:.1f}/s over the last {seen.window:g} s needs {target} "
            f"shard(s) at {self.shrink_headroom:g}x headroom, no throttle for {now - calm:.1f} s"
        )
        failed = seen.refused + seen.conflicts
        if failed > load:
            reason += (
                f"; refusals and failovers ({failed:.1f}/s) outnumber sales ({load:.1f}/s): its "
                "counts are near zero, and each refusal reads every shard"
            )
        return Decision(target, "down", current, reason)


def _resource(counter: sharded.ShardedCounter) -> str:
    """The lease resource of ``counter``'s resizes."""
    extra = "".join(f"/{value}" for _, value in counter.extra_key)
    return f"resize/{counter.table}/{counter.base}{extra}/{counter.count_attr}"


class _Resizing:
    """What both front doors' resizers share: the decision, and the protocol that carries it
    out (:mod:`turnstile_ddb._core`)."""

    def __init__(
        self,
        leases: lease.Leases,
        policy: ResizePolicy | None,
        load: LoadWindow | None,
        hints: sharded.Hints | None,
        owner: str | None,
        lease_ms: int,
    ) -> None:
        _checks.at_least("Resizer", "lease_ms", lease_ms, 1)
        self.leases = leases
        self.policy = policy if policy is not None else ResizePolicy()
        self.capacity_policy = self.policy.for_capacities()
        self.load = load if load is not None else LoadWindow()
        self.hints = hints
        self.owner = owner if owner is not None else f"resizer-{uuid.uuid4().hex[:12]}"
        self.lease_ms = lease_ms
        self._known: _Recent[int] = _Recent(self.load.max_counters)
        self._looked: _Recent[float] = _Recent(self.load.max_counters)

    def current(self, counter: sharded.ShardedCounter) -> int:
        """The shard count this process believes: its hints' layout, else the last this resizer
        read or made, else the counter's own."""
        if self.hints is not None:
            return self.hints.shards.layout(counter).shards
        known = self._known.get(counter.identity)
        return known if known is not None else counter.shards

    def decide(self, counter: sharded.ShardedCounter, capacity: bool) -> Decision | None:
        """What the policy says of ``counter`` now (a capacity: ``policy.for_capacities()``)."""
        now = self.load.clock()
        policy = self.capacity_policy if capacity else self.policy
        return policy.decide(self.load.observe(counter, now), self.current(counter), now)

    def protocol(
        self, counter: sharded.ShardedCounter, capacity: bool
    ) -> _core.Steps[sharded.Resized | None]:
        """Decide (at most every ``LOOK_EVERY`` seconds a counter); when a resize is due, carry
        it out under the lease."""
        now = self.load.clock()
        looked = self._looked.get(counter.identity)
        if looked is not None and now - looked < LOOK_EVERY:
            return None
        self._looked.put(counter.identity, now)
        decision = self.decide(counter, capacity)
        if decision is None:
            return None
        self.load.resized(counter)  # the cooldown starts: this process's other takes wait
        try:
            held = yield from lease.acquire_protocol(
                self.leases, _resource(counter), self.owner, self.lease_ms, None
            )
        except lease.Held as exc:
            _skipped(counter, decision, f"another resizer ({exc.owner!r}) holds the lease")
            return None
        except (errors.Retryable, errors.OutcomeUnknown) as exc:  # the lease table's trouble
            _failed(counter, exc)
            return None
        try:
            resized = yield from self._under_lease(counter, decision, capacity)
        except Exception:  # not BaseException: a closed generator must not yield again
            yield from self._release(held)
            raise
        yield from self._release(held)
        return resized

    def _under_lease(
        self, counter: sharded.ShardedCounter, decision: Decision, capacity: bool
    ) -> _core.Steps[sharded.Resized | None]:
        try:
            actual = yield from _shards_now(counter, self.leases.backoff)
            self._known.put(counter.identity, actual)
            if actual != decision.current:  # what was seen was seen at another layout
                why = f"it has {actual} shard(s), not {decision.current}: resized meanwhile"
                _skipped(counter, decision, why)
                return None
            resized = yield from _sharded_resize.resize_protocol(
                counter,
                decision.target,
                capacity=capacity,
                backoff=self.leases.backoff,
                hints=self.hints,
            )
        except (errors.Retryable, errors.OutcomeUnknown) as exc:
            _failed(counter, exc)
            return None
        self._known.put(counter.identity, resized.after)
        self.load.resized(counter)
        if resized.before == resized.after:  # someone resized it between the two reads
            _skipped(counter, decision, f"it had {resized.after} shard(s) already")
            return None
        if decision.direction == "up":
            metrics.count("ResizeUp", pattern=PATTERN)
        else:
            metrics.count("ResizeDown", pattern=PATTERN)
        _log.info(
            "resized %s %s from %d to %d shards (generation %d, %d items written): %s",
            counter.base, decision.direction, resized.before, resized.after,
            resized.generation, resized.items, decision.reason,
        )  # fmt: skip
        return resized

    def _release(self, held: lease.Lease) -> _core.Steps[None]:
        """Give the lease back; one that cannot be released simply expires."""
        try:
            yield from lease.release_protocol(self.leases, held)
        except errors.TurnstileError as exc:
            _log.warning("resize lease %s not released (it expires): %s", held.resource, exc)


def _attributes(
    resizing: _Resizing,
) -> tuple[ResizePolicy, LoadWindow, sharded.Hints | None]:
    """What both front doors' resizers show as attributes."""
    return resizing.policy, resizing.load, resizing.hints


def _failed(counter: sharded.ShardedCounter, exc: BaseException) -> None:
    """A resize (or its lease) gave up: counted and logged, never raised to the caller, whose own
    call succeeded; the next decision, after the cooldown, reads again."""
    metrics.count("ResizeFailed", pattern=PATTERN)
    _log.warning("resize of %s gave up: %s", counter.base, exc)


def _skipped(counter: sharded.ShardedCounter, decision: Decision | None, why: str) -> None:
    metrics.count("ResizeSkipped", pattern=PATTERN)
    wanted = f" {decision.direction} to {decision.target}" if decision is not None else ""
    _log.info("resize of %s%s skipped: %s", counter.base, wanted, why)


def _shards_now(counter: sharded.ShardedCounter, backoff: retry.Backoff) -> _core.Steps[int]:
    """The shard count shard 0 records (one consistent read); absent: the counter's own."""
    read = _core.Call(
        "get_item",
        {
            "TableName": counter.table,
            "Key": counter.wire_key(0),
            "ConsistentRead": True,
            "ProjectionExpression": "#shards",
            "ExpressionAttributeNames": {"#shards": counter.shards_attr},
        },
    )
    response = yield from retry.retrying(
        read,
        backoff=backoff,
        idempotent=True,
        pattern="sharded",  # the retries of a shard read
    )
    item = codec.decode_item(response.get("Item")) or {}
    return int(item.get(counter.shards_attr, counter.shards))


class Resizer:
    """Decides and resizes (see the module docstring for the constructor's arguments; they are
    its attributes ``client``, ``policy``, ``load``, ``hints``, ``owner``, ``lease_ms``)."""

    def __init__(
        self,
        client: DynamoDBClient,
        leases: lease.Leases,
        policy: ResizePolicy | None = None,
        load: LoadWindow | None = None,
        *,
        hints: sharded.Hints | None = None,
        owner: str | None = None,
        lease_ms: int = 10_000,
    ) -> None:
        self.client = client
        self._resizing = _Resizing(leases, policy, load, hints, owner, lease_ms)
        self.policy, self.load, self.hints = _attributes(self._resizing)
        self.owner, self.lease_ms = self._resizing.owner, lease_ms

    def decide(self, counter: sharded.ShardedCounter, *, capacity: bool = False) -> Decision | None:
        """What the policy says of ``counter`` now (no call, nothing done); of a sharded
        capacity (``capacity=True``), what ``policy.for_capacities()`` says."""
        return self._resizing.decide(counter, capacity)

    def maybe_resize(
        self,
        counter: sharded.ShardedCounter,
        *,
        capacity: bool = False,
        client: DynamoDBClient | None = None,
    ) -> sharded.Resized | None:
        """Resize ``counter`` (a sharded capacity: ``capacity=True``) if the policy says so and
        no other resizer holds its lease; the resize, or ``None``. No call unless a resize is
        due. A resize that gave up is counted (``ResizeFailed``), logged and answered ``None``."""
        steps = self._resizing.protocol(counter, capacity)
        return _core.run(client if client is not None else self.client, steps)
