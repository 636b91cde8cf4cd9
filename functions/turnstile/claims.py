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

Finding candidates never scans: :func:`reserve` queries the index with
``#pool = :pool AND #ticket BETWEEN :lo AND :hi``, first from a random pivot up to now, then the
tickets below the pivot, one pool after another from a random pool. The index is only a hint (it
is eventually consistent on AWS): the conditional write on the unit itself decides.

Before the first write, :func:`reserve` reads until it has seen ``quantity`` candidates; when the
index cannot show that many, the answer is :class:`NotEnough` without a single write (the usual
answer once a sku has sold out). Each page of candidates is tried in random order.

Claim, one ``UpdateItem`` per candidate::

    SET #status = :held, #holder = :holder, #until = :until, #ticket = :until,
        #seq = if_not_exists(#seq, :zero) + :one
    ConditionExpression: #status = :free OR (#status = :held AND #until <= :now)

A failed condition (or a ``TransactionConflict`` from a transaction holding the unit) means
another request got there first: the unit is skipped and the next candidate tried, without waiting
and without retrying it. If fewer than ``quantity`` units can be claimed, every unit this call took
is given back (:func:`release`) and :class:`NotEnough` is raised: all or nothing.

Release (give back, or cancel a reservation)::

    SET #status = :free, #ticket = :ticket, #seq = if_not_exists(#seq, :zero) + :one
    REMOVE #holder, #until
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

Metrics (pattern ``claims``): ``ClaimLost`` for every candidate another request took first,
``ConfirmLost`` for a sale refused because a unit was no longer validly held.

``seq`` increases by one with every change of a unit, which lets a stream consumer recognise a
record it has already applied (see ``service.domain.inventory``).
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from turnstile import codec, metrics, retry, transact

PATTERN = "claims"

FREE = "free"
HELD = "held"
SOLD = "sold"

TICKET_SPACE = 2**20  # random tickets of free units live in [0, TICKET_SPACE)

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


class NotEnough(Exception):
    """Fewer than ``wanted`` units could be claimed; the ones taken have been given back."""

    def __init__(self, wanted: int, got: int) -> None:
        super().__init__(f"only {got} of {wanted} units could be claimed")
        self.wanted = wanted
        self.got = got


@dataclass
class Claimed:
    """What :func:`reserve` took, and what it cost (for tests and benchmarks)."""

    keys: list[Key] = field(default_factory=list)
    lost: int = 0  # candidates someone else claimed first (skipped)
    queries: int = 0


class Lost(Exception):
    """A sale failed: at least one unit is no longer held (validly) by this holder."""

    def __init__(self, keys: Sequence[Key], current: Sequence[dict[str, Any] | None]) -> None:
        super().__init__(f"{len(keys)} unit(s) no longer held")
        self.keys = list(keys)
        self.current = list(current)


def _skippable(exc: BaseException) -> bool:
    """Someone else has the unit: its condition failed, or a transaction is changing it."""
    return retry.condition_failed(exc) or retry.error_code(exc) == "TransactionConflictException"


def claim(
    client: Any,
    units: UnitTable,
    key: Mapping[str, Any],
    *,
    holder: str,
    now_ms: int,
    until_ms: int,
    backoff: retry.Backoff,
) -> bool:
    """Claim one unit (free, or held with a lapsed hold); False when someone else has it."""
    try:
        retry.call(
            lambda: client.update_item(
                TableName=units.table,
                Key=codec.encode_item(key),
                UpdateExpression=(
                    "SET #status = :held, #holder = :holder, #until = :until, #ticket = :until, "
                    "#seq = if_not_exists(#seq, :zero) + :one"
                ),
                ConditionExpression="#status = :free OR (#status = :held AND #until <= :now)",
                ExpressionAttributeNames={k: v for k, v in units.names().items() if k != "#pool"},
                ExpressionAttributeValues=codec.values(
                    held=HELD, free=FREE, holder=holder, until=until_ms, now=now_ms, zero=0, one=1
                ),
            ),
            backoff=backoff,
            idempotent=False,
            pattern=PATTERN,
        )
    except ClientError as exc:
        if _skippable(exc):
            metrics.count("ClaimLost", pattern=PATTERN)
            return False
        raise
    return True


def release(
    client: Any,
    units: UnitTable,
    key: Mapping[str, Any],
    *,
    holder: str,
    ticket: int,
    backoff: retry.Backoff,
) -> dict[str, Any] | None:
    """Give a unit back if ``holder`` still holds it. Returns None when released, else the unit as
    it is now (sold, or reclaimed by someone else after the hold lapsed)."""
    try:
        retry.call(
            lambda: client.update_item(
                TableName=units.table,
                Key=codec.encode_item(key),
                UpdateExpression=(
                    "SET #status = :free, #ticket = :ticket, "
                    "#seq = if_not_exists(#seq, :zero) + :one REMOVE #holder, #until"
                ),
                ConditionExpression="#status = :held AND #holder = :holder",
                ExpressionAttributeNames={k: v for k, v in units.names().items() if k != "#pool"},
                ExpressionAttributeValues=codec.values(
                    free=FREE, held=HELD, holder=holder, ticket=ticket, zero=0, one=1
                ),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ),
            backoff=backoff,
            # Safe to resend: a second identical release fails its condition and changes nothing.
            idempotent=True,
            pattern=PATTERN,
        )
    except ClientError as exc:
        if retry.condition_failed(exc):
            return codec.old_item(exc) or {}
        raise
    return None


def sell(
    client: Any,
    units: UnitTable,
    keys: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    now_ms: int,
    backoff: retry.Backoff,
    token: str | None = None,
) -> None:
    """Turn every unit ``holder`` validly holds into a sale, all or none; :class:`Lost` if any
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
        raise Lost([dict(keys[i]) for i in failed], [exc.reasons[i].item for i in failed]) from exc


def _candidates(
    client: Any,
    units: UnitTable,
    pools: Sequence[str],
    *,
    now_ms: int,
    page_size: int,
    backoff: retry.Backoff,
    rand: Callable[[], float],
    claimed: Claimed,
) -> Iterator[Key]:
    """Unit keys from the index, claimable at ``now_ms``: every pool once, from a random pool,
    each pool from a random ticket upwards and then wrapping round below it."""
    first = int(rand() * len(pools))
    pivot = new_ticket(rand)
    for offset in range(len(pools)):
        pool = pools[(first + offset) % len(pools)]
        for low, high in ((pivot, now_ms), (0, pivot - 1)):
            if high < low:
                continue
            start: Key | None = None
            while True:
                request: dict[str, Any] = {
                    "TableName": units.table,
                    "IndexName": units.index,
                    "KeyConditionExpression": "#pool = :pool AND #ticket BETWEEN :low AND :high",
                    "ExpressionAttributeNames": {
                        "#pool": units.pool_attr,
                        "#ticket": units.ticket_attr,
                    },
                    "ExpressionAttributeValues": codec.values(pool=pool, low=low, high=high),
                    "Limit": page_size,
                }
                if start is not None:
                    request["ExclusiveStartKey"] = start
                response = retry.call(
                    lambda request=request: client.query(**request),  # type: ignore[misc]
                    backoff=backoff,
                    idempotent=True,
                    pattern=PATTERN,
                )
                claimed.queries += 1
                page = [units.key_of(codec.decode_item(raw) or {}) for raw in response["Items"]]
                # Walking a page in order would line every loser up behind the next unit another
                # request is also about to take (a convoy); a random order spreads them out.
                for index in range(len(page) - 1, 0, -1):
                    other = int(rand() * (index + 1))
                    page[index], page[other] = page[other], page[index]
                yield from page
                start = response.get("LastEvaluatedKey")
                if not start:
                    break


def reserve(
    client: Any,
    units: UnitTable,
    *,
    pools: Sequence[str],
    quantity: int,
    holder: str,
    now_ms: int,
    until_ms: int,
    backoff: retry.Backoff,
    rand: Callable[[], float] = random.random,
    page_size: int | None = None,
) -> Claimed:
    """Claim ``quantity`` units for ``holder`` until ``until_ms``, skipping units others hold.

    All or nothing: raises :class:`NotEnough` (after giving back what it took) when the index runs
    out of candidates first. A write whose outcome is unknown (:class:`retry.OutcomeUnknown`) also
    gives back what was taken, including, conditionally, the unit in doubt, and re-raises.
    """
    claimed = Claimed()
    seen: set[tuple[Any, ...]] = set()
    doubtful: list[Key] = []
    candidates = _distinct(
        _candidates(
            client,
            units,
            pools,
            now_ms=now_ms,
            page_size=page_size or max(2 * quantity, 10),
            backoff=backoff,
            rand=rand,
            claimed=claimed,
        ),
        units,
        seen,
    )
    # Look before taking anything: when the index cannot even show ``quantity`` candidates, say
    # so without a single write (the common answer once a sku sells out).
    first = list(itertools.islice(candidates, quantity))
    if len(first) < quantity:
        raise NotEnough(quantity, 0)
    try:
        for key in itertools.chain(first, candidates):
            try:
                won = claim(
                    client,
                    units,
                    key,
                    holder=holder,
                    now_ms=now_ms,
                    until_ms=until_ms,
                    backoff=backoff,
                )
            except retry.OutcomeUnknown:
                doubtful.append(key)
                raise
            if not won:
                claimed.lost += 1
                continue
            claimed.keys.append(key)
            if len(claimed.keys) == quantity:
                return claimed
    except BaseException:
        # Best effort: whatever cannot be given back now comes free when its hold lapses.
        with contextlib.suppress(Exception):
            give_back(
                client, units, [*claimed.keys, *doubtful], holder=holder, backoff=backoff, rand=rand
            )
        raise
    give_back(client, units, claimed.keys, holder=holder, backoff=backoff, rand=rand)
    raise NotEnough(quantity, len(claimed.keys))


def _distinct(keys: Iterator[Key], units: UnitTable, seen: set[tuple[Any, ...]]) -> Iterator[Key]:
    """Each unit once (one can reappear in a later page after a give-back elsewhere)."""
    for key in keys:
        identity = tuple(key[name] for name in units.key_attrs)
        if identity not in seen:
            seen.add(identity)
            yield key


def give_back(
    client: Any,
    units: UnitTable,
    keys: Sequence[Key],
    *,
    holder: str,
    backoff: retry.Backoff,
    rand: Callable[[], float] = random.random,
) -> list[dict[str, Any]]:
    """Release every unit of ``keys`` that ``holder`` still holds; returns the ones it did not
    (as they are now). A failure to release is left to the hold's expiry."""
    kept = []
    for key in keys:
        current = release(
            client, units, key, holder=holder, ticket=new_ticket(rand), backoff=backoff
        )
        if current is not None:
            kept.append(current)
    return kept
