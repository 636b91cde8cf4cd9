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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Unpack

from botocore.exceptions import BotoCoreError, ClientError

from turnstile_ddb import (
    _checks,
    _contract,
    _core,
    codec,
    deprecation,
    errors,
    metrics,
    retry,
    transact,
)
from turnstile_ddb._claims_hints import (
    PoolHints,
    ReserveOptions,
    UnitCache,
    _OldReserveArguments,
    _options_of,
)
from turnstile_ddb._claims_reader import _failover_on_throttle as _raise_throttled
from turnstile_ddb._claims_reader import _Picked, _read_now, _Reader, _Throttled
from turnstile_ddb._claims_results import (
    Claimed,
    ClaimHoldLapsed,
    HoldLost,
    NotEnough,
    Unsettled,
    _Cost,
)
from turnstile_ddb._claims_units import (
    _CLAIMABLE_AT_SPACE,
    _REMOVED_IN,
    _SINCE,
    _SPARSE,
    FREE,
    HELD,
    PAGES_PER_POOL,
    PATTERN,
    SOLD,
    Key,
    UnitTable,
    _claim_item,
    _confirm_item,
    _free_unit,
    _identity,
    _release_item,
    new_claimable_at,
    new_unit,
)

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


def confirm_protocol(
    units: UnitTable,
    keys: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    now_ms: int,
    backoff: retry.Backoff,
    token: str | None = None,
) -> _core.Steps[None]:
    """Turn every unit ``holder`` validly holds into a sale, all or none; :class:`HoldLost` if any
    unit is no longer held by ``holder`` or its hold has lapsed. At most 100 keys."""
    if len(keys) > 100:
        raise ValueError("a sale covers at most 100 units (one transaction)")
    items = [_confirm_item(units, key, holder, now_ms) for key in keys]
    try:
        yield from transact.transact_write_protocol(
            items, backoff=backoff, token=token, pattern=PATTERN
        )
    except transact.Cancelled as exc:
        metrics.count("ConfirmLost", pattern=PATTERN)
        failed = [i for i, reason in enumerate(exc.reasons) if reason.failed]
        raise HoldLost(
            [dict(keys[i]) for i in failed], [exc.reasons[i].item for i in failed]
        ) from exc


confirm = _contract.write(_core.driven(confirm_protocol))


def _fail_over(hints: PoolHints, pool: str | None, cost: _Cost) -> None:
    """A pool's key throttled (a read's or a claim's): the pool is marked, so it comes last."""
    if pool is not None:
        hints.throttled(pool)
    metrics.count("PoolFailover", pattern=PATTERN)
    cost.failovers += 1


def _remembered(reader: _Reader, n: int, cost: _Cost) -> list[Key] | None:
    """``n`` units of one pool from the caller's :class:`UnitCache`, or None (no cache, or none
    there: then a read)."""
    if reader.options.unit_cache is None:
        return None
    keys = reader.cached(n)
    if keys is None:
        metrics.count("ClaimCacheMiss", pattern=PATTERN)
        return None
    metrics.count("ClaimCacheHit", pattern=PATTERN)
    cost.cached += len(keys)
    return keys


def _guessed(reader: _Reader, n: int, cost: _Cost) -> list[Key] | None:
    """``n`` units the caller's ``guess`` names, or None (no guess, or not in that pool now)."""
    keys = reader.guessed(n)
    if keys is not None:
        metrics.count("ClaimGuess", pattern=PATTERN)
        cost.guessed += n
    return keys


def _exactly(reader: _Reader, n: int) -> _core.Steps[list[Key]]:
    """``n`` units from a fresh read that skips nothing, or the exact refusal
    (:class:`NotEnough`; :class:`Unsettled` when a read stopped at its bound)."""
    picked = yield from reader.pick(n)
    if len(picked.keys) < n:
        if picked.cut:
            metrics.count("ClaimReadsBounded", pattern=PATTERN)
            raise Unsettled(n, len(picked.keys), reader.options.pages_per_pool)
        metrics.count("ClaimRefused", pattern=PATTERN)
        raise NotEnough(n, len(picked.keys))
    return picked.keys


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
    hold = _Hold(holder, now_ms, until_ms, owner)
    steps = reserve_protocol(units, pools, quantity, hold, _options_of(options, old))
    return _core.run(client, steps)


def reserve_protocol(
    units: UnitTable,
    pools: Sequence[str],
    quantity: int,
    holds: _Hold,
    options: ReserveOptions,
    *,
    read_ahead: bool = False,
) -> _core.Steps[Claimed]:
    """:func:`reserve`'s protocol (:mod:`turnstile_ddb._core`). ``read_ahead`` (the asyncio
    front door's): when the first pool shows (or is likely to show) fewer than wanted, the
    others are asked for together, one Query each (:mod:`turnstile_ddb._claims_reader`)."""
    if not 1 <= quantity <= 100:
        raise ValueError("a reservation holds 1 to 100 units (one transaction)")
    chosen = yield from _Reservation.begin(
        units, pools=pools, quantity=quantity, holds=holds, options=options, read_ahead=read_ahead
    )
    return (yield from chosen.settle())


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
    taken whole, replacing lost units (:meth:`_replace_lost`, after the wait :func:`_back_off`
    chooses) or failing over from a throttled pool in between."""

    units: UnitTable
    quantity: int
    holds: _Hold
    options: ReserveOptions
    reader: _Reader
    cost: _Cost
    chosen: list[Key]
    from_cache: set[tuple[Any, ...]]
    guessed: set[tuple[Any, ...]]
    throttled: bool = False
    last: BaseException | None = None  # the last round's failure

    @classmethod
    def begin(
        cls,
        units: UnitTable,
        *,
        pools: Sequence[str],
        quantity: int,
        holds: _Hold,
        options: ReserveOptions,
        read_ahead: bool,
    ) -> _core.Steps[_Reservation]:
        """Read (or remember, or guess) the first candidates."""
        cost = _Cost()
        hints = options.hints if options.hints is not None else PoolHints()

        def failed_over(pool: str) -> None:  # a read's pool throttled: it is read last
            metrics.count("Throttle", pattern=PATTERN)
            _fail_over(hints, pool, cost)

        args = (units, pools, holds.now_ms, options, hints, cost, failed_over)
        reader = _Reader(*args, read_ahead=read_ahead)
        chosen = _remembered(reader, quantity, cost) or _guessed(reader, quantity, cost)
        if not chosen:
            chosen = yield from _exactly(reader, quantity)
        identities = {_identity(units, key) for key in chosen}
        return cls(
            units,
            quantity,
            holds,
            options,
            reader,
            cost,
            chosen,
            from_cache=identities if cost.cached else set(),
            guessed=identities if cost.guessed else set(),
        )

    def settle(self) -> _core.Steps[Claimed]:
        """Claim rounds until one takes every chosen unit; at most ``options.rounds``."""
        for _ in range(self.options.rounds):
            if (yield from self._lapsed()):
                metrics.count("ClaimHoldLapsed", pattern=PATTERN)
                raise ClaimHoldLapsed(self.holds.until_ms, self.cost.transactions)
            name = self.holds.name(self.chosen[0])
            if (yield from self._claim_round(name)):
                claimed = self.cost.claimed(self.chosen, name)
                if (yield from self._lapsed()):
                    yield from self._give_back(claimed)
                return claimed
        metrics.count("ClaimRoundsExhausted", pattern=PATTERN)
        if self.throttled:
            raise errors.StayedThrottled(self.options.rounds, "the pools' keys", self.last)
        raise errors.LostEveryRace(self.options.rounds, "units kept being taken first", self.last)

    def _lapsed(self) -> _core.Steps[bool]:
        """Whether the hold has ended on the caller's clock (never, without one)."""
        clock = self.options.clock_ms
        return clock is not None and (yield _core.Now(clock)) >= self.holds.until_ms

    def _give_back(self, claimed: Claimed) -> _core.Steps[NoReturn]:
        """The round that took every unit was answered after the hold's end: give the units
        back and answer :class:`ClaimHoldLapsed` instead of a hold that has already ended.

        Only this round needs it: a lost or throttled round wrote nothing (a transaction is all
        or nothing, a failed condition writes nothing), and no round starts once the hold has
        ended. The release is conditional on this holder (``#holder = :holder``): a unit a rival
        claimed after the hold ended is left with the rival (``ReleaseLost``). The clock only
        makes the answer honest; the conditions decide who holds what."""
        metrics.count("ClaimHoldLapsed", pattern=PATTERN)
        keys, rounds = claimed.keys, self.cost.transactions
        until = self.holds.until_ms
        try:
            yield from release_protocol(
                self.units,
                keys,
                holder=claimed.holder,
                backoff=self.options.backoff,
                rand=self.options.rand,
            )
        except (errors.TurnstileError, ClientError, BotoCoreError) as exc:
            raise ClaimHoldLapsed(until, rounds, keys, given_back=False) from exc
        raise ClaimHoldLapsed(until, rounds, keys)

    def _claim_round(self, name: str) -> _core.Steps[bool]:
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
        self.cost.transactions += 1
        backoff = self.options.backoff
        sent = yield _core.Now(backoff.clock)
        try:
            if self.quantity == 1:
                yield from _claim_one(items[0]["Update"], name, self.units.holder_attr, backoff)
            else:
                yield from transact.transact_write_protocol(
                    items, backoff=backoff, retry_conflicts=False, pattern=PATTERN
                )
        except _Throttled as exc:
            self.throttled, self.last = True, exc
            pool = self.reader.pool_of.get(_identity(self.units, self.chosen[0]))
            _fail_over(self.reader.hints, pool, self.cost)
            # the throttled pool now comes last
            self.chosen = yield from _exactly(self.reader, self.quantity)
            return False
        except transact.Cancelled as exc:
            self.last = exc
            took = (yield _core.Now(backoff.clock)) - sent
            yield from self._replace_lost(exc, took)
            return False
        return True

    def _replace_lost(self, exc: transact.Cancelled, took: float) -> _core.Steps[None]:
        """The units someone else took first (``exc``'s reasons) replaced by a fresh read's, or
        the refusal that read amounts to; ``took``: how long the lost write took."""
        taken = [i for i, reason in enumerate(exc.reasons) if reason.code in _TAKEN]
        if not taken or len(taken) != sum(r.failed for r in exc.reasons):
            raise exc  # a failure that is not "someone else has the unit"
        self.cost.lost += len(taken)
        metrics.count("ClaimLost", pattern=PATTERN, value=len(taken))
        stale = sum(_identity(self.units, self.chosen[i]) in self.from_cache for i in taken)
        if stale:
            metrics.count("ClaimCacheStale", pattern=PATTERN, value=stale)
        metrics.count("ClaimRetry", pattern=PATTERN)
        missed = self._missed_guesses(taken)
        if missed + stale < len(taken):
            # units a read showed were lost: their takers' writes may still be landing
            yield from _back_off(self.options.backoff, self.options.rand, took)
        # The read before is stale by now (the units around the lost ones were most likely
        # taken too): replacements come from a fresh read at another pivot.
        spares = yield from self.reader.pick(len(taken), skip=self.chosen)
        if len(spares.keys) < len(taken):
            yield from self._short_replacement(exc, len(taken), spares)
            return
        for index, spare in zip(taken, spares.keys, strict=True):
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

    def _short_replacement(
        self, exc: transact.Cancelled, lost: int, found: _Picked
    ) -> _core.Steps[None]:
        """A replacement read found fewer than the ``lost`` units: when it went through every
        pool to its end and, counting the units kept, showed fewer than ``quantity``, it is the
        exact refusal itself (a second full read would only say it again); when it stopped at
        its bound, :class:`Unsettled`; else enough were shown but not beside the ones kept, and
        a fresh read chooses anew."""
        if found.showed is not None and found.showed < self.quantity:
            metrics.count("ClaimRefused", pattern=PATTERN)
            raise NotEnough(self.quantity, found.showed) from exc
        if found.cut:
            metrics.count("ClaimReadsBounded", pattern=PATTERN)
            got = self.quantity - lost + len(found.keys)
            raise Unsettled(self.quantity, got, self.options.pages_per_pool) from exc
        self.chosen = yield from _exactly(self.reader, self.quantity)


_TAKEN = frozenset({"ConditionalCheckFailed", "TransactionConflict"})
_BACKOFF_CAP_SECONDS = 1.0


def _back_off(
    backoff: retry.Backoff, rand: Callable[[], float], lost_write: float
) -> _core.Steps[None]:
    """After a lost round, wait the time the lost write took plus a random part (jitter) of it
    again, at most :data:`_BACKOFF_CAP_SECONDS` in all, before reading again (``ClaimBackoff``;
    why: the module docstring). Not a random part alone (full jitter): a loser then often read
    before the writes that beat it had landed; in eight paired in-process runs the longer wait
    sent fewer calls in every pair (1.29 against 1.40 calls per request at q=3) and fewer
    cancelled transactions."""
    metrics.count("ClaimBackoff", pattern=PATTERN)
    wait = min(_BACKOFF_CAP_SECONDS, (1.0 + rand()) * max(0.0, lost_write))
    yield _core.Sleep(wait, backoff.sleep)


def _claim_one(
    update: dict[str, Any], holder: str, holder_attr: str, backoff: retry.Backoff
) -> _core.Steps[None]:
    """A reservation of one unit needs no transaction: one conditional ``UpdateItem`` is all or
    nothing by itself (1 WCU instead of 2). Resent after a lost reply: if the first send was
    applied, the resend fails its condition on a unit that names ``holder``, which is a success.
    Someone else's unit raises :class:`transact.Cancelled` shaped like the transaction's; a
    throttle raises :class:`_Throttled` at once (the caller fails over to another pool), unless
    an earlier send's outcome is unknown: that send may have taken the unit, so a consistent read
    decides first (failing over then would leave the unit held by a reservation nobody knows)."""
    sends: list[None] = []
    steps = retry.retrying(
        _core.Call("update_item", {**update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}),
        backoff=backoff,
        idempotent=True,  # see above: a resend cannot take the unit twice
        # a 500 may or may not have been applied: resending is safe for the same reason
        retry_on=lambda exc: retry.error_code(exc) == "InternalServerError",
        pattern=PATTERN,
    )
    try:
        throttled = lambda: metrics.count("Throttle", pattern=PATTERN)  # noqa: E731
        yield from _raise_throttled(steps, throttled, lambda: sends.append(None))
    except _Throttled:
        if len(sends) > 1 and (yield from _holds(update, holder, holder_attr, backoff=backoff)):
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
    update: Mapping[str, Any], holder: str, holder_attr: str, *, backoff: retry.Backoff
) -> _core.Steps[bool]:
    """Whether the unit ``update`` claims names ``holder`` now (a strongly consistent read,
    retried through throttles: its answer decides whether a claim whose reply was lost took it)."""
    item = (yield from _read_now(update["TableName"], update["Key"], backoff=backoff)) or {}
    return bool(item.get(holder_attr) == holder)


def holders_units_protocol(
    units: UnitTable, lead: Mapping[str, Any], *, backoff: retry.Backoff
) -> _core.Steps[dict[str, Any] | None]:
    """The lead unit as it is now (strongly consistent), or None if there is no such unit."""
    item: dict[str, Any] | None = yield from _read_now(
        units.table, codec.encode_item(lead), backoff=backoff
    )
    return item


holders_units = _contract.read(_core.driven(holders_units_protocol))


def release_protocol(
    units: UnitTable,
    keys: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    backoff: retry.Backoff,
    rand: Callable[[], float] = random.random,
    rounds: int = 3,
) -> _core.Steps[list[dict[str, Any]]]:
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
            yield from transact.transact_write_protocol(items, backoff=backoff, pattern=PATTERN)
            return kept
        except transact.Cancelled as exc:
            last = exc
            failed = {i for i, reason in enumerate(exc.reasons) if reason.failed}
            kept += [exc.reasons[i].item or {} for i in sorted(failed)]
            metrics.count("ReleaseLost", pattern=PATTERN, value=len(failed))
            pending = [key for i, key in enumerate(pending) if i not in failed]
    raise errors.LostEveryRace(rounds, "units kept changing during the release", last)


release = _contract.write(_core.driven(release_protocol))


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
