"""What a caller remembers between reservations (:class:`PoolHints`, :class:`UnitCache`) and how
a reservation goes about it (:class:`ReserveOptions`).

Private: the public names are :mod:`turnstile_ddb.claims`'s, whose docstring says what the hints
and the cache may change (the order and shape of the reads) and what they may not (the answer:
a refusal comes only from a read of every pool, a claim only from its conditional write).
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

from turnstile_ddb import _checks, retry
from turnstile_ddb._claims_units import (
    _SPARSE,
    PAGES_PER_POOL,
    Key,
    UnitTable,
    _identity,
    _warn_renamed,
)


@dataclass
class _PoolNews:
    """What one pool looked like lately (see :class:`PoolHints`)."""

    throttled_at: float | None = None
    empty: bool = False
    sparse: bool = False
    count: int | None = None  # the units its last complete read showed, when sparse
    missed_at: float | None = None


_NO_NEWS = _PoolNews()


class PoolHints:
    """What the caller has seen of each pool lately (a hint, never a lock): when a pool last
    throttled, whether its last read showed it empty, whether its last complete read showed
    fewer than 16 claimable units, and when a guessed unit of it last missed
    (:meth:`may_guess`). :func:`reserve` starts with the better of two random pools (power of two
    choices: not throttled lately beats throttled, not seen empty beats seen empty) and leaves
    the pools with bad news for last; a pool is read from a random pivot only once it was seen
    with at least 16 claimable units, else in one whole-range Query (a refusal then costs one
    read per pool). Every pool is still read before a refusal, so the hints change only the
    order and the shape of the reads, never the answer.

    The caller builds it and passes it (``ReserveOptions(hints=...)``) to every reservation that
    should learn from the earlier ones: the service keeps one per Lambda execution environment.
    Thread-safe. Bounded: news of at most ``max_pools`` pools is kept, the pool heard of least
    recently forgotten first (forgetting a pool only costs it the default order and read shape).
    """

    def __init__(
        self,
        *,
        throttle_seconds: float = 1.0,
        miss_seconds: float = 10.0,
        max_pools: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_pools < 1:
            raise ValueError("pool hints keep at least one pool")
        self.throttle_seconds = throttle_seconds
        self.miss_seconds = miss_seconds
        self.max_pools = max_pools
        self.clock = clock
        self._pools: OrderedDict[str, _PoolNews] = OrderedDict()
        self._lock = threading.Lock()

    def remembered_pools(self) -> int:
        """How many pools it has news of (at most ``max_pools``)."""
        return len(self._pools)

    def _news(self, pool: str) -> _PoolNews:
        """``pool``'s news to change, now the most recently used (call under the lock)."""
        news = self._pools.get(pool)
        if news is None:
            news = self._pools[pool] = _PoolNews()
            while len(self._pools) > self.max_pools:
                self._pools.popitem(last=False)
        else:
            self._pools.move_to_end(pool)
        return news

    def _known(self, pool: str) -> _PoolNews:
        return self._pools.get(pool, _NO_NEWS)

    def throttled(self, pool: str) -> None:
        with self._lock:
            self._news(pool).throttled_at = self.clock()

    def seen(self, pool: str, empty: bool, count: int | None = None) -> None:
        """A read of ``pool`` showed units (``empty`` False) or none; ``count``: how many
        claimable units it showed, when that is all of them or at least 16 (None: the read
        stopped early, having shown fewer)."""
        with self._lock:
            news = self._news(pool)
            news.empty = empty
            if count is not None:
                news.sparse = count < _SPARSE
                news.count = count if news.sparse else None

    def is_throttled(self, pool: str) -> bool:
        at = self._known(pool).throttled_at
        return at is not None and self.clock() - at < self.throttle_seconds

    def missed(self, pool: str) -> None:
        """A guessed unit of ``pool`` (see ``ReserveOptions.guess``) was not claimable."""
        with self._lock:
            self._news(pool).missed_at = self.clock()

    def may_guess(self, pool: str) -> bool:
        """Whether a unit of ``pool`` may be claimed without reading first: nothing says it is
        short. Not when it throttled lately, nor when its last complete read showed it empty or
        small (:meth:`is_sparse`), nor within ``miss_seconds`` of a guess in it that missed."""
        news = self._known(pool)
        missed = news.missed_at
        return not (
            self.is_throttled(pool)
            or news.empty
            or news.sparse
            or (missed is not None and self.clock() - missed < self.miss_seconds)
        )

    def is_sparse(self, pool: str) -> bool:
        """Last seen whole with fewer than 16 claimable units."""
        return self._known(pool).sparse

    def _short_of(self, pool: str, n: int) -> bool:
        """Whether the last complete read of ``pool`` showed fewer than ``n`` claimable units
        (the asyncio front door then reads it together with the others)."""
        count = self._known(pool).count
        return count is not None and count < n

    def _badness(self, pool: str) -> tuple[bool, bool]:
        return (self.is_throttled(pool), self._known(pool).empty)

    def order(self, pools: Sequence[str], rand: Callable[[], float]) -> list[str]:
        """Every pool once: the better of two random ones first, then the rest at random with
        the throttled and empty ones last."""
        if len(pools) <= 1:
            return list(pools)
        one = int(rand() * len(pools))
        two = (one + 1 + int(rand() * (len(pools) - 1))) % len(pools)
        first = pools[one] if self._badness(pools[one]) <= self._badness(pools[two]) else pools[two]
        rest = [pool for pool in pools if pool != first]
        keyed = sorted(((self._badness(pool), rand()), pool) for pool in rest)
        return [first, *[pool for _, pool in keyed]]


class UnitCache:
    """Claimable units a caller saw in earlier reads and did not take (a hint, never a lock).

    A read for a reservation shows a few more units than it claims (see :meth:`_Reader.pick`); the
    rest are remembered here, per pool, and the next reservation given this cache
    (``ReserveOptions(unit_cache=...)``) tries them directly with the same conditional write,
    without a Query. A Lambda worker serves its requests one after another, so a warm worker's
    next reservation usually costs one call.

    Safe when stale: the write's condition (``status = free`` or a lapsed hold) decides; a unit
    someone took meanwhile fails it and is replaced from a fresh read (``ClaimCacheStale``).
    Never a refusal: :class:`NotEnough` only ever comes from a read of every pool. A unit is
    handed out once (taken off the cache under a lock), so two threads never try the same cached
    unit. Bounded: at most ``per_pool`` units per pool, ``pools`` pools (the least recently
    learned forgotten first), each unit for ``max_age_seconds``."""

    def __init__(
        self,
        *,
        per_pool: int = 16,
        pools: int = 256,
        max_age_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_pool = per_pool
        self.pools = pools
        self.max_age_seconds = max_age_seconds
        self.clock = clock
        self._units: OrderedDict[tuple[str, str, str], list[tuple[float, Key]]] = OrderedDict()
        self._lock = threading.Lock()

    def remembered_pools(self) -> int:
        """How many pools it remembers units of (at most ``pools``)."""
        return len(self._units)

    def learn(self, units: UnitTable, pool: str, keys: Sequence[Key]) -> None:
        """Remember ``keys``, seen claimable in ``pool`` just now (the newest kept)."""
        if not keys or self.per_pool <= 0:
            return
        slot = (units.table, units.index, pool)
        now = self.clock()
        with self._lock:
            known = self._units.pop(slot, [])
            fresh = {_identity(units, key) for key in keys}
            kept = [(at, key) for at, key in known if _identity(units, key) not in fresh]
            self._units[slot] = ([*kept, *((now, dict(key)) for key in keys)])[-self.per_pool :]
            while len(self._units) > self.pools:
                self._units.popitem(last=False)

    def take(
        self,
        units: UnitTable,
        pools: Sequence[str],
        n: int,
        eligible: Callable[[Key], bool] | None,
        rand: Callable[[], float],
    ) -> tuple[str, list[Key]] | None:
        """``n`` remembered units of one of ``pools`` (a random one that has ``n``), taken off the
        cache; None when no pool has ``n`` units younger than the age limit."""
        now = self.clock()
        start = int(rand() * len(pools)) if pools else 0
        with self._lock:
            for pool in [*pools[start:], *pools[:start]]:
                slot = (units.table, units.index, pool)
                known = [
                    (at, key)
                    for at, key in self._units.get(slot, ())
                    if now - at <= self.max_age_seconds and (eligible is None or eligible(key))
                ]
                if len(known) >= n:
                    self._units[slot] = known[:-n]
                    return pool, [key for _, key in known[-n:]]
                if known:
                    self._units[slot] = known
                else:
                    self._units.pop(slot, None)
        return None

    def clear(self) -> None:
        with self._lock:
            self._units.clear()


@dataclass(frozen=True)
class ReserveOptions:
    """How :func:`reserve` goes about a reservation; every field has a default.

    - ``backoff``: retries of one call (throttles, lost replies) and what a lost round waits.
    - ``rand``: the randomness of pivots, pool order and runs (inject for a repeatable test).
    - ``rounds``: writes sent at most (cancelled or throttled ones included), then
      :class:`turnstile_ddb.errors.LostEveryRace` / :class:`~turnstile_ddb.errors.StayedThrottled`
      (both ``RetriesExhausted``).

    Validated when built: ``rounds``, ``page_size`` and ``pages_per_pool`` are at least 1
    (``ValueError`` naming the field): options that could never succeed are refused at once,
    not answered with a retryable error forever.
    - ``hints``: the :class:`PoolHints` to learn from and teach; None: fresh hints for this call
      alone (nothing is remembered for the next one).
    - ``unit_cache``: remembered units to try first, and to remember the units a read showed
      beyond the run it took (:class:`UnitCache`); None: none.
    - ``clock_ms``: when given, no round starts once it reads ``until_ms`` or later (a hold
      written then would have lapsed before it was answered), and a claim whose reply comes
      back once it reads ``until_ms`` is given back: :class:`ClaimHoldLapsed` either way.
    - ``eligible``: when given, only the units it accepts are claimed (units that exist but are
      not yet offered, say).
    - ``guess(pool, n)``: when given, ``n`` keys of ``pool`` the caller names without reading
      (or fewer: no guess).
    - ``page_size``: a fixed Limit for every Query (by default a few more than the units wanted;
      100 for a sparse pool), raised to the units a read wants when it is smaller.
    - ``pages_per_pool``: the most Queries one read of one pool sends (:data:`PAGES_PER_POOL`).
    """

    backoff: retry.Backoff = field(default_factory=retry.Backoff)
    rand: Callable[[], float] = random.random
    rounds: int = 6
    hints: PoolHints | None = None
    unit_cache: UnitCache | None = None
    clock_ms: Callable[[], int] | None = None
    eligible: Callable[[Key], bool] | None = None
    guess: Callable[[str, int], Sequence[Key]] | None = None
    page_size: int | None = None
    pages_per_pool: int = PAGES_PER_POOL

    def __post_init__(self) -> None:
        _checks.at_least("ReserveOptions", "rounds", self.rounds, 1)
        _checks.at_least("ReserveOptions", "page_size", self.page_size, 1)
        _checks.at_least("ReserveOptions", "pages_per_pool", self.pages_per_pool, 1)


class _OldReserveArguments(TypedDict, total=False):
    """The keywords :func:`reserve` took before :class:`ReserveOptions` (deprecated)."""

    backoff: retry.Backoff
    rand: Callable[[], float]
    page_size: int | None
    rounds: int
    pool_hints: PoolHints | None
    eligible: Callable[[Key], bool] | None
    unit_cache: UnitCache | None
    guess: Callable[[str, int], Sequence[Key]] | None
    clock_ms: Callable[[], int] | None
    pages_per_pool: int


def _options_of(options: ReserveOptions | None, old: _OldReserveArguments) -> ReserveOptions:
    """``options``, or (deprecated) the same built from the old keywords."""
    if not old:
        return options if options is not None else ReserveOptions()
    if options is not None:
        raise TypeError("reserve takes options= or the old keywords, not both")
    unknown = set(old) - {f.name for f in fields(ReserveOptions)} - {"pool_hints"}
    if unknown:
        raise TypeError(f"reserve got unexpected keywords {sorted(unknown)}")
    _warn_renamed(
        f"reserve({', '.join(f'{name}=' for name in old)})", "reserve(options=...)", stacklevel=5
    )
    given: dict[str, Any] = dict(old)
    if "pool_hints" in given:
        given["hints"] = given.pop("pool_hints")
    return ReserveOptions(**given)


for _public in (PoolHints, UnitCache, ReserveOptions):
    _public.__module__ = "turnstile_ddb.claims"  # shown, pickled and documented there
