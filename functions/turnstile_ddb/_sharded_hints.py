"""What a caller remembers of its sharded counters (:class:`Hints`) and how a take goes about
it (:class:`TakeOptions`).

Private: the public names are :mod:`turnstile_ddb.sharded`'s, whose docstring says what the
hints may decide (refusals within a stated bound) and what they may not (a sale: writes decide).
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from turnstile_ddb import _checks, deprecation, metrics, retry
from turnstile_ddb._sharded_counter import _BACKOFF, Layout, ShardedCounter

_ROUNDS = 4
_MAX_COUNTERS = 1024
V = TypeVar("V")


class _Recent(Generic[V]):
    """At most ``limit`` counters' entries, the least recently used dropped first, behind one
    lock (hints are shared by a process's threads). See the module docstring for why this is
    an ``OrderedDict`` and not a library."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a hint map holds at least one counter")
        self._limit = limit
        self._entries: OrderedDict[tuple[Any, ...], V] = OrderedDict()
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[Any, ...]) -> V | None:
        with self.lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: tuple[Any, ...], value: V) -> V:
        with self.lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)
            return value

    def pop(self, key: tuple[Any, ...]) -> None:
        with self.lock:
            self._entries.pop(key, None)


@dataclass
class SoldOutHints:
    """Counters last read empty, and when (a monotonic clock; a hint, never a lock).

    ``empty``: skip the first write and read at once. ``fresh``: the empty read is younger than
    ``trust_seconds``, so a refusal may be answered from it without any call (see the module
    docstring for the bound this puts on refusals). At most ``max_counters`` counters are
    remembered, the least recently used forgotten first."""

    trust_seconds: float = 0.1
    clock: Callable[[], float] = time.monotonic
    max_counters: int = _MAX_COUNTERS
    _empty: _Recent[float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _checks.at_least("SoldOutHints", "trust_seconds", self.trust_seconds, 0)
        _checks.at_least("SoldOutHints", "max_counters", self.max_counters, 1)
        self._empty = _Recent(self.max_counters)

    def remembered(self) -> int:
        """How many counters are remembered as empty (at most ``max_counters``)."""
        return len(self._empty)

    def empty(self, counter: ShardedCounter) -> bool:
        return self._empty.get(counter.identity) is not None

    def fresh(self, counter: ShardedCounter) -> bool:
        seen = self._empty.get(counter.identity)
        return seen is not None and self.clock() - seen < self.trust_seconds

    def mark(self, counter: ShardedCounter, empty: bool) -> None:
        if empty:
            self._empty.put(counter.identity, self.clock())
        else:
            self._empty.pop(counter.identity)


@dataclass
class _Learned:
    """What was learned of one counter's shards: shard -> (count, when), shard -> throttled at,
    and the newest layout seen (none: the counter as the caller built it)."""

    counts: dict[int, tuple[int, float]] = field(default_factory=dict)
    throttled: dict[int, float] = field(default_factory=dict)
    layout: Layout | None = None


@dataclass
class ShardHints:
    """What was last learned of each shard (a hint, never a lock): the count a write or a read
    returned, and when; and when the shard last throttled. At most ``max_counters`` counters
    are remembered, the least recently used forgotten first.

    Choosing (:meth:`choose`): the first shard of a take is the better of two random ones (power
    of two choices), drawn from the shards not last seen holding fewer than ``q`` units (from all
    when every one was): a shard not throttled within ``throttle_seconds`` beats one that was,
    then the larger known count; so takes stop piling onto a shard that is hot or nearly empty
    while the total has room. Writes still decide: a wrong hint costs one failover, never a sale.

    Knowing (:meth:`known`): counts learned within ``trust_seconds`` (100 ms). Between restocks a
    shard's count only goes down, so a count learned earlier is an upper bound of the count now;
    :func:`take` reads only the shards it does not know, and refuses when the known counts plus
    the ones just read add up to fewer than ``q``. Bound: such a refusal is wrong only if the
    counter was restocked without these hints less than ``trust_seconds`` after a count was
    learned (:func:`add` and :func:`set_total` given these hints make them :meth:`forget`)."""

    throttle_seconds: float = 1.0
    trust_seconds: float = 0.1
    clock: Callable[[], float] = time.monotonic
    max_counters: int = _MAX_COUNTERS
    _learned: _Recent[_Learned] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _checks.at_least("ShardHints", "throttle_seconds", self.throttle_seconds, 0)
        _checks.at_least("ShardHints", "trust_seconds", self.trust_seconds, 0)
        _checks.at_least("ShardHints", "max_counters", self.max_counters, 1)
        self._learned = _Recent(self.max_counters)

    def remembered(self) -> int:
        """How many counters something is remembered of (at most ``max_counters``)."""
        return len(self._learned)

    def _of(self, counter: ShardedCounter) -> _Learned:
        """The counter's record, empty when nothing is remembered (not stored until written)."""
        return self._learned.get(counter.identity) or _Learned()

    def _write(self, counter: ShardedCounter) -> _Learned:
        with self._learned.lock:
            found = self._learned.get(counter.identity)
            return found if found is not None else self._learned.put(counter.identity, _Learned())

    def count(self, counter: ShardedCounter, shard: int, value: int) -> None:
        with self._learned.lock:
            self._write(counter).counts[shard] = (value, self.clock())

    def throttled(self, counter: ShardedCounter, shard: int) -> None:
        with self._learned.lock:
            self._write(counter).throttled[shard] = self.clock()

    def forget(self, counter: ShardedCounter) -> None:
        """Drop the counter's known counts (after its total changed)."""
        with self._learned.lock:
            self._of(counter).counts.clear()

    def layout(self, counter: ShardedCounter) -> Layout:
        """The newest layout learned of ``counter`` (none learned: ``counter.shards``, 0)."""
        return self._of(counter).layout or Layout(counter.shards, 0)

    def current(self, counter: ShardedCounter) -> ShardedCounter:
        """``counter`` with the shard count last learned (a resize changes it), else as built."""
        return counter.with_shards(self.layout(counter).shards)

    def relayout(self, counter: ShardedCounter, layout: Layout) -> bool:
        """Remember ``layout`` if it is newer than the one known (a higher generation), and then
        forget the counts and throttles learned under the older one (a resize moved units
        between shards, so those counts bound nothing). True when it was newer."""
        with self._learned.lock:
            if layout.generation <= self.layout(counter).generation:
                return False
            record = self._write(counter)
            record.layout = layout
            record.counts.clear()
            record.throttled.clear()
        metrics.count("LayoutChanged", pattern="sharded")
        return True

    def known(self, counter: ShardedCounter) -> dict[int, int]:
        """Shard -> count, for the shards whose count was learned within ``trust_seconds``."""
        now = self.clock()
        with self._learned.lock:
            counts = dict(self._of(counter).counts)
        return {
            shard: value
            for shard, (value, at) in sorted(counts.items())
            if shard < counter.shards and now - at < self.trust_seconds
        }

    def is_hot(self, counter: ShardedCounter, shard: int) -> bool:
        at = self._of(counter).throttled.get(shard)
        return at is not None and self.clock() - at < self.throttle_seconds

    def _last(self, counter: ShardedCounter, shard: int) -> int | None:
        seen = self._of(counter).counts.get(shard)
        return seen[0] if seen is not None else None

    def _score(self, counter: ShardedCounter, shard: int, quantity: int) -> tuple[bool, bool, int]:
        last = self._last(counter, shard)
        last = last if last is not None else 1 << 30
        return (not self.is_hot(counter, shard), last >= quantity, last)

    def choose(self, counter: ShardedCounter, rand: random.Random, quantity: int = 1) -> int:
        """The better of two distinct random shards, drawn from those not last seen holding fewer
        than ``quantity`` (from all when every shard was)."""
        pool = [
            shard
            for shard in range(counter.shards)
            if (last := self._last(counter, shard)) is None or last >= quantity
        ] or list(range(counter.shards))
        if len(pool) == 1:
            return pool[0]
        one, two = rand.sample(pool, 2)
        better = self._score(counter, one, quantity) >= self._score(counter, two, quantity)
        return one if better else two

    def order(self, counter: ShardedCounter, shards: Sequence[int]) -> list[int]:
        """``shards`` with the ones throttled lately last (stable otherwise)."""
        return sorted(shards, key=lambda shard: self.is_hot(counter, shard))


class LoadObserver(Protocol):
    """What the calls tell of the load on a counter (a resize policy implements it):
    ``kind`` is ``"taken"`` (``units`` taken, or a member joined), ``"throttled"`` (a shard
    write was throttled), ``"conflict"`` (a shard write or transaction lost to a concurrent
    one), ``"refused"`` (``Exhausted`` or ``Full`` raised), ``"left"`` (a member left) or
    ``"restocked"`` (``units`` added, or the new total). ``counter`` is the caller's (its
    ``identity`` leaves out ``shards``). Called on the caller's thread: keep it cheap."""

    def saw(self, counter: ShardedCounter, kind: str, units: int = 1) -> None: ...


@dataclass
class Hints:
    """What a caller remembers of its sharded counters, to spend fewer calls: shard counts and
    throttles (:class:`ShardHints`) and counters read empty (:class:`SoldOutHints`).

    Build one per process (per Lambda execution environment, say) and pass the same object to
    every call on the same counters, restocks included: :func:`add`, :func:`set_total` and
    :func:`leave` call :meth:`restocked`, so a take never trusts a count from before the total
    grew. Hints only save calls: writes decide every sale. ``load``: an observer told what each
    call saw (:class:`LoadObserver`: what a resize policy decides from), none by default."""

    shards: ShardHints = field(default_factory=ShardHints)
    sold_out: SoldOutHints = field(default_factory=SoldOutHints)
    load: LoadObserver | None = None

    def saw(self, counter: ShardedCounter, kind: str, units: int = 1) -> None:
        """Tell :attr:`load` (when set) what a call saw of ``counter`` (:class:`LoadObserver`)."""
        if self.load is not None:
            self.load.saw(counter, kind, units)

    def restocked(self, counter: ShardedCounter, total: int | None = None) -> None:
        """Forget what was learned of ``counter``, whose total changed (``total``: the new total,
        when known; 0 marks the counter empty)."""
        self.sold_out.mark(counter, total == 0)
        self.shards.forget(counter)


def learn(
    hints: Hints, counter: ShardedCounter, items: Mapping[int, Mapping[str, Any]]
) -> dict[int, int]:
    """What a call saw of ``counter``'s shards (shard -> its item, as read or as a write
    answered it), told to ``hints``; shard -> count. Every count the protocols learn passes
    here, and so does every layout: an item showing a newer one than the hints knew makes them
    :meth:`ShardHints.relayout` (the caller then goes on at :meth:`ShardHints.current`). Counts
    of items from an older layout than the one known are not remembered."""
    counts = {shard: int(item.get(counter.count_attr, 0)) for shard, item in items.items()}
    layouts = {shard: counter.layout_of(item) for shard, item in items.items()}
    if layouts:
        hints.shards.relayout(counter, max(layouts.values()))
    newest = hints.shards.layout(counter)
    for shard, count in counts.items():
        if layouts[shard] == newest:
            hints.shards.count(counter, shard, count)
    return counts


@dataclass(frozen=True)
class TakeOptions:
    """How :func:`take` and :func:`join` go about it.

    ``backoff``: every read and every wait after a throttled round (a throttled shard is failed
    over, not retried at once; after ``backoff.attempts`` throttled rounds the call gives up).
    ``rounds``: reads after the first write, at most (then a refusal for lost races); at least 1,
    so that every refusal rests on a read. Validated when built (``ValueError`` naming the field).
    ``hints``: the caller's :class:`Hints` (none: the call remembers nothing beyond itself).
    ``rand``: the random choices (a seeded one for reproducible tests)."""

    backoff: retry.Backoff = field(default_factory=retry.Backoff)
    rounds: int = _ROUNDS
    hints: Hints | None = None
    rand: random.Random | None = None

    def __post_init__(self) -> None:
        # rounds 0 would refuse after one write met an empty shard, with nothing read
        _checks.at_least("TakeOptions", "rounds", self.rounds, 1)


_LEGACY_TAKE = ("backoff", "rand", "sold_out", "rounds", "known")


def _legacy_options(legacy: dict[str, Any]) -> TakeOptions:
    """The options the keyword arguments of turnstile-ddb 0.3 name (warning once per call)."""
    unknown = sorted(set(legacy) - set(_LEGACY_TAKE))
    if unknown:
        raise TypeError(f"take() got unexpected keyword arguments {unknown}")
    warnings.warn(
        "take(backoff=, rand=, sold_out=, rounds=, known=) is deprecated since turnstile-ddb "
        "1.0.0 and will be removed in 2.0.0; use take(..., TakeOptions(backoff=, rand=, "
        "rounds=, hints=Hints(shards=..., sold_out=...))) instead",
        deprecation.TurnstileDeprecationWarning,
        stacklevel=4,
    )
    known, sold_out = legacy.get("known"), legacy.get("sold_out")
    hints = None
    if known is not None or sold_out is not None:
        hints = Hints(
            shards=known if known is not None else ShardHints(),
            sold_out=sold_out if sold_out is not None else SoldOutHints(),
        )
    return TakeOptions(
        backoff=legacy.get("backoff", _BACKOFF),
        rounds=legacy.get("rounds", _ROUNDS),
        hints=hints,
        rand=legacy.get("rand"),
    )


for _public in (SoldOutHints, ShardHints, Hints, LoadObserver, TakeOptions):
    _public.__module__ = "turnstile_ddb.sharded"  # shown, pickled and documented there
