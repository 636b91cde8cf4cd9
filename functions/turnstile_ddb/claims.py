"""Claiming units one item at a time, skipping the ones someone else holds (``SKIP LOCKED``).

A *unit* is an item of its own with a ``status`` (free, held or sold), a ``holder`` and a hold
expiry ``holdUntil`` (epoch ms). Free units and held units carry a *ticket* (``claimableAt``) and
a *pool* attribute; a sparse global secondary index on (pool, ticket) therefore lists exactly the
units that are, or will become, claimable. Sold units drop the ticket and leave the index.

* A free unit's ticket is a random number below :data:`TICKET_SPACE` (2**20 ms after the epoch, so
  below any real clock reading): concurrent requests that start reading the index at different
  random tickets meet different units first, instead of all racing for the same head of the list.
* A held unit's ticket is its hold expiry: once the clock passes it, the unit shows up in the same
  ``claimableAt <= :now`` range as the free ones, so a lapsed hold is found like a free unit.

Finding candidates never scans: :func:`reserve` queries the index of one pool with
``#pool = :pool AND #ticket BETWEEN :pivot AND :now`` from a random pivot ticket, then
``BETWEEN 0 AND :pivot - 1`` when that was short, in pages of a few more units than it needs, and
takes the next ``quantity`` units: a *run* of one pool (:class:`_Reader`). A pool known to be small
(:meth:`PoolHints.is_sparse`) is read in one range ``BETWEEN 0 AND :now`` instead. The index is
only a hint (it is eventually consistent on AWS): the conditional write on the unit itself decides.
Every read of a pool is bounded: at most :data:`PAGES_PER_POOL` (4) Queries, whatever the index
holds (units not ``eligible`` yet included); a read that stops there short is
:class:`Unsettled`, not a refusal.

When no pool shows ``quantity`` units (every pool read to its end), the answer is
:class:`NotEnough` without a single write (once a sku has sold out: one keys-only Query per pool;
with ``guess``, a process's first look at a pool it knows nothing of may first try one guessed
unit, see below).

Reserve: ONE ``TransactWriteItems`` with one ``Update`` per unit (one plain ``UpdateItem`` when
``quantity`` is 1, which is all or nothing by itself)::

    SET #status = :held, #holder = :holder, #until = :until, #ticket = :until,
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

After a lost round (issue 23, measured under seed 002's workload, 100 threads on 100 units: the
slow requests were losers that read again at once, saw units whose claims were still on their
way, and lost two or three rounds in a row, a read and a write each):

* the request first waits as long as its lost write took plus a random part of that again
  (jitter), at most 1 s in all (``ClaimBackoff``): the writes that raced it take about as long
  to land, so the next read shows them; on DynamoDB, where a write takes milliseconds, the wait
  is as short;
* the read for the replacements is also the refusal: when it went through every pool to its end
  and showed fewer than ``quantity`` claimable units, counting the ones it was told to skip (the
  units kept from the cancelled attempt), that is a read skipping nothing, and the answer is
  :class:`NotEnough` from it (it used to read every pool a second time to say the same).

Guessed units (``guess``, the service uses it for one unit): the caller can name units without
reading (the service's unit numbers are known: pool ``k`` holds ``k``, ``k + N``, ...). A
reservation in a pool this process has no bad news of (:meth:`PoolHints.may_guess`: not
throttled lately, not seen empty or small by its last complete read, no guess missed there in
the last 10 s) first claims a guessed unit with the same conditional write, without a Query: one
``UpdateItem`` in all when it is free, the price of a purchase. A unit that is not free fails the
condition (1 WCU, ``ClaimGuessMiss``), the pool is marked, and the reservation reads as above;
no wait follows a miss (no read showed the unit, so nobody's write need land first). A refusal
still comes only from a read.

Free (cancel a reservation), one ``TransactWriteItems`` over its units (:func:`free`)::

    SET #status = :free, #ticket = :ticket, #seq = if_not_exists(#seq, :zero) + :one
    REMOVE #holder, #until, #members
    ConditionExpression: #status = :held AND #holder = :holder

Sell (confirm), one ``TransactWriteItems`` over all the units of a holder::

    SET #status = :sold, #seq = if_not_exists(#seq, :zero) + :one  REMOVE #ticket
    ConditionExpression: #holder = :holder AND
                         (#status = :sold OR (#status = :held AND #until > :now))

(``#status = :sold`` makes a retried confirm of the same holder succeed again.)

Why two writers can never both win a unit: each condition names the state it leaves. A claim of a
lapsed hold changes ``holder``, so a confirm by the old holder fails afterwards; a confirm sets
``sold``, which no claim condition accepts. DynamoDB applies writes to one item one at a time, so
whichever write comes second sees the first one's result. The clock (``:now``) only decides *who*
wins a race between a confirm and a reclaim near the expiry, never whether both do.

Remembered units (:class:`UnitCache`, optional): a read shows a few more units than the run it
takes; the rest are remembered per pool by the process, and its next reservation tries
``quantity`` of them directly with the same conditional write, without a Query (a q=1
reservation is then one ``UpdateItem``). The condition makes a stale memory safe: a remembered
unit someone took meanwhile is replaced from a fresh read as above, and a refusal still comes
only from a read of every pool, never from what is (or is not) remembered.

Metrics (pattern ``claims``): ``ClaimLost`` for every candidate another request took first,
``ConfirmLost`` for a sale refused because a unit was no longer validly held; ``ClaimCacheHit``
(a reservation started from remembered units), ``ClaimCacheMiss`` (it had to read) and
``ClaimCacheStale`` (remembered units that had been taken meanwhile); ``ClaimBackoff`` (a lost
round waited before reading again); ``ClaimGuess`` (a reservation started from a guessed unit)
and ``ClaimGuessMiss`` (the guessed unit was not free); ``ClaimHoldLapsed`` (the request took
so long that its hold would have lapsed before it was written: see ``clock_ms``);
``ClaimReadsBounded`` (a read stopped at :data:`PAGES_PER_POOL` Queries in a pool with fewer
units seen than wanted: :class:`Unsettled`).

``seq`` increases by one with every change of a unit, which lets a stream consumer recognise a
record it has already applied (see ``service.domain.inventory``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _contract, codec, errors, metrics, retry, transact

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "FREE",
    "HELD",
    "PAGES_PER_POOL",
    "SOLD",
    "SPARSE",
    "TICKET_SPACE",
    "Claimed",
    "HoldLost",
    "Key",
    "NotEnough",
    "PoolHints",
    "UnitCache",
    "UnitTable",
    "Unsettled",
    "free",
    "free_unit",
    "holders_units",
    "new_ticket",
    "reserve",
    "sell",
]

PATTERN = "claims"

FREE = "free"
HELD = "held"
SOLD = "sold"

TICKET_SPACE = 2**20  # random tickets of free units live in [0, TICKET_SPACE)
_SPREAD = 4  # how many units past a run's first candidate it may start (see _Reader.pick)
SPARSE = 16  # a pool not seen with this many claimable units is read in one whole-range Query
# The most Queries one read of one pool sends (pages of at most 100 keys): what bounds a
# reservation's reads whatever the index holds, e.g. units that exist but are not offered yet.
PAGES_PER_POOL = 4

Key = dict[str, Any]


@dataclass(frozen=True)
class UnitTable:
    """Where the units live and what their attributes are called."""

    table: str
    index: str
    key_attrs: tuple[str, ...]  # the table's key attributes, e.g. ("sku", "sk")
    pool_attr: str = "pool"
    ticket_attr: str = "claimableAt"
    status_attr: str = "status"
    holder_attr: str = "holder"
    until_attr: str = "holdUntil"
    seq_attr: str = "seq"
    members_attr: str = "members"  # on a reservation's lead unit: the keys of all its units
    owner_attr: str = "owner"  # on a reservation's lead unit: who made the reservation
    # On a claimed unit: the holder whose lapsed hold the claim replaced ("" when the unit was
    # free), so that a lapsed reservation can still be told from one that never existed.
    previous_attr: str = "previousHolder"

    def names(self) -> dict[str, str]:
        return {
            "#pool": self.pool_attr,
            "#ticket": self.ticket_attr,
            "#status": self.status_attr,
            "#holder": self.holder_attr,
            "#until": self.until_attr,
            "#seq": self.seq_attr,
        }

    def key_of(self, item: Mapping[str, Any]) -> Key:
        return {name: item[name] for name in self.key_attrs}


def new_ticket(rand: Callable[[], float] = random.random) -> int:
    return int(rand() * TICKET_SPACE)


def free_unit(units: UnitTable, key: Mapping[str, Any], pool: str, ticket: int) -> dict[str, Any]:
    """The attributes of a new, free unit (for the caller's ``PutItem``/``BatchWriteItem``)."""
    return {
        **key,
        units.pool_attr: pool,
        units.ticket_attr: ticket,
        units.status_attr: FREE,
        units.seq_attr: 0,
    }


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
def sell(
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
    names = {
        k: v
        for k, v in units.names().items()
        if k in {"#status", "#holder", "#until", "#seq", "#ticket"}
    }
    items = [
        {
            "Update": {
                "TableName": units.table,
                "Key": codec.encode_item(key),
                "UpdateExpression": (
                    "SET #status = :sold, #seq = if_not_exists(#seq, :zero) + :one REMOVE #ticket"
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


class PoolHints:
    """What this process has seen of each pool lately (a hint, never a lock): when a pool last
    throttled, when it last read empty, how many claimable units its last complete read
    showed, and when a guessed unit of it last missed (:meth:`may_guess`). :func:`reserve`
    starts with the better of two random pools (power of two choices: not
    throttled lately beats throttled, not seen empty beats seen empty) and leaves the pools with
    bad news for last; a pool is read from a random pivot only once it was seen with at least
    :data:`SPARSE` claimable units, else in one whole-range Query (a refusal then costs one read
    per pool).
    Every pool is still read before a refusal, so the hints change only the order and the shape
    of the reads, never the answer."""

    def __init__(
        self,
        *,
        throttle_seconds: float = 1.0,
        miss_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.throttle_seconds = throttle_seconds
        self.miss_seconds = miss_seconds
        self.clock = clock
        self._throttled: dict[str, float] = {}
        self._empty: dict[str, float] = {}
        self._sparse: set[str] = set()
        self._missed: dict[str, float] = {}
        self._lock = threading.Lock()

    def throttled(self, pool: str) -> None:
        with self._lock:
            self._throttled[pool] = self.clock()

    def seen(self, pool: str, empty: bool, count: int | None = None) -> None:
        """A read of ``pool`` showed units (``empty`` False) or none; ``count``: how many
        claimable units it showed, when that is all of them or at least :data:`SPARSE` (None:
        the read stopped early, having shown fewer)."""
        with self._lock:
            if empty:
                self._empty[pool] = self.clock()
            else:
                self._empty.pop(pool, None)
            if count is not None and count < SPARSE:
                self._sparse.add(pool)
            elif count is not None:
                self._sparse.discard(pool)

    def is_throttled(self, pool: str) -> bool:
        at = self._throttled.get(pool)
        return at is not None and self.clock() - at < self.throttle_seconds

    def missed(self, pool: str) -> None:
        """A guessed unit of ``pool`` (see :func:`reserve`'s ``guess``) was not claimable."""
        with self._lock:
            self._missed[pool] = self.clock()

    def may_guess(self, pool: str) -> bool:
        """Whether a unit of ``pool`` may be claimed without reading first: nothing says it is
        short. Not when it throttled lately, nor when its last complete read showed it empty or
        small (:meth:`is_sparse`), nor within ``miss_seconds`` of a guess in it that missed."""
        missed = self._missed.get(pool)
        return not (
            self.is_throttled(pool)
            or pool in self._empty
            or pool in self._sparse
            or (missed is not None and self.clock() - missed < self.miss_seconds)
        )

    def is_sparse(self, pool: str) -> bool:
        """Last seen whole with fewer than :data:`SPARSE` claimable units."""
        return pool in self._sparse

    def _badness(self, pool: str) -> tuple[bool, bool]:
        return (self.is_throttled(pool), pool in self._empty)

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


hints = PoolHints()


class UnitCache:
    """Claimable units this process saw in earlier reads and did not take (a hint, never a lock).

    A read for a reservation shows a few more units than it claims (see :meth:`_Reader.pick`); the
    rest are remembered here, per pool, and the next reservation of this process tries them
    directly with the same conditional write, without a Query. A Lambda worker serves its
    requests one after another, so a warm worker's next reservation usually costs one call.

    Safe when stale: the write's condition (``status = free`` or a lapsed hold) decides; a unit
    someone took meanwhile fails it and is replaced from a fresh read (``ClaimCacheStale``).
    Never a refusal: :class:`NotEnough` only ever comes from a read of every pool. A unit is
    handed out once (taken off the cache under a lock), so two threads of one process never try
    the same cached unit. Bounded: at most ``per_pool`` units per pool, ``pools`` pools (the
    least recently learned forgotten first), each unit for ``max_age_seconds``."""

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
        self._units: dict[tuple[str, str, str], list[tuple[float, Key]]] = {}
        self._lock = threading.Lock()

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
                del self._units[next(iter(self._units))]

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


cache = UnitCache()


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
    backoff: retry.Backoff
    rand: Callable[[], float]
    claimed: Claimed
    pool_hints: PoolHints
    eligible: Callable[[Key], bool] | None
    page_size: int | None
    unit_cache: UnitCache | None = None
    pages_per_pool: int = PAGES_PER_POOL
    pool_of: dict[tuple[Any, ...], str] = field(default_factory=dict)
    # Whether the last :meth:`pick` left a pool unread past its bound (``pages_per_pool``): its
    # reads then did not go through every pool to its end, and a short pick is no refusal.
    cut: bool = False
    # After a :meth:`pick` that came back short: how many distinct claimable (and eligible)
    # units its reads showed, counting the ones it was told to skip. Those reads went through
    # every pool to its end, so this is what a read skipping nothing showed. None otherwise.
    showed: int | None = None

    def cached(self, n: int) -> list[Key] | None:
        """``n`` units of one pool from the :class:`UnitCache`, or None (then a read)."""
        if self.unit_cache is None:
            return None
        found = self.unit_cache.take(self.units, self.pools, n, self.eligible, self.rand)
        if found is None:
            metrics.count("ClaimCacheMiss", pattern=PATTERN)
            return None
        pool, keys = found
        metrics.count("ClaimCacheHit", pattern=PATTERN)
        self.claimed.cached += len(keys)
        for key in keys:
            self.pool_of[_identity(self.units, key)] = pool
        return keys

    def guessed(
        self, n: int, guess: Callable[[str, int], Sequence[Key]] | None
    ) -> list[Key] | None:
        """``n`` units the caller names without a read (``guess``) in the first pool of
        :meth:`PoolHints.order` if :meth:`PoolHints.may_guess` allows it, or None (then a read)."""
        if guess is None or not self.pools:
            return None
        pool = self.pool_hints.order(self.pools, self.rand)[0]
        if not self.pool_hints.may_guess(pool):
            return None
        keys = [dict(key) for key in guess(pool, n)]
        if len(keys) != n:
            return None
        metrics.count("ClaimGuess", pattern=PATTERN)
        self.claimed.guessed += n
        for key in keys:
            self.pool_of[_identity(self.units, key)] = pool
        return keys

    def _query(
        self,
        pool: str,
        low: int,
        high: int,
        forward: bool,
        limit: int,
        start: Key | None,
        last_chance: bool,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "TableName": self.units.table,
            "IndexName": self.units.index,
            "KeyConditionExpression": "#pool = :pool AND #ticket BETWEEN :low AND :high",
            "ExpressionAttributeNames": {
                "#pool": self.units.pool_attr,
                "#ticket": self.units.ticket_attr,
            },
            "ExpressionAttributeValues": codec.values(pool=pool, low=low, high=high),
            "ScanIndexForward": forward,
            "Limit": limit,
        }
        if start is not None:
            request["ExclusiveStartKey"] = start

        def send() -> Any:
            return self.client.query(**request)

        response: dict[str, Any] = retry.call(
            send if last_chance else _failover_on_throttle(send),
            backoff=self.backoff,
            idempotent=True,
            pattern=PATTERN,
        )
        self.claimed.queries += 1
        return response

    def _pool(self, pool: str, n: int, skipped: int, last_chance: bool) -> Iterator[Key]:
        """The claimable units of one pool, in ticket order from where the read starts.

        A pool not known to be large (:meth:`PoolHints.is_sparse`) is read in one range
        ``[0, now]`` from a random end, its first page started at a random place (a whole small
        pool in one Query: what a refusal costs). Any other pool is read from a random *pivot*
        ticket: ``[pivot, now]``, then ``[0, pivot)``, in pages of a few more than ``n`` (and the
        ``skipped`` units it may meet again): concurrent
        requests start at different places of the ticket order and meet different runs of units,
        and no request reads more than it takes.

        Either way at most ``pages_per_pool`` Queries: a read that would need more stops there
        and sets :attr:`cut` (the pool was not read to its end)."""
        if self.pool_hints.is_sparse(pool):
            limit = self.page_size or 100
            pivot = None
            ranges = [(0, self.now_ms, self.rand() < 0.5)]
        else:
            limit = self.page_size or min(100, n + skipped + 2)
            pivot = new_ticket(self.rand)
            ranges = [(pivot, self.now_ms, True)]
            if pivot > 0:
                ranges.append((0, pivot - 1, True))
        shown = 0
        pages = 0
        for low, high, forward in ranges:
            start: Key | None = None
            while True:
                if pages == self.pages_per_pool:
                    self.cut = True  # more to read, beyond the bound
                    return
                pages += 1
                response = self._query(pool, low, high, forward, limit, start, last_chance)
                page = [
                    self.units.key_of(codec.decode_item(raw) or {}) for raw in response["Items"]
                ]
                shown += len(page)
                start = response.get("LastEvaluatedKey")
                if pivot is None:
                    # sparse read: where in the page to start (a run from a random place)
                    if start is None:
                        self.pool_hints.seen(pool, shown == 0, shown)
                    elif shown >= SPARSE:
                        self.pool_hints.seen(pool, False, shown)
                    offset = int(self.rand() * len(page)) if page else 0
                    page = page[offset:] + page[:offset]
                elif page:
                    self.pool_hints.seen(pool, False, shown if shown >= SPARSE else None)
                for key in page:
                    self.pool_of[_identity(self.units, key)] = pool
                    yield key
                if not start:
                    break
        if pivot is not None:
            self.pool_hints.seen(pool, shown == 0, shown)

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
        gathered: list[Key] = []
        deferred: list[str] = []
        shown: set[tuple[Any, ...]] = set()  # every claimable unit read, skipped ones included
        self.showed = None
        self.cut = False

        def from_pool(pool: str, last_chance: bool) -> list[Key]:
            got: list[Key] = []
            mine: set[tuple[Any, ...]] = set()  # a unit can show twice (a release moved it)
            for key in self._pool(pool, n + _SPREAD, len(avoid), last_chance):
                identity = _identity(self.units, key)
                if self.eligible is not None and not self.eligible(key):
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
            start = int(self.rand() * (len(got) - n + 1))
            if self.unit_cache is not None:
                self.unit_cache.learn(self.units, pool, got[:start] + got[start + n :])
            return got[start : start + n]

        for pool in self.pool_hints.order(self.pools, self.rand):
            try:
                got = from_pool(pool, last_chance=False)
            except _Throttled:
                self.pool_hints.throttled(pool)
                metrics.count("PoolFailover", pattern=PATTERN)
                self.claimed.failovers += 1
                deferred.append(pool)
                continue
            if len(got) == n:
                return got
            gathered += got
        for pool in deferred:
            got = from_pool(pool, last_chance=True)
            if len(got) == n:
                return got
            gathered += got
        if len(gathered) < n and not self.cut:
            self.showed = len(shown)  # every pool was read to its end
        return gathered[:n]


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
    names = {k: v for k, v in units.names().items() if k != "#pool"}
    names["#members"] = units.members_attr
    names["#owner"] = units.owner_attr
    names["#previous"] = units.previous_attr
    values = codec.values(
        held=HELD, free=FREE, holder=holder, until=until_ms, now=now_ms, zero=0, one=1, nobody=""
    )
    # (every operand reads the item as it was before the update: #previous gets the old holder)
    update = (
        "SET #status = :held, #holder = :holder, #until = :until, #ticket = :until, "
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
    backoff: retry.Backoff,
    rand: Callable[[], float] = random.random,
    page_size: int | None = None,
    rounds: int = 6,
    owner: str | None = None,
    pool_hints: PoolHints | None = None,
    eligible: Callable[[Key], bool] | None = None,
    unit_cache: UnitCache | None = None,
    guess: Callable[[str, int], Sequence[Key]] | None = None,
    clock_ms: Callable[[], int] | None = None,
    pages_per_pool: int = PAGES_PER_POOL,
) -> Claimed:
    """Claim ``quantity`` units until ``until_ms`` in ONE write, skipping units others hold;
    ``holder(lead)`` names the reservation after its lead unit (the first), which records
    ``owner`` (who reserved) when given.

    Which units: a *run*, the next ``quantity`` claimable units in ticket order after a random
    pivot of one pool (:class:`_Reader`), from the first pool in :meth:`PoolHints.order` that
    shows that many; so a multi-unit reservation writes to one pool's key, and concurrent
    requests, starting at different pivots, meet different runs. Only when no single pool shows
    ``quantity`` units, after every pool was read to its end, does it take units of several.

    The write: one conditional ``UpdateItem`` for one unit, one ``TransactWriteItems`` of one
    ``Update`` per unit for more (all or nothing, nothing to give back). When units were taken
    meanwhile the transaction is cancelled as a whole, its ``CancellationReasons`` name them, and
    only those are replaced, by a run from a fresh read (the read before is stale by then). A
    claim of one unit whose pool's key throttles is not waited for: the pool is marked
    (:class:`PoolHints`) and the unit replaced from another pool (``PoolFailover``).

    Refusals are exact: :class:`NotEnough` only when a read of every pool, skipping nothing,
    showed fewer than ``quantity`` claimable units (without a write when the first read shows
    it). After ``rounds`` cancelled or throttled writes the answer is
    :class:`turnstile_ddb.retry.RetriesExhausted` (not a refusal: the pools may hold enough; counted
    as ``ClaimRoundsExhausted``). A lost reply is resent under the same ``ClientRequestToken``
    (:func:`transact.transact_write`), so a reservation that was applied is not applied twice; if
    every resend fails the outcome is unknown and the error propagates (the units, if taken, are
    held by a reservation whose lead unit lists them, and come free when the hold lapses).

    ``eligible``: when given, only the units it accepts are claimed (the others are skipped as
    if held): units that exist but are not yet offered, say. ``page_size``: a fixed Limit for
    every Query (by default a few more than the units wanted; 100 for a sparse pool).

    **What it reads is bounded.** One read of a pool sends at most ``pages_per_pool`` Queries
    (:data:`PAGES_PER_POOL`, 4), so a read of every pool at most ``4 x pools`` (a pool whose key
    throttled is read once more, last). A reservation reads once, and once or twice more after
    each lost round, of at most ``rounds``: nothing the index holds can make it page on. Where
    every unit the index lists may be claimed, a read stops long before the bound (a page holds
    a few more units than it needs). When a read stops at the bound with fewer than ``quantity``
    units seen, the pools were not read to their end, so it is no refusal:
    :class:`Unsettled` (retryable, ``ClaimReadsBounded``), never :class:`NotEnough`.

    ``unit_cache``: when given, the units a read showed beyond the run it took are remembered
    there, and a reservation first tries ``quantity`` remembered units of one pool (no Query: one
    call in all for ``quantity`` 1); a remembered unit taken meanwhile is replaced from a fresh
    read as above (``ClaimCacheStale``), and a refusal still comes only from a read of every pool.

    ``guess(pool, n)``: when given, ``n`` keys of ``pool`` the caller names without reading (or
    fewer: no guess). Tried after the cache and before any read, in the first pool of
    :meth:`PoolHints.order` when :meth:`PoolHints.may_guess` allows it; a guessed unit that is
    not free is replaced from a read as above (``ClaimGuessMiss``) and stops guesses in its pool
    for ``PoolHints.miss_seconds``.

    ``clock_ms``: when given, no round starts once it reads ``until_ms`` or later: a hold
    written then would have lapsed before it was answered (a 201 whose ``expiresAt`` is past),
    so the answer is :class:`turnstile_ddb.retry.RetriesExhausted` instead (``ClaimHoldLapsed``).
    Found by ``make chaos``: under throttles and lost rounds a request with a 0.5 s hold took
    1.75 s and answered such a hold.

    After a lost round the request waits the lost write's time plus a jittered part of it again
    (at most 1 s in all, ``ClaimBackoff``; not when only cached or guessed units were lost)
    before it reads again;
    a replacement read that went through every pool and showed fewer than ``quantity`` units,
    the ones kept included, is the refusal.
    """
    if not 1 <= quantity <= 100:
        raise ValueError("a reservation holds 1 to 100 units (one transaction)")
    if pages_per_pool < 1:
        raise ValueError("a read of a pool sends at least one Query")
    claimed = Claimed()
    reader = _Reader(
        client=client,
        units=units,
        pools=pools,
        now_ms=now_ms,
        backoff=backoff,
        rand=rand,
        claimed=claimed,
        pool_hints=pool_hints or hints,
        eligible=eligible,
        page_size=page_size,
        unit_cache=unit_cache,
        pages_per_pool=pages_per_pool,
    )

    def fresh() -> list[Key]:
        """A full answer from a fresh read that skips nothing, or the exact refusal (or, when a
        read stopped at its bound, :class:`Unsettled`)."""
        chosen = reader.pick(quantity)
        if len(chosen) < quantity:
            if reader.cut:
                metrics.count("ClaimReadsBounded", pattern=PATTERN)
                raise Unsettled(quantity, len(chosen), pages_per_pool)
            metrics.count("ClaimRefused", pattern=PATTERN)
            raise NotEnough(quantity, len(chosen))
        return chosen

    chosen = reader.cached(quantity) or reader.guessed(quantity, guess) or fresh()
    from_cache = {_identity(units, key) for key in chosen} if claimed.cached else set()
    guessed = {_identity(units, key) for key in chosen} if claimed.guessed else set()
    throttled = False
    for _ in range(rounds):
        if clock_ms is not None and clock_ms() >= until_ms:
            metrics.count("ClaimHoldLapsed", pattern=PATTERN)
            raise retry.RetriesExhausted(
                claimed.transactions, RuntimeError("the hold would have lapsed before it began")
            )
        name = holder(chosen[0])
        items = [
            _claim_item(
                units,
                key,
                holder=name,
                now_ms=now_ms,
                until_ms=until_ms,
                members=chosen if index == 0 else None,
                owner=owner,
            )
            for index, key in enumerate(chosen)
        ]
        claimed.transactions += 1
        sent = backoff.clock()
        try:
            if quantity == 1:
                _claim_one(client, items[0]["Update"], name, units.holder_attr, backoff=backoff)
            else:
                transact.transact_write(
                    client, items, backoff=backoff, retry_conflicts=False, pattern=PATTERN
                )
        except _Throttled:
            throttled = True
            pool = reader.pool_of.get(_identity(units, chosen[0]))
            if pool is not None:
                reader.pool_hints.throttled(pool)
            claimed.failovers += 1
            metrics.count("PoolFailover", pattern=PATTERN)
            chosen = fresh()  # the throttled pool now comes last
            continue
        except transact.Cancelled as exc:
            taken = [i for i, reason in enumerate(exc.reasons) if reason.code in _TAKEN]
            if not taken or len(taken) != sum(r.failed for r in exc.reasons):
                raise  # a failure that is not "someone else has the unit"
            claimed.lost += len(taken)
            metrics.count("ClaimLost", pattern=PATTERN, value=len(taken))
            stale = sum(_identity(units, chosen[i]) in from_cache for i in taken)
            if stale:
                metrics.count("ClaimCacheStale", pattern=PATTERN, value=stale)
            metrics.count("ClaimRetry", pattern=PATTERN)
            missed = [chosen[i] for i in taken if _identity(units, chosen[i]) in guessed]
            if missed:
                # the pool is not as free as guessed: this process reads it first for a while
                metrics.count("ClaimGuessMiss", pattern=PATTERN, value=len(missed))
                pool = reader.pool_of.get(_identity(units, missed[0]))
                if pool is not None:
                    reader.pool_hints.missed(pool)
            if len(missed) + stale < len(taken):
                # units a read showed were lost: their takers' writes may still be landing
                _back_off(backoff, rand, backoff.clock() - sent)
            # The read before is stale by now (the units around the lost ones were most likely
            # taken too): replacements come from a fresh read at another pivot.
            spares = reader.pick(len(taken), skip=chosen)
            if len(spares) < len(taken):
                # That read went through every pool to its end: when even counting the units it
                # skipped (the ones kept) it showed fewer than ``quantity``, it is the exact
                # refusal itself, and a second full read would only say it again.
                if reader.showed is not None and reader.showed < quantity:
                    metrics.count("ClaimRefused", pattern=PATTERN)
                    raise NotEnough(quantity, reader.showed) from exc
                if reader.cut:
                    # That read stopped at its bound: a second one would only stop there too.
                    metrics.count("ClaimReadsBounded", pattern=PATTERN)
                    got = quantity - len(taken) + len(spares)
                    raise Unsettled(quantity, got, pages_per_pool) from exc
                chosen = fresh()  # enough shown, but not beside the ones kept: read again
                continue
            for index, spare in zip(taken, spares, strict=True):
                chosen[index] = spare
            continue
        claimed.keys = list(chosen)
        claimed.holder = name
        return claimed
    metrics.count("ClaimRoundsExhausted", pattern=PATTERN)
    cause = "pools kept throttling" if throttled else "units kept being taken first"
    raise retry.RetriesExhausted(rounds, RuntimeError(cause))


_TAKEN = frozenset({"ConditionalCheckFailed", "TransactionConflict"})
_BACKOFF_CAP_SECONDS = 1.0


def _back_off(backoff: retry.Backoff, rand: Callable[[], float], lost_write: float) -> None:
    """After a lost round, wait the time the lost write took plus a random part (jitter) of it
    again, at most :data:`_BACKOFF_CAP_SECONDS` in all, before reading again (``ClaimBackoff``).

    Why: the requests that beat this one wrote at about the same time, and others read the same
    units and are writing now. Read again at once and the read shows units whose claims are
    still on their way, so the next write loses again, and so do the other losers': measured
    under seed 002's workload (100 threads on 100 units), the slowest requests lost two or three
    rounds in a row, a read and a write each. The writes in flight take about as long to land
    as this one took, so the wait is at least that long; the jitter on top spreads the losers
    apart. The first version waited only a random part of it (full jitter), so a loser often
    read before the writes that beat it had landed (issue 23: in eight paired
    in-process runs the longer wait sent fewer calls in every pair, 1.29 against 1.40 calls per
    request at q=3, and fewer cancelled transactions). Where writes are quick (milliseconds on
    DynamoDB) the wait is as short."""
    metrics.count("ClaimBackoff", pattern=PATTERN)
    backoff.sleep(min(_BACKOFF_CAP_SECONDS, (1.0 + rand()) * max(0.0, lost_write)))


def _claim_one(
    client: DynamoDBClient,
    update: dict[str, Any],
    holder: str,
    holder_attr: str,
    *,
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


@_contract.write
def free(
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
    another reservation after the hold lapsed); those are left alone and the rest freed in one more
    transaction (bounded by ``rounds``)."""
    names = {k: v for k, v in units.names().items() if k != "#pool"}
    names["#members"] = units.members_attr
    names["#owner"] = units.owner_attr
    pending = [dict(key) for key in keys]
    kept: list[dict[str, Any]] = []
    for _ in range(rounds):
        if not pending:
            return kept
        items = [
            {
                "Update": {
                    "TableName": units.table,
                    "Key": codec.encode_item(key),
                    "UpdateExpression": (
                        "SET #status = :free, #ticket = :ticket, "
                        "#seq = if_not_exists(#seq, :zero) + :one "
                        "REMOVE #holder, #until, #members, #owner"
                    ),
                    "ConditionExpression": "#status = :held AND #holder = :holder",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": codec.values(
                        free=FREE,
                        held=HELD,
                        holder=holder,
                        ticket=new_ticket(rand),
                        zero=0,
                        one=1,
                    ),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
            for key in pending
        ]
        try:
            transact.transact_write(client, items, backoff=backoff, pattern=PATTERN)
            return kept
        except transact.Cancelled as exc:
            failed = [i for i, reason in enumerate(exc.reasons) if reason.failed]
            kept += [exc.reasons[i].item or {} for i in failed]
            metrics.count("ReleaseLost", pattern=PATTERN, value=len(failed))
            pending = [key for i, key in enumerate(pending) if i not in set(failed)]
    raise retry.RetriesExhausted(rounds, RuntimeError("units kept changing during the release"))
