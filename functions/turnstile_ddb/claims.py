"""Claiming units one item at a time, skipping the ones someone else holds (``SKIP LOCKED``).

Vocabulary: a *unit* is one item for sale; a *claim* is a reservation's hold on one unit (and
only that); :func:`reserve` claims units, :func:`release` gives them back, :func:`confirm` turns
them into a sale.

A unit is an item of its own with a ``status`` (free, held or sold), a ``holder`` and a hold
expiry ``holdUntil`` (epoch ms). Free units and held units carry a *claimable-at* value
(``claimableAt``) and a *pool* attribute; a sparse global secondary index on (pool, claimableAt)
therefore lists exactly the units that are, or will become, claimable. Sold units drop the
claimable-at value and leave the index. Every stored attribute name is a field of
:class:`UnitTable` (today's names are the defaults).

* A free unit's claimable-at value is a random number below 2**20 (milliseconds after the epoch,
  so below any real clock reading, :func:`new_claimable_at`): concurrent requests that start
  reading the index at different random values meet different units first, instead of all racing
  for the same head of the list.
* A held unit's claimable-at value is its hold expiry: once the clock passes it, the unit shows
  up in the same ``claimableAt <= :now`` range as the free ones, so a lapsed hold is found like a
  free unit.

Finding candidates never scans: :func:`reserve` queries the index of one pool with
``#pool = :pool AND #claimable BETWEEN :pivot AND :now`` from a random pivot, then
``BETWEEN 0 AND :pivot - 1`` when that was short, in pages of a few more units than it needs, and
takes the next ``quantity`` units: a *run* of one pool (:class:`_Reader`). A pool known to be small
(:meth:`PoolHints.is_sparse`) is read in one range ``BETWEEN 0 AND :now`` instead. The index is
only a hint (it is eventually consistent on AWS): the conditional write on the unit itself decides.
Every read of a pool is bounded: at most :data:`PAGES_PER_POOL` (4) Queries, whatever the index
holds (units not ``eligible`` yet included); a read that stops there short is
:class:`Unsettled`, not a refusal.

When no pool shows ``quantity`` units (every pool read to its end), the answer is
:class:`NotEnough` without a single write (once a sku has sold out: one keys-only Query per pool;
with ``guess``, a first look at a pool the hints know nothing of may first try one guessed unit,
see below).

Reserve: ONE ``TransactWriteItems`` with one ``Update`` per unit (one plain ``UpdateItem`` when
``quantity`` is 1, which is all or nothing by itself)::

    SET #status = :held, #holder = :holder, #until = :until, #claimable = :until,
        #seq = if_not_exists(#seq, :zero) + :one,
        #previous = if_not_exists(#holder, :nobody) [, #members = :keys on the lead unit]
    ConditionExpression: #status = :free OR (#status = :held AND #until <= :now)

``#previous`` (``previousHolder``, :attr:`UnitTable.previous_attr`) keeps the holder whose lapsed
hold the claim replaced (``""`` for a free unit, whose holder a release removed): a lapsed
reservation whose lead unit was taken again is still known to have existed (the service answers
EXPIRED for it, and 404 for an id nobody issued), until the unit is claimed once more.

The first (*lead*) unit also carries the list of the reservation's units, so the reservation's
record is written in the same transaction as its claims: there is no moment at which units are
held by a reservation nobody can find, and nothing to give back when the transaction fails. A
cancelled transaction's ``CancellationReasons`` (``ConditionalCheckFailed`` or
``TransactionConflict``) name the units someone else took meanwhile; just those are replaced
by a run from a fresh read and the transaction is sent again (new token), a bounded number of
times (then :class:`turnstile_ddb.retry.RetriesExhausted`, never :class:`NotEnough`). A lost reply
is resent under the same ``ClientRequestToken`` and applied once.

After a lost round (measured with 100 threads on 100 units: the slow requests were losers that
read again at once, saw units whose claims were still on their way, and lost two or three rounds
in a row, a read and a write each):

* the request first waits as long as its lost write took plus a random part of that again
  (jitter), at most 1 s in all (``ClaimBackoff``): the writes that raced it take about as long
  to land, so the next read shows them; on DynamoDB, where a write takes milliseconds, the wait
  is as short;
* the read for the replacements is also the refusal: when it went through every pool to its end
  and showed fewer than ``quantity`` claimable units, counting the ones it was told to skip (the
  units kept from the cancelled attempt), that is a read skipping nothing, and the answer is
  :class:`NotEnough` from it.

Guessed units (``ReserveOptions.guess``, the service uses it for one unit): the caller can name
units without reading (the service's unit numbers are known: pool ``k`` holds ``k``, ``k + N``,
...). A reservation in a pool its hints have no bad news of (:meth:`PoolHints.may_guess`: not
throttled lately, not seen empty or small by its last complete read, no guess missed there in
the last 10 s) first claims a guessed unit with the same conditional write, without a Query: one
``UpdateItem`` in all when it is free, the price of a purchase. A unit that is not free fails the
condition (1 WCU, ``ClaimGuessMiss``), the pool is marked, and the reservation reads as above;
no wait follows a miss (no read showed the unit, so nobody's write need land first). A refusal
still comes only from a read.

Release (give a reservation's units back), one ``TransactWriteItems`` over its units
(:func:`release`)::

    SET #status = :free, #claimable = :claimable, #seq = if_not_exists(#seq, :zero) + :one
    REMOVE #holder, #until, #members, #owner
    ConditionExpression: #status = :held AND #holder = :holder

Confirm (a sale), one ``TransactWriteItems`` over all the units of a holder (:func:`confirm`)::

    SET #status = :sold, #seq = if_not_exists(#seq, :zero) + :one  REMOVE #claimable
    ConditionExpression: #holder = :holder AND
                         (#status = :sold OR (#status = :held AND #until > :now))

(``#status = :sold`` makes a retried confirm of the same holder succeed again.)

Why two writers can never both win a unit: each condition names the state it leaves. A claim of a
lapsed hold changes ``holder``, so a confirm by the old holder fails afterwards; a confirm sets
``sold``, which no claim condition accepts. DynamoDB applies writes to one item one at a time, so
whichever write comes second sees the first one's result. The clock (``:now``) only decides *who*
wins a race between a confirm and a reclaim near the expiry, never whether both do.

What is remembered between calls is only what the caller passes in :class:`ReserveOptions`:
:class:`PoolHints` (what the pools looked like lately) and :class:`UnitCache` (units a read showed
and did not take). Without them nothing outlives a call: this module keeps no process-wide state.
Both are bounded (least recently used pools forgotten first). Remembered units (optional): a read
shows a few more units than the run it takes; the rest are remembered per pool, and the next
reservation tries ``quantity`` of them directly with the same conditional write, without a Query
(a q=1 reservation is then one ``UpdateItem``). The condition makes a stale memory safe: a
remembered unit someone took meanwhile is replaced from a fresh read as above, and a refusal
still comes only from a read of every pool, never from what is (or is not) remembered.

Metrics (pattern ``claims``): ``ClaimLost`` for every candidate another request took first,
``ConfirmLost`` for a sale refused because a unit was no longer validly held, ``ReleaseLost``
for a unit a release found no longer held; ``ClaimCacheHit``
(a reservation started from remembered units), ``ClaimCacheMiss`` (it had to read) and
``ClaimCacheStale`` (remembered units that had been taken meanwhile); ``ClaimBackoff`` (a lost
round waited before reading again); ``ClaimGuess`` (a reservation started from a guessed unit)
and ``ClaimGuessMiss`` (the guessed unit was not free); ``ClaimHoldLapsed`` (the request took
so long that its hold ended before it could be answered: no round started after it, or the claim
answered after it was given back; :class:`ClaimHoldLapsed`, see ``clock_ms``);
``ClaimReadsBounded`` (a read stopped at :data:`PAGES_PER_POOL` Queries in a pool with fewer
units seen than wanted: :class:`Unsettled`).

``seq`` increases by one with every change of a unit, which lets a stream consumer recognise a
record it has already applied (see ``service.domain.inventory``).

The caches are hand-written (an ``OrderedDict`` kept in least-recently-used order under a lock)
because the library depends on boto3 alone: ``functools.lru_cache`` caches a function's results,
not a map the caller updates, and a cache package would be a new runtime dependency for two
small maps.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, Unpack

from botocore.exceptions import BotoCoreError, ClientError

from turnstile_ddb import _checks, _contract, codec, deprecation, errors, metrics, retry, transact

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "FREE",
    "HELD",
    "METRICS",
    "PAGES_PER_POOL",
    "SOLD",
    "ClaimHoldLapsed",
    "Claimed",
    "HoldLost",
    "Key",
    "NotEnough",
    "PoolHints",
    "ReserveOptions",
    "UnitCache",
    "UnitTable",
    "Unsettled",
    "confirm",
    "holders_units",
    "new_claimable_at",
    "new_unit",
    "release",
    "reserve",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = (
    "ClaimLost",
    "ClaimRetry",
    "ClaimBackoff",
    "ClaimHoldLapsed",
    "ClaimRefused",
    "ClaimReplayed",
    "ClaimRoundsExhausted",
    "ConfirmLost",
    "ReleaseLost",
    "PoolFailover",
    "ClaimCacheHit",
    "ClaimCacheMiss",
    "ClaimCacheStale",
    "ClaimGuess",
    "ClaimGuessMiss",
    "ClaimReadsBounded",
    "Throttle",
)

PATTERN = "claims"

# A unit's stored status values.
FREE = "free"
HELD = "held"
SOLD = "sold"

_CLAIMABLE_AT_SPACE = 2**20  # random claimable-at values of free units live in [0, this)
_SPREAD = 4  # how many units past a run's first candidate it may start (see _Reader.pick)
_SPARSE = 16  # a pool not seen with this many claimable units is read in one whole-range Query
# The most Queries one read of one pool sends (pages of at most 100 keys): what bounds a
# reservation's reads whatever the index holds, e.g. units that exist but are not offered yet.
PAGES_PER_POOL = 4
_SINCE, _REMOVED_IN = "1.0.0", "2.0.0"  # the deprecated names below go in _REMOVED_IN

Key = dict[str, Any]


@dataclass(frozen=True)
class UnitTable:
    """Where the units live and what their stored attributes are called (each a field whose
    default is the name used so far, so a table of another layout names its own)."""

    table: str
    index: str
    key_attrs: tuple[str, ...]  # the table's key attributes, e.g. ("sku", "sk")
    pool_attr: str = "pool"
    claimable_at_attr: str = "claimableAt"  # the index's sort key (see the module docstring)
    status_attr: str = "status"
    holder_attr: str = "holder"
    until_attr: str = "holdUntil"
    seq_attr: str = "seq"
    members_attr: str = "members"  # on a reservation's lead unit: the keys of all its units
    owner_attr: str = "owner"  # on a reservation's lead unit: who made the reservation
    # On a claimed unit: the holder whose lapsed hold the claim replaced ("" when the unit was
    # free), so that a lapsed reservation can still be told from one that never existed.
    previous_attr: str = "previousHolder"
    # Deprecated spelling of ``claimable_at_attr``: accepted by the constructor, with a warning,
    # until 2.0.0, and then forgotten (always None once built, so ``dataclasses.replace`` of a
    # table never brings an old name back).
    ticket_attr: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ticket_attr is not None:
            _warn_renamed(
                "UnitTable(ticket_attr=...)", "UnitTable(claimable_at_attr=...)", stacklevel=4
            )
            object.__setattr__(self, "claimable_at_attr", self.ticket_attr)
            object.__setattr__(self, "ticket_attr", None)
        keys = [(f"key_attrs[{i}]", name) for i, name in enumerate(self.key_attrs)]
        _checks.distinct_names("UnitTable", [*keys, *_checks.attr_fields(self)])

    def names(self) -> dict[str, str]:
        """Every expression placeholder this module uses, with the attribute it stands for."""
        return {
            "#pool": self.pool_attr,
            "#claimable": self.claimable_at_attr,
            "#status": self.status_attr,
            "#holder": self.holder_attr,
            "#until": self.until_attr,
            "#seq": self.seq_attr,
            "#members": self.members_attr,
            "#owner": self.owner_attr,
            "#previous": self.previous_attr,
        }

    def key_of(self, item: Mapping[str, Any]) -> Key:
        return {name: item[name] for name in self.key_attrs}


def _warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` (a spelling of a name of this module) is deprecated for ``new``."""
    warnings.warn(
        f"turnstile_ddb.claims.{old} is deprecated since turnstile-ddb {_SINCE} and will be "
        f"removed in {_REMOVED_IN}; use turnstile_ddb.claims.{new} instead",
        deprecation.TurnstileDeprecationWarning,
        stacklevel=stacklevel,
    )


def _names(units: UnitTable, *placeholders: str) -> dict[str, str]:
    """The ``ExpressionAttributeNames`` of an expression using just ``placeholders``
    (DynamoDB refuses a name an expression does not use)."""
    every = units.names()
    return {placeholder: every[placeholder] for placeholder in placeholders}


def new_claimable_at(rand: Callable[[], float] = random.random) -> int:
    """A free unit's random claimable-at value: below 2**20 ms after the epoch, so before any
    hold expiry, and spread so that concurrent reads from random pivots meet different units."""
    return int(rand() * _CLAIMABLE_AT_SPACE)


def new_unit(
    units: UnitTable, key: Mapping[str, Any], pool: str, claimable_at: int
) -> dict[str, Any]:
    """The attributes of a new, free unit (for the caller's ``PutItem``/``BatchWriteItem``)."""
    return {
        **key,
        units.pool_attr: pool,
        units.claimable_at_attr: claimable_at,
        units.status_attr: FREE,
        units.seq_attr: 0,
    }


def _free_unit(units: UnitTable, key: Mapping[str, Any], pool: str, ticket: int) -> dict[str, Any]:
    """The deprecated :func:`new_unit` (its last parameter was called ``ticket``)."""
    return new_unit(units, key, pool, ticket)


class NotEnough(errors.Refused):
    """Fewer than ``wanted`` units could be claimed; the ones taken have been given back."""

    def __init__(self, wanted: int, got: int) -> None:
        super().__init__(f"only {got} of {wanted} units could be claimed")
        self.wanted = wanted
        self.got = got


class Unsettled(errors.Retryable):
    """The reads stopped at their bound (:data:`PAGES_PER_POOL` Queries per pool) with fewer than
    ``wanted`` claimable units seen and some pool not read to its end: not a refusal (the pools
    may hold enough units further on), so a later attempt may succeed. Nothing was written.

    Where every unit listed in the index is claimable this does not happen in practice: a page
    holds a few more units than a read needs. It happens when most units the index lists are not
    ``eligible`` (units of a sku still being created, say): without the bound a reservation
    would page through all of them."""

    def __init__(self, wanted: int, got: int, pages: int) -> None:
        super().__init__(
            f"{got} of {wanted} units seen in at most {pages} Queries per pool; "
            "the pools were not read to their end"
        )
        self.wanted = wanted
        self.got = got
        self.pages = pages


class ClaimHoldLapsed(retry.RetriesExhausted):
    """The hold ended, on the caller's clock (``ReserveOptions.clock_ms``), before the
    reservation could be answered: not a refusal (the units may well be there), a retryable
    answer (it is a :class:`turnstile_ddb.retry.RetriesExhausted`, so a ``Retryable``), counted
    as ``ClaimHoldLapsed``. Retry with a new hold.

    Either no round started (the clock had reached ``until_ms`` before one could be sent:
    nothing was written, ``keys`` is empty), or the round that took every unit was answered
    after the hold's end (the request paused between its read and its claim, or the reply was
    slow): answering it would hand out a hold that has already ended, dead on arrival. Its
    units are then given back (:func:`release`, on condition that this holder still holds each
    one, so a unit a rival claimed since stays the rival's) and listed in ``keys``.
    ``given_back`` is False when giving them back failed (the exception's ``__cause__`` says
    how): they may still name this holder, with a hold that has ended, which anyone may claim.
    ``until_ms``: when the hold ended."""

    def __init__(
        self, until_ms: int, rounds: int, keys: Sequence[Key] = (), *, given_back: bool = True
    ) -> None:
        if not keys:
            what = "no round was sent after it"
        elif given_back:
            what = f"the claim of {len(keys)} unit(s) was answered after it and given back"
        else:
            what = f"the claim of {len(keys)} unit(s) was answered after it; giving it back failed"
        super().__init__(rounds, None)
        self._say(
            f"the hold ended (at {until_ms} epoch ms) before the reservation was answered: {what}"
        )
        self.until_ms = until_ms
        self.keys = [dict(key) for key in keys]
        self.given_back = given_back


@dataclass
class Claimed:
    """What :func:`reserve` took, and what it cost (for tests and benchmarks)."""

    keys: list[Key] = field(default_factory=list)
    holder: str = ""
    lost: int = 0  # candidates someone else claimed first (replaced)
    queries: int = 0
    transactions: int = 0
    failovers: int = 0  # pools left for later because their key throttled
    cached: int = 0  # units first tried straight from the :class:`UnitCache` (no Query)
    guessed: int = 0  # units first tried as the caller guessed them (no Query)


class HoldLost(errors.Refused):
    """A sale failed: at least one unit is no longer held (validly) by this holder."""

    def __init__(self, keys: Sequence[Key], current: Sequence[dict[str, Any] | None]) -> None:
        super().__init__(f"{len(keys)} unit(s) no longer held")
        self.keys = list(keys)
        self.current = list(current)


def _skippable(exc: BaseException) -> bool:
    """Someone else has the unit: its condition failed, or a transaction is changing it."""
    return retry.condition_failed(exc) or retry.error_code(exc) == "TransactionConflictException"


@_contract.write
def confirm(
    client: DynamoDBClient,
    units: UnitTable,
    keys: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    now_ms: int,
    backoff: retry.Backoff,
    token: str | None = None,
) -> None:
    """Turn every unit ``holder`` validly holds into a sale, all or none; :class:`HoldLost` if any
    unit is no longer held by ``holder`` or its hold has lapsed. At most 100 keys."""
    if len(keys) > 100:
        raise ValueError("a sale covers at most 100 units (one transaction)")
    names = _names(units, "#status", "#holder", "#until", "#seq", "#claimable")
    items = [
        {
            "Update": {
                "TableName": units.table,
                "Key": codec.encode_item(key),
                "UpdateExpression": (
                    "SET #status = :sold, #seq = if_not_exists(#seq, :zero) + :one "
                    "REMOVE #claimable"
                ),
                "ConditionExpression": (
                    "#holder = :holder AND (#status = :sold OR (#status = :held AND #until > :now))"
                ),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": codec.values(
                    sold=SOLD, held=HELD, holder=holder, now=now_ms, zero=0, one=1
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        for key in keys
    ]
    try:
        transact.transact_write(client, items, backoff=backoff, token=token, pattern=PATTERN)
    except transact.Cancelled as exc:
        metrics.count("ConfirmLost", pattern=PATTERN)
        failed = [i for i, reason in enumerate(exc.reasons) if reason.failed]
        raise HoldLost(
            [dict(keys[i]) for i in failed], [exc.reasons[i].item for i in failed]
        ) from exc


@dataclass
class _PoolNews:
    """What one pool looked like lately (see :class:`PoolHints`)."""

    throttled_at: float | None = None
    empty: bool = False
    sparse: bool = False
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


class _Throttled(errors.Retryable):
    """A pool's key answered with a throttle: fail over to another pool instead of waiting."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _failover_on_throttle(send: Callable[[], Any]) -> Callable[[], Any]:
    """``send`` for :func:`turnstile_ddb.retry.call` that lets a throttle out as :class:`_Throttled`
    (``retry.call`` would wait and resend to the same hot key)."""

    def once() -> Any:
        try:
            return send()
        except ClientError as exc:
            if retry.is_throttle(exc):
                metrics.count("Throttle", pattern=PATTERN)
                raise _Throttled(exc) from exc
            raise

    return once


def _identity(units: UnitTable, key: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(key[name] for name in units.key_attrs)


@dataclass
class _Reader:
    """Reads the pools for :func:`reserve`: ``pick(n)`` finds ``n`` claimable units, as one run
    from one pool where a pool shows ``n``, else from several pools."""

    client: DynamoDBClient
    units: UnitTable
    pools: Sequence[str]
    now_ms: int
    options: ReserveOptions
    hints: PoolHints
    claimed: Claimed
    pool_of: dict[tuple[Any, ...], str] = field(default_factory=dict)
    # Whether the last :meth:`pick` left a pool unread past its bound (``pages_per_pool``): its
    # reads then did not go through every pool to its end, and a short pick is no refusal.
    cut: bool = False
    # After a :meth:`pick` that came back short: how many distinct claimable (and eligible)
    # units its reads showed, counting the ones it was told to skip. Those reads went through
    # every pool to its end, so this is what a read skipping nothing showed. None otherwise.
    showed: int | None = None

    def _from(self, pool: str, keys: list[Key]) -> list[Key]:
        """``keys`` (of ``pool``), remembered as that pool's."""
        for key in keys:
            self.pool_of[_identity(self.units, key)] = pool
        return keys

    def cached(self, n: int) -> list[Key] | None:
        """``n`` units of one pool from the :class:`UnitCache`, or None (then a read)."""
        cache = self.options.unit_cache
        if cache is None:
            return None
        found = cache.take(self.units, self.pools, n, self.options.eligible, self.options.rand)
        if found is None:
            metrics.count("ClaimCacheMiss", pattern=PATTERN)
            return None
        metrics.count("ClaimCacheHit", pattern=PATTERN)
        self.claimed.cached += len(found[1])
        return self._from(*found)

    def guessed(self, n: int) -> list[Key] | None:
        """``n`` units the caller names without a read (``guess``) in the first pool of
        :meth:`PoolHints.order` if :meth:`PoolHints.may_guess` allows it, or None (then a read)."""
        guess = self.options.guess
        if guess is None or not self.pools:
            return None
        pool = self.hints.order(self.pools, self.options.rand)[0]
        if not self.hints.may_guess(pool):
            return None
        keys = [dict(key) for key in guess(pool, n)]
        if len(keys) != n:
            return None
        metrics.count("ClaimGuess", pattern=PATTERN)
        self.claimed.guessed += n
        return self._from(pool, keys)

    def exactly(self, n: int) -> list[Key]:
        """``n`` units from a fresh read that skips nothing, or the exact refusal
        (:class:`NotEnough`; :class:`Unsettled` when a read stopped at its bound)."""
        chosen = self.pick(n)
        if len(chosen) < n:
            if self.cut:
                metrics.count("ClaimReadsBounded", pattern=PATTERN)
                raise Unsettled(n, len(chosen), self.options.pages_per_pool)
            metrics.count("ClaimRefused", pattern=PATTERN)
            raise NotEnough(n, len(chosen))
        return chosen

    def _query(
        self, pool: str, span: tuple[int, int, bool], limit: int, start: Key | None, last: bool
    ) -> dict[str, Any]:
        """One page of ``pool``'s claimable-at range ``span`` (low, high, forward); a throttle
        raises :class:`_Throttled` unless this is the pool's ``last`` chance."""
        low, high, forward = span
        request: dict[str, Any] = {
            "TableName": self.units.table,
            "IndexName": self.units.index,
            "KeyConditionExpression": "#pool = :pool AND #claimable BETWEEN :low AND :high",
            "ExpressionAttributeNames": _names(self.units, "#pool", "#claimable"),
            "ExpressionAttributeValues": codec.values(pool=pool, low=low, high=high),
            "ScanIndexForward": forward,
            "Limit": limit,
        }
        if start is not None:
            request["ExclusiveStartKey"] = start

        def send() -> Any:
            return self.client.query(**request)

        response: dict[str, Any] = retry.call(
            send if last else _failover_on_throttle(send),
            backoff=self.options.backoff,
            idempotent=True,
            pattern=PATTERN,
        )
        self.claimed.queries += 1
        return response

    def _plan(self, pool: str, n: int, skipped: int) -> tuple[int, int | None, list[Any]]:
        """How to read ``pool``: the page Limit, the pivot (None: the whole range at once) and
        the claimable-at ranges (low, high, forward) in reading order."""
        # A fixed page smaller than what the read wants is raised to it: at pages_per_pool
        # Queries it could never show the units (Unsettled on every try).
        page_size, now_ms = self.options.page_size, self.now_ms
        fixed = None if page_size is None else max(page_size, n)
        if self.hints.is_sparse(pool):
            return fixed or 100, None, [(0, now_ms, self.options.rand() < 0.5)]
        pivot = new_claimable_at(self.options.rand)
        ranges = [(pivot, now_ms, True)] + ([(0, pivot - 1, True)] if pivot > 0 else [])
        return fixed or min(100, n + skipped + 2), pivot, ranges

    def _pool(self, pool: str, n: int, skipped: int, last: bool) -> Iterator[Key]:
        """The claimable units of one pool, in claimable-at order from where the read starts.

        A pool not known to be large (:meth:`PoolHints.is_sparse`) is read in one range
        ``[0, now]`` from a random end, its first page started at a random place (a whole small
        pool in one Query: what a refusal costs). Any other pool is read from a random *pivot*:
        ``[pivot, now]``, then ``[0, pivot)``, in pages of a few more than ``n`` (and the
        ``skipped`` units it may meet again): concurrent requests start at different places and
        meet different runs of units, and no request reads more than it takes.

        Either way at most ``pages_per_pool`` Queries: a read that would need more stops there
        and sets :attr:`cut` (the pool was not read to its end)."""
        limit, pivot, ranges = self._plan(pool, n, skipped)
        shown = pages = 0
        for span in ranges:
            start: Key | None = None
            while True:
                if pages == self.options.pages_per_pool:
                    self.cut = True  # more to read, beyond the bound
                    return
                pages += 1
                response = self._query(pool, span, limit, start, last)
                page = [
                    self.units.key_of(codec.decode_item(raw) or {}) for raw in response["Items"]
                ]
                shown += len(page)
                start = response.get("LastEvaluatedKey")
                if pivot is None:
                    page = self._whole_range_page(pool, page, shown, done=start is None)
                elif page:
                    self.hints.seen(pool, False, shown if shown >= _SPARSE else None)
                yield from self._from(pool, page)
                if not start:
                    break
        if pivot is not None:
            self.hints.seen(pool, shown == 0, shown)

    def _whole_range_page(self, pool: str, page: list[Key], shown: int, done: bool) -> list[Key]:
        """A page of a sparse pool's whole-range read, rotated to start at a random place (a run
        from there), after telling the hints what the read has shown so far."""
        if done:
            self.hints.seen(pool, shown == 0, shown)
        elif shown >= _SPARSE:
            self.hints.seen(pool, False, shown)
        offset = int(self.options.rand() * len(page)) if page else 0
        return page[offset:] + page[:offset]

    def _run(
        self,
        pool: str,
        n: int,
        avoid: set[tuple[Any, ...]],
        shown: set[tuple[Any, ...]],
        last: bool,
    ) -> list[Key]:
        """Up to ``n`` units of ``pool`` not in ``avoid`` (which then holds them too), read from
        the first ``n + _SPREAD`` such units at a random start; every eligible unit read is added
        to ``shown``, and the ones read but not taken go to the unit cache."""
        eligible = self.options.eligible
        got: list[Key] = []
        mine: set[tuple[Any, ...]] = set()  # a unit can show twice (a release moved it)
        for key in self._pool(pool, n + _SPREAD, len(avoid), last):
            identity = _identity(self.units, key)
            if eligible is not None and not eligible(key):
                continue
            shown.add(identity)
            if identity in avoid or identity in mine:
                continue
            mine.add(identity)
            got.append(key)
            if len(got) == n + _SPREAD:
                break
        avoid.update(mine)
        if len(got) <= n:
            return got
        start = int(self.options.rand() * (len(got) - n + 1))
        if self.options.unit_cache is not None:
            self.options.unit_cache.learn(self.units, pool, got[:start] + got[start + n :])
        return got[start : start + n]

    def pick(self, n: int, skip: Sequence[Key] = ()) -> list[Key]:
        """``n`` claimable units not in ``skip``: a run from the first pool (in
        :meth:`PoolHints.order`) that shows ``n``; when none does, after every pool was read to
        its end, whatever they showed together (fewer than ``n`` when there are not enough).

        The run starts at a random one of the first ``_SPREAD + 1`` units read: the unit right
        after a random pivot is chosen in proportion to the gap before it, which would make
        concurrent requests meet more often than a uniform choice; a few gaps together even
        that out.

        A pool whose key throttles is left for after the others (``PoolFailover``) and then read
        under the usual backoff. Each read of a pool sends at most ``pages_per_pool`` Queries;
        when one stopped there (:attr:`cut`), a short answer is not what a read of every pool to
        its end showed (:attr:`showed` stays None)."""
        avoid = {_identity(self.units, key) for key in skip}
        shown: set[tuple[Any, ...]] = set()  # every claimable unit read, skipped ones included
        gathered: list[Key] = []
        deferred: list[str] = []
        self.showed, self.cut = None, False
        for pool in self.hints.order(self.pools, self.options.rand):
            try:
                got = self._run(pool, n, avoid, shown, last=False)
            except _Throttled:
                self.hints.throttled(pool)
                self._failed_over()
                deferred.append(pool)
                continue
            if len(got) == n:
                return got
            gathered += got
        for pool in deferred:
            got = self._run(pool, n, avoid, shown, last=True)
            if len(got) == n:
                return got
            gathered += got
        if len(gathered) < n and not self.cut:
            self.showed = len(shown)  # every pool was read to its end
        return gathered[:n]

    def _failed_over(self) -> None:
        metrics.count("PoolFailover", pattern=PATTERN)
        self.claimed.failovers += 1


def _claim_item(
    units: UnitTable,
    key: Mapping[str, Any],
    *,
    holder: str,
    now_ms: int,
    until_ms: int,
    members: Sequence[Key] | None,
    owner: str | None = None,
) -> dict[str, Any]:
    """One unit's conditional claim inside the reservation's transaction. The lead unit (the first)
    also records which units the reservation holds (``members``) and who made it (``owner``);
    every other unit drops whatever a lapsed reservation left on it. Every unit keeps the holder
    it replaced (``previousHolder``: a lapsed hold's, or ``""`` for a free unit)."""
    names = _names(
        units,
        "#claimable",
        "#status",
        "#holder",
        "#until",
        "#seq",
        "#members",
        "#owner",
        "#previous",
    )
    values = codec.values(
        held=HELD, free=FREE, holder=holder, until=until_ms, now=now_ms, zero=0, one=1, nobody=""
    )
    # (every operand reads the item as it was before the update: #previous gets the old holder)
    update = (
        "SET #status = :held, #holder = :holder, #until = :until, #claimable = :until, "
        "#seq = if_not_exists(#seq, :zero) + :one, #previous = if_not_exists(#holder, :nobody)"
    )
    if members is None:
        update += " REMOVE #members, #owner"
    else:
        update += ", #members = :members"
        values.update(codec.values(members=[dict(m) for m in members]))
        if owner is None:
            update += " REMOVE #owner"
        else:
            update += ", #owner = :owner"
            values.update(codec.values(owner=owner))
    return {
        "Update": {
            "TableName": units.table,
            "Key": codec.encode_item(key),
            "UpdateExpression": update,
            "ConditionExpression": "#status = :free OR (#status = :held AND #until <= :now)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


@_contract.write
def reserve(
    client: DynamoDBClient,
    units: UnitTable,
    *,
    pools: Sequence[str],
    quantity: int,
    holder: Callable[[Key], str],
    now_ms: int,
    until_ms: int,
    owner: str | None = None,
    options: ReserveOptions | None = None,
    **old: Unpack[_OldReserveArguments],
) -> Claimed:
    """Claim ``quantity`` units of ``pools`` until ``until_ms`` in ONE write, skipping units
    others hold; ``holder(lead)`` names the reservation after its lead unit (the first), which
    records ``owner`` (who reserved) when given. How it goes about it: ``options``
    (:class:`ReserveOptions`; the old keywords ``backoff=``, ``rounds=``, ``pool_hints=``... still
    work until 2.0.0, with a warning).

    Which units: a *run*, the next ``quantity`` claimable units in claimable-at order after a
    random pivot of one pool (:class:`_Reader`), from the first pool in :meth:`PoolHints.order`
    that shows that many; so a multi-unit reservation writes to one pool's key, and concurrent
    requests, starting at different pivots, meet different runs. Only when no single pool shows
    ``quantity`` units, after every pool was read to its end, does it take units of several.

    The write: one conditional ``UpdateItem`` for one unit, one ``TransactWriteItems`` of one
    ``Update`` per unit for more (all or nothing, nothing to give back). When units were taken
    meanwhile the transaction is cancelled as a whole, its ``CancellationReasons`` name them, and
    only those are replaced, by a run from a fresh read (the read before is stale by then). A
    claim whose pool's key throttles is not waited for: the pool is marked (:class:`PoolHints`)
    and the units replaced from another pool (``PoolFailover``).

    Refusals are exact: :class:`NotEnough` only when a read of every pool, skipping nothing,
    showed fewer than ``quantity`` claimable units (without a write when the first read shows
    it). After ``options.rounds`` cancelled or throttled writes the answer is
    :class:`turnstile_ddb.retry.RetriesExhausted` (not a refusal: the pools may hold enough;
    counted as ``ClaimRoundsExhausted``). A lost reply is resent under the same
    ``ClientRequestToken`` (:func:`transact.transact_write`), so a reservation that was applied is
    not applied twice; if every resend fails the outcome is unknown and the error propagates (the
    units, if taken, are held by a reservation whose lead unit lists them, and come free when the
    hold lapses).

    **What it reads is bounded.** One read of a pool sends at most ``options.pages_per_pool``
    Queries (:data:`PAGES_PER_POOL`, 4), so a read of every pool at most ``4 x pools`` (a pool
    whose key throttled is read once more, last). A reservation reads once, and once or twice
    more after each lost round: nothing the index holds can make it page on. When a read stops at
    the bound with fewer than ``quantity`` units seen, the pools were not read to their end, so
    it is no refusal: :class:`Unsettled` (retryable, ``ClaimReadsBounded``), never
    :class:`NotEnough`.

    Before any read it tries remembered units (``options.unit_cache``), then guessed ones
    (``options.guess``); one taken meanwhile is replaced from a fresh read (``ClaimCacheStale``,
    ``ClaimGuessMiss``). With ``options.clock_ms``, no round starts once the hold would have
    lapsed, and a claim answered after the hold's end is given back (conditionally: a unit a
    rival claimed since stays the rival's) instead of being answered as a hold already ended:
    :class:`ClaimHoldLapsed` (a :class:`turnstile_ddb.retry.RetriesExhausted`,
    ``ClaimHoldLapsed``).

    After a lost round the request waits the lost write's time plus a jittered part of it again
    (at most 1 s in all, ``ClaimBackoff``; not when only cached or guessed units were lost)
    before it reads again; a replacement read that went through every pool and showed fewer than
    ``quantity`` units, the ones kept included, is the refusal.
    """
    if not 1 <= quantity <= 100:
        raise ValueError("a reservation holds 1 to 100 units (one transaction)")
    chosen = _Reservation.begin(
        client,
        units,
        pools=pools,
        quantity=quantity,
        holds=_Hold(holder, now_ms, until_ms, owner),
        options=_options_of(options, old),
    )
    return chosen.settle()


@dataclass(frozen=True)
class _Hold:
    """What every claim of one reservation writes: who holds, from when, until when, for whom."""

    name: Callable[[Key], str]
    now_ms: int
    until_ms: int
    owner: str | None


@dataclass
class _Reservation:
    """One :func:`reserve` call in steps: :meth:`begin` picks the first candidates (remembered,
    guessed or read), :meth:`settle` sends claim rounds (:meth:`_claim_round`) until one is
    taken whole, replacing lost units (:meth:`_replace_lost`, after :meth:`_wait_after_loss`) or
    failing over from a throttled pool in between."""

    client: DynamoDBClient
    units: UnitTable
    quantity: int
    holds: _Hold
    options: ReserveOptions
    reader: _Reader
    claimed: Claimed
    chosen: list[Key]
    from_cache: set[tuple[Any, ...]]
    guessed: set[tuple[Any, ...]]
    throttled: bool = False
    last: BaseException | None = None  # the last round's failure

    @classmethod
    def begin(
        cls,
        client: DynamoDBClient,
        units: UnitTable,
        *,
        pools: Sequence[str],
        quantity: int,
        holds: _Hold,
        options: ReserveOptions,
    ) -> _Reservation:
        """Read (or remember, or guess) the first candidates."""
        claimed = Claimed()
        hints = options.hints if options.hints is not None else PoolHints()
        reader = _Reader(client, units, pools, holds.now_ms, options, hints, claimed)
        chosen = reader.cached(quantity) or reader.guessed(quantity) or reader.exactly(quantity)
        identities = {_identity(units, key) for key in chosen}
        return cls(
            client,
            units,
            quantity,
            holds,
            options,
            reader,
            claimed,
            chosen,
            from_cache=identities if claimed.cached else set(),
            guessed=identities if claimed.guessed else set(),
        )

    def settle(self) -> Claimed:
        """Claim rounds until one takes every chosen unit; at most ``options.rounds``."""
        for _ in range(self.options.rounds):
            if self._lapsed():
                metrics.count("ClaimHoldLapsed", pattern=PATTERN)
                raise ClaimHoldLapsed(self.holds.until_ms, self.claimed.transactions)
            name = self.holds.name(self.chosen[0])
            if self._claim_round(name):
                self.claimed.keys = list(self.chosen)
                self.claimed.holder = name
                if self._lapsed():
                    self._give_back()
                return self.claimed
        metrics.count("ClaimRoundsExhausted", pattern=PATTERN)
        if self.throttled:
            raise errors.StayedThrottled(self.options.rounds, "the pools' keys", self.last)
        raise errors.LostEveryRace(self.options.rounds, "units kept being taken first", self.last)

    def _lapsed(self) -> bool:
        """Whether the hold has ended on the caller's clock (never, without one)."""
        clock = self.options.clock_ms
        return clock is not None and clock() >= self.holds.until_ms

    def _give_back(self) -> NoReturn:
        """The round that took every unit was answered after the hold's end: give the units
        back and answer :class:`ClaimHoldLapsed` instead of a hold that has already ended.

        Only this round needs it: a lost or throttled round wrote nothing (a transaction is all
        or nothing, a failed condition writes nothing), and no round starts once the hold has
        ended. The release is conditional on this holder (``#holder = :holder``): a unit a rival
        claimed after the hold ended is left with the rival (``ReleaseLost``). The clock only
        makes the answer honest; the conditions decide who holds what."""
        metrics.count("ClaimHoldLapsed", pattern=PATTERN)
        keys, rounds = self.claimed.keys, self.claimed.transactions
        until = self.holds.until_ms
        try:
            release(
                self.client,
                self.units,
                keys,
                holder=self.claimed.holder,
                backoff=self.options.backoff,
                rand=self.options.rand,
            )
        except (errors.TurnstileError, ClientError, BotoCoreError) as exc:
            raise ClaimHoldLapsed(until, rounds, keys, given_back=False) from exc
        raise ClaimHoldLapsed(until, rounds, keys)

    def _claim_round(self, name: str) -> bool:
        """One write claiming every chosen unit for ``name``: True when it took them all; else
        the lost or throttled units are replaced for the next round."""
        items = [
            _claim_item(
                self.units,
                key,
                holder=name,
                now_ms=self.holds.now_ms,
                until_ms=self.holds.until_ms,
                members=self.chosen if index == 0 else None,
                owner=self.holds.owner,
            )
            for index, key in enumerate(self.chosen)
        ]
        self.claimed.transactions += 1
        backoff = self.options.backoff
        sent = backoff.clock()
        try:
            if self.quantity == 1:
                _claim_one(self.client, items[0]["Update"], name, self.units.holder_attr, backoff)
            else:
                transact.transact_write(
                    self.client, items, backoff=backoff, retry_conflicts=False, pattern=PATTERN
                )
        except _Throttled as exc:
            self.throttled, self.last = True, exc
            pool = self.reader.pool_of.get(_identity(self.units, self.chosen[0]))
            if pool is not None:
                self.reader.hints.throttled(pool)
            self.reader._failed_over()
            self.chosen = self.reader.exactly(self.quantity)  # the throttled pool now comes last
            return False
        except transact.Cancelled as exc:
            self.last = exc
            self._replace_lost(exc, backoff.clock() - sent)
            return False
        return True

    def _replace_lost(self, exc: transact.Cancelled, took: float) -> None:
        """The units someone else took first (``exc``'s reasons) replaced by a fresh read's, or
        the refusal that read amounts to; ``took``: how long the lost write took."""
        taken = [i for i, reason in enumerate(exc.reasons) if reason.code in _TAKEN]
        if not taken or len(taken) != sum(r.failed for r in exc.reasons):
            raise exc  # a failure that is not "someone else has the unit"
        self.claimed.lost += len(taken)
        metrics.count("ClaimLost", pattern=PATTERN, value=len(taken))
        stale = sum(_identity(self.units, self.chosen[i]) in self.from_cache for i in taken)
        if stale:
            metrics.count("ClaimCacheStale", pattern=PATTERN, value=stale)
        metrics.count("ClaimRetry", pattern=PATTERN)
        missed = self._missed_guesses(taken)
        if missed + stale < len(taken):
            # units a read showed were lost: their takers' writes may still be landing
            _back_off(self.options.backoff, self.options.rand, took)
        # The read before is stale by now (the units around the lost ones were most likely
        # taken too): replacements come from a fresh read at another pivot.
        spares = self.reader.pick(len(taken), skip=self.chosen)
        if len(spares) < len(taken):
            self._short_replacement(exc, len(taken), len(spares))
            return
        for index, spare in zip(taken, spares, strict=True):
            self.chosen[index] = spare

    def _missed_guesses(self, taken: Sequence[int]) -> int:
        """How many of the ``taken`` units were guessed; their pool is marked as not as free as
        guessed (read first for a while)."""
        missed = [
            self.chosen[i] for i in taken if _identity(self.units, self.chosen[i]) in self.guessed
        ]
        if missed:
            metrics.count("ClaimGuessMiss", pattern=PATTERN, value=len(missed))
            pool = self.reader.pool_of.get(_identity(self.units, missed[0]))
            if pool is not None:
                self.reader.hints.missed(pool)
        return len(missed)

    def _short_replacement(self, exc: transact.Cancelled, lost: int, found: int) -> None:
        """A replacement read found fewer than the ``lost`` units: when it went through every
        pool to its end and, counting the units kept, showed fewer than ``quantity``, it is the
        exact refusal itself (a second full read would only say it again); when it stopped at
        its bound, :class:`Unsettled`; else enough were shown but not beside the ones kept, and
        a fresh read chooses anew."""
        reader = self.reader
        if reader.showed is not None and reader.showed < self.quantity:
            metrics.count("ClaimRefused", pattern=PATTERN)
            raise NotEnough(self.quantity, reader.showed) from exc
        if reader.cut:
            metrics.count("ClaimReadsBounded", pattern=PATTERN)
            got = self.quantity - lost + found
            raise Unsettled(self.quantity, got, self.options.pages_per_pool) from exc
        self.chosen = reader.exactly(self.quantity)


_TAKEN = frozenset({"ConditionalCheckFailed", "TransactionConflict"})
_BACKOFF_CAP_SECONDS = 1.0


def _back_off(backoff: retry.Backoff, rand: Callable[[], float], lost_write: float) -> None:
    """After a lost round, wait the time the lost write took plus a random part (jitter) of it
    again, at most :data:`_BACKOFF_CAP_SECONDS` in all, before reading again (``ClaimBackoff``).

    Why: the requests that beat this one wrote at about the same time, and others read the same
    units and are writing now. Read again at once and the read shows units whose claims are
    still on their way, so the next write loses again, and so do the other losers': measured
    with 100 threads on 100 units, the slowest requests lost two or three rounds in a row, a read
    and a write each. The writes in flight take about as long to land as this one took, so the
    wait is at least that long; the jitter on top spreads the losers apart. A wait of only a
    random part of it (full jitter) let a loser often read before the writes that beat it had
    landed: in eight paired in-process runs the longer wait sent fewer calls in every pair, 1.29
    against 1.40 calls per request at q=3, and fewer cancelled transactions. Where writes are
    quick (milliseconds on DynamoDB) the wait is as short."""
    metrics.count("ClaimBackoff", pattern=PATTERN)
    backoff.sleep(min(_BACKOFF_CAP_SECONDS, (1.0 + rand()) * max(0.0, lost_write)))


def _claim_one(
    client: DynamoDBClient,
    update: dict[str, Any],
    holder: str,
    holder_attr: str,
    backoff: retry.Backoff,
) -> None:
    """A reservation of one unit needs no transaction: one conditional ``UpdateItem`` is all or
    nothing by itself (1 WCU instead of 2). Resent after a lost reply: if the first send was
    applied, the resend fails its condition on a unit that names ``holder``, which is a success.
    Someone else's unit raises :class:`transact.Cancelled` shaped like the transaction's; a
    throttle raises :class:`_Throttled` at once (the caller fails over to another pool), unless
    an earlier send's outcome is unknown: that send may have taken the unit, so a consistent read
    decides first (failing over then would leave the unit held by a reservation nobody knows)."""
    sends = 0

    def send() -> Any:
        nonlocal sends
        sends += 1
        return client.update_item(**update, ReturnValuesOnConditionCheckFailure="ALL_OLD")

    try:
        retry.call(
            _failover_on_throttle(send),
            backoff=backoff,
            idempotent=True,  # see above: a resend cannot take the unit twice
            # a 500 may or may not have been applied: resending is safe for the same reason
            retry_on=lambda exc: retry.error_code(exc) == "InternalServerError",
            pattern=PATTERN,
        )
    except _Throttled:
        if sends > 1 and _holds(client, update, holder, holder_attr, backoff=backoff):
            metrics.count("ClaimReplayed", pattern=PATTERN)
            return
        raise
    except ClientError as exc:
        if retry.condition_failed(exc):
            current = codec.old_item(exc) or {}
            if current.get(holder_attr) == holder:
                metrics.count("ClaimReplayed", pattern=PATTERN)
                return
            code = "ConditionalCheckFailed"
        elif retry.error_code(exc) == "TransactionConflictException":
            code = "TransactionConflict"
        else:
            raise
        raise transact.Cancelled([transact.Reason(code, str(exc), codec.old_item(exc))]) from exc


def _holds(
    client: DynamoDBClient,
    update: Mapping[str, Any],
    holder: str,
    holder_attr: str,
    *,
    backoff: retry.Backoff,
) -> bool:
    """Whether the unit ``update`` claims names ``holder`` now (a strongly consistent read,
    retried through throttles: its answer decides whether a claim whose reply was lost took it)."""
    item = _read_now(client, update["TableName"], update["Key"], backoff=backoff) or {}
    return bool(item.get(holder_attr) == holder)


def _read_now(
    client: DynamoDBClient, table: str, key: Mapping[str, Any], *, backoff: retry.Backoff
) -> dict[str, Any] | None:
    """The item at ``key`` (encoded) as it is now: strongly consistent, retried through
    throttles and lost replies (a read is safe to resend). None if there is no such item."""
    response = retry.call(
        lambda: client.get_item(TableName=table, Key=dict(key), ConsistentRead=True),
        backoff=backoff,
        idempotent=True,
        pattern=PATTERN,
    )
    return codec.decode_item(response.get("Item"))


@_contract.read
def holders_units(
    client: DynamoDBClient, units: UnitTable, lead: Mapping[str, Any], *, backoff: retry.Backoff
) -> dict[str, Any] | None:
    """The lead unit as it is now (strongly consistent), or None if there is no such unit."""
    return _read_now(client, units.table, codec.encode_item(lead), backoff=backoff)


def _release_item(
    units: UnitTable, key: Mapping[str, Any], holder: str, claimable_at: int
) -> dict[str, Any]:
    """One unit's conditional release inside a release's transaction (see the module
    docstring): free again at a new random claimable-at value, if ``holder`` still holds it."""
    return {
        "Update": {
            "TableName": units.table,
            "Key": codec.encode_item(key),
            "UpdateExpression": (
                "SET #status = :free, #claimable = :claimable, "
                "#seq = if_not_exists(#seq, :zero) + :one "
                "REMOVE #holder, #until, #members, #owner"
            ),
            "ConditionExpression": "#status = :held AND #holder = :holder",
            "ExpressionAttributeNames": _names(
                units, "#claimable", "#status", "#holder", "#until", "#seq", "#members", "#owner"
            ),
            "ExpressionAttributeValues": codec.values(
                free=FREE, held=HELD, holder=holder, claimable=claimable_at, zero=0, one=1
            ),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


@_contract.write
def release(
    client: DynamoDBClient,
    units: UnitTable,
    keys: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    backoff: retry.Backoff,
    rand: Callable[[], float] = random.random,
    rounds: int = 3,
) -> list[dict[str, Any]]:
    """Give back every unit of ``keys`` that ``holder`` still holds, in one transaction.

    Returns the units it no longer held (as they are now: sold by its own confirm, or reclaimed by
    another reservation after the hold lapsed); those are left alone and the rest released in one
    more transaction (bounded by ``rounds``)."""
    _checks.at_least("release", "rounds", rounds, 1)
    pending = [dict(key) for key in keys]
    kept: list[dict[str, Any]] = []
    last: BaseException | None = None
    for _ in range(rounds):
        if not pending:
            return kept
        items = [_release_item(units, key, holder, new_claimable_at(rand)) for key in pending]
        try:
            transact.transact_write(client, items, backoff=backoff, pattern=PATTERN)
            return kept
        except transact.Cancelled as exc:
            last = exc
            failed = {i for i, reason in enumerate(exc.reasons) if reason.failed}
            kept += [exc.reasons[i].item or {} for i in sorted(failed)]
            metrics.count("ReleaseLost", pattern=PATTERN, value=len(failed))
            pending = [key for i, key in enumerate(pending) if i not in failed]
    raise errors.LostEveryRace(rounds, "units kept changing during the release", last)


_deprecated_cache: list[UnitCache] = []  # built on first use of the deprecated ``cache`` only
_deprecated_cache_lock = threading.Lock()


def _process_cache() -> UnitCache:
    """The process-wide cache the deprecated name ``cache`` stood for (built on its first use)."""
    with _deprecated_cache_lock:
        if not _deprecated_cache:
            _deprecated_cache.append(UnitCache())
        return _deprecated_cache[0]


def _old(use: str, value: Callable[[], object]) -> tuple[str, str, str, Callable[[], object]]:
    return (_SINCE, _REMOVED_IN, use, value)


# Old names, answered with a TurnstileDeprecationWarning until 2.0.0 (CHANGELOG.md says how to
# move off each one).
__getattr__ = deprecation.renamed(
    __name__,
    {
        "free": _old("turnstile_ddb.claims.release", lambda: release),
        "sell": _old("turnstile_ddb.claims.confirm", lambda: confirm),
        "new_ticket": _old("turnstile_ddb.claims.new_claimable_at", lambda: new_claimable_at),
        "free_unit": _old("turnstile_ddb.claims.new_unit", lambda: _free_unit),
        "TICKET_SPACE": _old("turnstile_ddb.claims.new_claimable_at", lambda: _CLAIMABLE_AT_SPACE),
        "SPARSE": _old("nothing: it is the library's own tuning", lambda: _SPARSE),
        "cache": _old(
            "a UnitCache() of your own, passed as ReserveOptions(unit_cache=...)", _process_cache
        ),
    },
)
