"""Reading the pools for a reservation (:class:`_Reader`): the bounded, pivoted Queries of the
claimable-at index that find a run of claimable units, as :mod:`turnstile_ddb.claims`'s
docstring describes them.

Private, and silent: it counts no metric (its caller, :mod:`turnstile_ddb.claims`, declares and
counts every one, from what a read returns: :class:`_Picked`, and the pools it failed over from).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import codec, errors, retry
from turnstile_ddb._claims_hints import PoolHints, ReserveOptions
from turnstile_ddb._claims_results import _Cost
from turnstile_ddb._claims_units import (
    _SPARSE,
    _SPREAD,
    PATTERN,
    Key,
    UnitTable,
    _identity,
    _names,
    new_claimable_at,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class _Throttled(errors.Retryable):
    """A pool's key answered with a throttle: fail over to another pool instead of waiting."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _failover_on_throttle(
    send: Callable[[], Any], throttled: Callable[[], None] = lambda: None
) -> Callable[[], Any]:
    """``send`` for :func:`turnstile_ddb.retry.call` that lets a throttle out as :class:`_Throttled`
    (``retry.call`` would wait and resend to the same hot key), after telling ``throttled``."""

    def once() -> Any:
        try:
            return send()
        except ClientError as exc:
            if retry.is_throttle(exc):
                throttled()
                raise _Throttled(exc) from exc
            raise

    return once


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
    cost: _Cost
    # Told each pool whose key throttled a read (the pool is then read last): the caller counts
    # it and marks the pool (this module counts nothing: its caller declares every metric).
    failed_over: Callable[[str], None]
    pool_of: dict[tuple[Any, ...], str] = field(default_factory=dict)

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
        self.cost.queries += 1
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

    def _pool(self, pool: str, n: int, read: _Read, last: bool) -> Iterator[Key]:
        """The claimable units of one pool, in claimable-at order from where the read starts.

        A pool not known to be large (:meth:`PoolHints.is_sparse`) is read in one range
        ``[0, now]`` from a random end, its first page started at a random place (a whole small
        pool in one Query: what a refusal costs). Any other pool is read from a random *pivot*:
        ``[pivot, now]``, then ``[0, pivot)``, in pages of a few more than ``n`` (and the
        units to skip it may meet again): concurrent requests start at different places and meet
        different runs of units, and no request reads more than it takes.

        Either way at most ``pages_per_pool`` Queries: a read that would need more stops there
        and says so on ``read`` (``cut``: the pool was not read to its end)."""
        limit, pivot, ranges = self._plan(pool, n, len(read.avoid))
        shown = pages = 0
        for span in ranges:
            start: Key | None = None
            while True:
                if pages == self.options.pages_per_pool:
                    read.cut = True  # more to read, beyond the bound
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

    def _run(self, pool: str, n: int, read: _Read, last: bool) -> list[Key]:
        """Up to ``n`` units of ``pool`` not in ``read.avoid`` (which then holds them too), read
        from the first ``n + _SPREAD`` such units at a random start; every eligible unit read is
        added to ``read.shown``, and the ones read but not taken go to the unit cache."""
        eligible = self.options.eligible
        got: list[Key] = []
        mine: set[tuple[Any, ...]] = set()  # a unit can show twice (a release moved it)
        avoid, shown = read.avoid, read.shown
        for key in self._pool(pool, n + _SPREAD, read, last):
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

    def pick(self, n: int, skip: Sequence[Key] = ()) -> _Picked:
        """``n`` claimable units not in ``skip``: a run from the first pool (in
        :meth:`PoolHints.order`) that shows ``n``; when none does, after every pool was read to
        its end, whatever they showed together (fewer than ``n`` when there are not enough).

        The run starts at a random one of the first ``_SPREAD + 1`` units read: the unit right
        after a random pivot is chosen in proportion to the gap before it, which would make
        concurrent requests meet more often than a uniform choice; a few gaps together even
        that out.

        A pool whose key throttles is left for after the others (``PoolFailover``) and then read
        under the usual backoff. Each read of a pool sends at most ``pages_per_pool`` Queries;
        when one stopped there (``cut``), a short answer is not what a read of every pool to its
        end showed (``showed`` is None)."""
        read = _Read(avoid={_identity(self.units, key) for key in skip})
        gathered: list[Key] = []
        deferred: list[str] = []
        for pool in self.hints.order(self.pools, self.options.rand):
            try:
                got = self._run(pool, n, read, last=False)
            except _Throttled:
                self.failed_over(pool)
                deferred.append(pool)
                continue
            if len(got) == n:
                return _Picked(got, read.cut)
            gathered += got
        for pool in deferred:
            got = self._run(pool, n, read, last=True)
            if len(got) == n:
                return _Picked(got, read.cut)
            gathered += got
        # every pool was read to its end unless one was cut: then nothing is known of the rest
        showed = len(read.shown) if len(gathered) < n and not read.cut else None
        return _Picked(gathered[:n], read.cut, showed)


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
