"""Reading the pools for a reservation (:class:`_Reader`): the bounded, pivoted Queries of the
claimable-at index that find a run of claimable units, as :mod:`turnstile_ddb.claims`'s
docstring describes them.

Written as protocol steps (:mod:`turnstile_ddb._core`): every Query is yielded, never sent
here, so both front doors read the same way. A reader made with ``read_ahead`` (the asyncio
front door's) asks for every pool after the first one in ONE :class:`~turnstile_ddb._core.Gather`
when the first pool did not show enough: the async driver sends them at once (one round trip
instead of one per pool), the sync one would send them in order. Each pool read ahead costs one
Query, over its whole claimable-at range, which is split at the pivot into the pages of its two
ranges when it ends there (:meth:`_Reader._read_ahead`). The Gather also carries the first
pool's second range when its first one showed it likely short (:meth:`_PoolRead._short`), and
every pool, the first included, when the hints know the first pool showed fewer than wanted at
its last complete read: a reservation over small pools then reads in two round trips, or one.
What is claimed is the same either way: a run of the first pool that shows enough. Without
``read_ahead`` (the synchronous front door's) the pools are read one after another and a pool
after the one that showed enough is never read, as before the port.

Private, and silent: it counts no metric (its caller, :mod:`turnstile_ddb.claims`, declares and
counts every one, from what a read returns: :class:`_Picked`, and the pools it failed over from).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from turnstile_ddb import _core, codec, errors, retry
from turnstile_ddb._claims_hints import PoolHints, ReserveOptions
from turnstile_ddb._claims_results import _Cost
from turnstile_ddb._claims_units import (
    _CLAIMABLE_AT_SPACE,
    _SPARSE,
    _SPREAD,
    PATTERN,
    Key,
    UnitTable,
    _identity,
    _names,
    new_claimable_at,
)


class _Throttled(errors.Retryable):
    """A pool's key answered with a throttle: fail over to another pool instead of waiting."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _as_failover(exc: BaseException, throttled: Callable[[], None]) -> BaseException:
    """``exc`` as a request's answer where a throttle fails over: a throttle becomes
    :class:`_Throttled` (after telling ``throttled``), anything else stays what it was."""
    if isinstance(exc, ClientError) and retry.is_throttle(exc):
        throttled()
        failover = _Throttled(exc)
        failover.__cause__ = exc
        return failover
    return exc


def _failover_on_throttle(
    steps: _core.Steps[Any],
    throttled: Callable[[], None] = lambda: None,
    sent: Callable[[], None] = lambda: None,
) -> _core.Steps[Any]:
    """``steps`` (a :func:`turnstile_ddb.retry.retrying`) with every throttle answer turned into
    :class:`_Throttled` before it sees it (``retrying`` would wait and resend to the same hot
    key), after telling ``throttled``; ``sent`` is told of every request it asks for."""
    answer: Any = None
    failure: BaseException | None = None
    while True:
        try:
            effect = steps.send(answer) if failure is None else steps.throw(failure)
        except StopIteration as stop:
            return stop.value
        answer, failure = None, None
        if isinstance(effect, _core.Call):
            sent()
        try:
            answer = yield effect
        except BaseException as exc:  # noqa: BLE001 - handed on to ``steps``, which decides
            failure = _as_failover(exc, throttled)


@dataclass(frozen=True)
class _Picked:
    """What one :meth:`_Reader.pick` found: ``keys`` (``n`` of them, or fewer when the pools did
    not show ``n``); ``cut``: a pool was left unread past its bound (``pages_per_pool``), so a
    short answer is no refusal; ``showed``: after a short answer whose reads went through every
    pool to its end, how many distinct claimable (and eligible) units they showed, counting the
    ones it was told to skip (what a read skipping nothing showed), else None."""

    keys: list[Key]
    cut: bool = False
    showed: int | None = None


@dataclass
class _Read:
    """One pick's reads as they go: the units not to take again (``avoid``), every claimable
    unit shown (``shown``, skipped ones included), and whether a pool was cut at its bound."""

    avoid: set[tuple[Any, ...]]
    shown: set[tuple[Any, ...]] = field(default_factory=set)
    cut: bool = False


_Plan = tuple[int, int | None, list[tuple[int, int, bool]]]  # page Limit, pivot, ranges


@dataclass
class _Ahead:
    """A pool read ahead: its ``plan``, the answers of its ranges' first pages (``answers``, by
    range: a response or the error) and the Queries ``spent`` on it that answer none of them."""

    plan: _Plan
    answers: dict[int, Any]
    spent: int = 0


@dataclass
class _PoolRead:
    """One read of one pool, a page at a time: :meth:`_Reader._run` asks for the next page only
    while it wants more units (:meth:`_Reader._run`'s docstring says how a pool is read)."""

    reader: _Reader
    pool: str
    plan: _Plan
    read: _Read
    last: bool
    # The answers of the ranges' first pages that were read ahead, by range (a response or
    # the error): none unless the pool was read ahead.
    ahead: dict[int, Any] = field(default_factory=dict)
    spent: int = 0  # Queries sent ahead for it whose answers are not in ``ahead``
    # The first pool's read, with ``read_ahead``: the pools after it, asked for together with
    # this pool's second range (:meth:`_short`; the answer is this pool's page).
    fold: Callable[[_core.Call], _core.Steps[Any]] | None = None
    short_of: int = 0
    span: int = 0
    start: Key | None = None
    pages: int = 0
    shown: int = 0
    done: bool = False

    def _short(self) -> bool:
        """Whether the pool is likely to hold fewer than ``short_of`` units, judged when its
        first range ``[pivot, now]`` was read to its end: that range covers the share
        ``(2**20 - pivot) / 2**20`` of the free units' claimable-at values, and showed fewer
        than ``short_of`` times that share. Only the shape of the reads hangs on it: a pool
        that holds enough after all still gives its run, the others were read in vain."""
        pivot = self.plan[1]
        if not self.span or self.start is not None or pivot is None:
            return False
        return self.shown * _CLAIMABLE_AT_SPACE < self.short_of * (_CLAIMABLE_AT_SPACE - pivot)

    def next_page(self) -> _core.Steps[list[Key] | None]:
        """The next page's units (perhaps none), or None: the pool was read to its end, or up to
        its bound (``read.cut``)."""
        reader, pool = self.reader, self.pool
        limit, pivot, ranges = self.plan
        if self.done:
            return None
        if self.pages and not self.start:  # the current range was read to its end
            self.span, self.start = self.span + 1, None
            if self.span == len(ranges):
                self.done = True
                if pivot is not None:
                    reader.hints.seen(pool, self.shown == 0, self.shown)
                return None
        ahead = self.ahead.pop(self.span, None) if self.start is None else None
        # a page read ahead was sent already; the ones still unread count as sent
        sent = self.pages + self.spent + len(self.ahead)
        if ahead is None and sent >= reader.options.pages_per_pool:
            self.read.cut = self.done = True  # more to read, beyond the bound
            return None
        self.pages += 1
        if ahead is None and self.fold is not None and self._short():
            fold, self.fold = self.fold, None
            request = reader._request(pool, ranges[self.span], limit, None)
            ahead = yield from fold(_core.Call("query", request))
        response = yield from reader._query(
            pool, ranges[self.span], limit, self.start, self.last, ahead
        )
        page = [reader.units.key_of(codec.decode_item(raw) or {}) for raw in response["Items"]]
        self.shown += len(page)
        self.start = response.get("LastEvaluatedKey")
        if pivot is None:
            page = reader._whole_range_page(pool, page, self.shown, done=self.start is None)
        elif page:
            reader.hints.seen(pool, False, self.shown if self.shown >= _SPARSE else None)
        return reader._from(pool, page)


@dataclass
class _Reader:
    """Reads the pools for :func:`reserve`: ``pick(n)`` finds ``n`` claimable units, as one run
    from one pool where a pool shows ``n``, else from several pools."""

    units: UnitTable
    pools: Sequence[str]
    now_ms: int
    options: ReserveOptions
    hints: PoolHints
    cost: _Cost
    # Told each pool whose key throttled a read (the pool is then read last): the caller counts
    # it and marks the pool (this module counts nothing: its caller declares every metric).
    failed_over: Callable[[str], None]
    pool_of: dict[tuple[Any, ...], str] = field(default_factory=dict)
    # The asyncio front door's: after a first pool short of ``n``, the first pages of the other
    # pools are asked for at once, in one Gather (see the module's docstring).
    read_ahead: bool = False

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
        return None if found is None else self._from(*found)

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
        return self._from(pool, keys) if len(keys) == n else None

    def _request(
        self, pool: str, span: tuple[int, int, bool], limit: int, start: Key | None
    ) -> dict[str, Any]:
        """The Query of one page of ``pool``'s claimable-at range ``span`` (low, high, forward)."""
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
        return request

    def _query(
        self,
        pool: str,
        span: tuple[int, int, bool],
        limit: int,
        start: Key | None,
        last: bool,
        ahead: Any = None,
    ) -> _core.Steps[dict[str, Any]]:
        """One page of ``pool``'s claimable-at range ``span``; a throttle raises
        :class:`_Throttled` unless this is the pool's ``last`` chance. ``ahead``: this page's
        answer when it was read ahead (a failure other than a throttle is read again here)."""
        if isinstance(ahead, BaseException):
            failure = _as_failover(ahead, lambda: None)
            if isinstance(failure, _Throttled):
                raise failure
        elif ahead is not None:
            return dict(ahead)  # counted in ``cost.queries`` when it was read
        steps = retry.retrying(
            _core.Call("query", self._request(pool, span, limit, start)),
            backoff=self.options.backoff,
            idempotent=True,
            pattern=PATTERN,
        )
        response: dict[str, Any] = yield from (steps if last else _failover_on_throttle(steps))
        self.cost.queries += 1
        return response

    def _plan(self, pool: str, n: int, skipped: int) -> _Plan:
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
        read: _Read,
        last: bool,
        ahead: _Ahead | None = None,
        fold: Callable[[_core.Call], _core.Steps[Any]] | None = None,
    ) -> _core.Steps[list[Key]]:
        """Up to ``n`` units of ``pool`` not in ``read.avoid`` (which then holds them too), read
        from the first ``n + _SPREAD`` such units at a random start; every eligible unit read is
        added to ``read.shown``, and the ones read but not taken go to the unit cache.

        The pool is read as :mod:`turnstile_ddb.claims`'s docstring says (a pool not known to be
        large in one range from a random end, its first page started at a random place; any
        other from a random pivot, in pages of a few more than it wants and the units to skip),
        by :class:`_PoolRead`: at most ``pages_per_pool`` Queries, ``read.cut`` when it stopped
        there. ``ahead``: what was read of the pool ahead (:meth:`_read_ahead`); ``fold``: the
        first pool's read ahead of the others."""
        eligible = self.options.eligible
        want = n + _SPREAD
        if ahead is None:
            ahead = _Ahead(self._plan(pool, want, len(read.avoid)), {})
        reading = _PoolRead(self, pool, ahead.plan, read, last, ahead.answers, ahead.spent)
        reading.fold, reading.short_of = fold, n
        got: list[Key] = []
        mine: set[tuple[Any, ...]] = set()  # a unit can show twice (a release moved it)
        avoid, shown = read.avoid, read.shown
        while len(got) < want:
            page = yield from reading.next_page()
            if page is None:
                break
            for key in page:
                identity = _identity(self.units, key)
                if eligible is not None and not eligible(key):
                    continue
                shown.add(identity)
                if identity in avoid or identity in mine:
                    continue
                mine.add(identity)
                got.append(key)
                if len(got) == want:
                    break
        avoid.update(mine)
        if len(got) <= n:
            return got
        start = int(self.options.rand() * (len(got) - n + 1))
        if self.options.unit_cache is not None:
            self.options.unit_cache.learn(self.units, pool, got[:start] + got[start + n :])
        return got[start : start + n]

    def _read_ahead(
        self, pools: Sequence[str], n: int, read: _Read, first: _core.Call | None = None
    ) -> _core.Steps[tuple[Any, dict[str, _Ahead]]]:
        """What each of ``pools`` shows ahead (:class:`_Ahead`), asked for in ONE
        :class:`~turnstile_ddb._core.Gather` together with ``first`` (the first pool's next
        page, when given), and ``first``'s answer. A pivoted pool is asked for in one Query over
        its whole range ``[0, now]`` at its pivoted read's Limit, split at the pivot as the
        module docstring says (:meth:`_split`); an answer with more to read leaves that pool to
        be read from its pivot as usual, the Query spent counting against ``pages_per_pool``."""
        plans = {pool: self._plan(pool, n + _SPREAD, len(read.avoid)) for pool in pools}
        calls = [
            _core.Call("query", self._request(pool, self._whole(plan), plan[0], None))
            for pool, plan in plans.items()
        ]
        answers: list[Any] = yield _core.Gather(tuple([first] if first else []) + tuple(calls))
        self.cost.queries += sum(not isinstance(answer, BaseException) for answer in answers)
        mine = answers.pop(0) if first else None
        found = {
            pool: self._split(plan, answer)
            for (pool, plan), answer in zip(plans.items(), answers, strict=True)
        }
        return mine, found

    def _whole(self, plan: _Plan) -> tuple[int, int, bool]:
        """The range a pool's read ahead asks for: a pivoted pool's whole ``[0, now]``."""
        return plan[2][0] if plan[1] is None else (0, self.now_ms, True)

    def _split(self, plan: _Plan, answer: Any) -> _Ahead:
        """A pool's read-ahead answer as its ranges' first pages (see :meth:`_read_ahead`)."""
        pivot, ranges = plan[1], plan[2]
        if pivot is None or isinstance(answer, BaseException):
            return _Ahead(plan, {0: answer})
        if answer.get("LastEvaluatedKey"):
            return _Ahead(plan, {}, spent=1)
        attr = self.units.claimable_at_attr
        at = [(codec.decode_item(raw) or {})[attr] for raw in answer["Items"]]
        pages = {
            index: {
                "Items": [raw for raw, c in zip(answer["Items"], at, strict=True) if lo <= c <= hi]
            }
            for index, (lo, hi, _) in enumerate(ranges)
        }
        return _Ahead(plan, pages)

    def pick(self, n: int, skip: Sequence[Key] = ()) -> _core.Steps[_Picked]:
        """``n`` claimable units not in ``skip``: a run from the first pool (in
        :meth:`PoolHints.order`) that shows ``n``; when none does, after every pool was read to
        its end, whatever they showed together (fewer than ``n`` when there are not enough;
        :class:`_Picked` says what ``cut`` and ``showed`` tell).

        The run starts at a random one of the first ``_SPREAD + 1`` units read: the unit right
        after a random pivot is chosen in proportion to the gap before it, which would make
        concurrent requests meet more often than a uniform choice; a few gaps together even
        that out. A pool whose key throttles is read last, under the usual backoff
        (``PoolFailover``); ``read_ahead``: see the module docstring."""
        read = _Read(avoid={_identity(self.units, key) for key in skip})
        gathered: list[Key] = []
        deferred: list[str] = []
        order = self.hints.order(self.pools, self.options.rand)
        ahead: dict[str, _Ahead] = {}

        def with_the_others(call: _core.Call | None) -> _core.Steps[Any]:
            answer, found = yield from self._read_ahead(order[1:], n, read, call)
            ahead.update(found)
            return answer

        fold = with_the_others if self.read_ahead and len(order) > 1 else None
        if fold is not None and self.hints._short_of(order[0], n):
            # the first pool is known short: it is read with the others, in one round trip
            ahead.update((yield from self._read_ahead(order, n, read))[1])
        for index, pool in enumerate(order):
            if fold is not None and index == 1 and not ahead:
                yield from with_the_others(None)
            try:
                got = yield from self._run(
                    pool, n, read, False, ahead.get(pool), fold if index == 0 else None
                )
            except _Throttled:
                self.failed_over(pool)
                deferred.append(pool)
                continue
            if len(got) == n:
                return _Picked(got, read.cut)
            gathered += got
        for pool in deferred:
            got = yield from self._run(pool, n, read, last=True)
            if len(got) == n:
                return _Picked(got, read.cut)
            gathered += got
        # every pool was read to its end unless one was cut: then nothing is known of the rest
        showed = len(read.shown) if len(gathered) < n and not read.cut else None
        return _Picked(gathered[:n], read.cut, showed)


def _read_now(table: str, key: Mapping[str, Any], *, backoff: retry.Backoff) -> _core.Steps[Any]:
    """The item at ``key`` (encoded) as it is now: strongly consistent, retried through
    throttles and lost replies (a read is safe to resend). None if there is no such item."""
    response = yield from retry.retrying(
        _core.Call("get_item", {"TableName": table, "Key": dict(key), "ConsistentRead": True}),
        backoff=backoff,
        idempotent=True,
        pattern=PATTERN,
    )
    return codec.decode_item(response.get("Item"))
