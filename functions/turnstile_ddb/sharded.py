"""A counter split over N shard items, so that one hot counter is not one hot partition key.

One item takes at most 1000 write units per second on DynamoDB (a partition's limit). A counter
that every sale decrements therefore caps every sale at that rate, refusals included. Splitting its
value over N items with distinct partition keys (``<base>#0`` .. ``<base>#N-1``) gives N times the
write rate, and each shard stays a plain conditional write on its own share, so the total can
never go below zero: no oversell by construction, whatever the interleaving.

Taking ``q`` units (:func:`take`, settings in :class:`TakeOptions`)::

    0. the caller's hints know every shard's count (:class:`ShardHints`, learned within 100 ms)
       and they add up to fewer than q: refuse without a call (``ShortHint``)
    1. the better of two random shards not last seen holding fewer than q
       (:meth:`ShardHints.choose`: not throttled lately, then the larger count last seen):
                             UpdateItem  SET #count = #count - :q
                             ConditionExpression: attribute_exists(#pk) AND #count >= :q
                             ReturnValuesOnConditionCheckFailure: ALL_OLD
       (throttled or refused: fail over, do not wait on the same hot key)
    2. read the shards whose count the hints have not learned within 100 ms:
                             BatchGetItem, ConsistentRead (those keys only: one call per
                             100 keys, the calls sent together)
       the counts known and read add up to fewer than q: refuse (Exhausted)
    3. the shards that hold q, in random order with the ones throttled lately last, each the
       write of step 1; if only a sum of shards holds q: read every shard (unless step 2 just
       did) and take it in one TransactWriteItems over several shards,
       each element  SET #count = #count - :take  ConditionExpression: #count >= :take
    4. back to 2, at most ``rounds`` times; every throttled attempt waits under the backoff.

Hints are the caller's: a :class:`Hints` object it builds once (per process, say per Lambda
execution environment) and passes to every call on the same counters: :func:`take`,
:func:`join`, :func:`leave`, :func:`set_total`, :func:`add`. Without one, a call remembers
nothing beyond itself; the module keeps no state of its own. Each hint map holds at most
``max_counters`` counters (1024 by default), least recently used first out: an
``OrderedDict`` does this in a few lines, with a lock, and the library adds no dependency
(``functools.lru_cache`` caches a function's results, it cannot be written into or forgotten).

A refusal is exact up to races and one stated bound. Between restocks a shard's count only goes
down, so a count learned from a consistent read or from a write's answer is an upper bound of the
count at any later moment: when the counts (learned within ``trust_seconds`` = 100 ms, or read
just now) add up to fewer than ``q``, the total was below ``q`` at the refusal. The bound: this is
wrong only if someone restocked the counter (``add``, ``set_total``, ``PATCH``) without telling
these hints, less than 100 ms after one of those counts was learned; a restock given the same
hints makes them forget the counter's counts. The other refusal is the race: ``rounds`` reads
that each showed enough but whose every write lost (:class:`Exhausted` with ``raced=True``,
counted as ``ShardRaceRefusal``). A refusal reads at most the shards the hints do not know (all N
only when they know none), and none while they know them all. Sold out is cheaper still: the
hints remember that a counter read empty and then go straight to step 2; and for
``trust_seconds`` (100 ms) after such a read a take refuses without any call (``SoldOutHint``),
with the same bound. Sales never depend on the hints: writes decide.

A sharded capacity (:func:`join`, :func:`leave`) is the same split applied to
:mod:`turnstile_ddb.capacity`: shard ``k`` is a :class:`~turnstile_ddb.capacity.CapacityRow`
(count, limit and version attributes of the counter), and a member joins one shard in that
module's transaction (``#count < #limit`` on the shard, ``attribute_not_exists`` on the member),
failing over like a take; the member item records the shard it took (``shard_attr``) for its
leave. The member lives in the counter's table, so the read after a refused join sees the
member's key in the same ``BatchGetItem`` as the shards: "already a member" stays exact.

Setting the total (:func:`set_total`) is one transaction over every shard, each conditioned on
the value just read (``#count = :seen``), plus the caller's own elements (a version check):
the total becomes exactly the value asked for, or nothing changes and it is read again. Adding
(:func:`add`) is one transaction of ``ADD`` on every shard, needing no read.

Contention is counted in :mod:`turnstile_ddb.metrics` under pattern ``sharded``: ``ShardFailover``
(a shard could not serve), ``Throttle`` (a shard was throttled), ``SoldOutRead`` (a refusal
decided by one read), ``SoldOutHint`` and ``ShortHint`` (refusals answered from the hints without
a call), ``ShardRaceRefusal``.

How N could adapt (not built): a counter could grow by a transaction that moves part of each
shard's share into new shard items and raises ``shards`` on the parent under its version; readers
learn N from the parent. Shrinking is the reverse, and must drain a shard before dropping it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import (
    _checks,
    _contract,
    _core,
    capacity,
    codec,
    deprecation,
    errors,
    metrics,
    retry,
    transact,
    versioned,
)
from turnstile_ddb._sharded_counter import (
    _BACKOFF,
    Exhausted,
    Full,
    Missing,
    ShardedCounter,
    Taken,
    _read_shards,
    _read_with,
    read_shards_protocol,
    read_with_protocol,
    shard_items,
    split,
)
from turnstile_ddb._sharded_hints import (
    _ROUNDS,
    Hints,
    ShardHints,
    SoldOutHints,
    TakeOptions,
    _legacy_options,
    learn,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "METRICS",
    "Exhausted",
    "Full",
    "Hints",
    "Missing",
    "ShardHints",
    "ShardedCounter",
    "SoldOutHints",
    "TakeOptions",
    "Taken",
    "add",
    "join",
    "leave",
    "read_all",
    "read_items",
    "set_total",
    "shard_items",
    "split",
    "take",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = (
    "ShardFailover",
    "ShardConflict",
    "ShardRaceRefusal",
    "SoldOutRead",
    "SoldOutHint",
    "ShortHint",
    "Throttle",
)

PATTERN = "sharded"


def read_items_protocol(
    counter: ShardedCounter, backoff: retry.Backoff = _BACKOFF
) -> _core.Steps[list[dict[str, Any]]]:
    """:func:`read_items`'s protocol (:mod:`turnstile_ddb._core`)."""
    items, _ = yield from read_with_protocol(counter, backoff)
    return items


def read_all_protocol(
    counter: ShardedCounter, backoff: retry.Backoff = _BACKOFF
) -> _core.Steps[list[int]]:
    """:func:`read_all`'s protocol."""
    items = yield from read_items_protocol(counter, backoff)
    return [int(item.get(counter.count_attr, 0)) for item in items]


@_contract.read
def read_items(
    client: DynamoDBClient, counter: ShardedCounter, backoff: retry.Backoff = _BACKOFF
) -> list[dict[str, Any]]:
    """Every shard item, strongly consistent, in shard order: one ``BatchGetItem`` per 100
    shards, sent together (more only for ``UnprocessedKeys``). Raises :class:`Missing` when the
    shards do not exist."""
    return _core.run(client, read_items_protocol(counter, backoff))


@_contract.read
def read_all(
    client: DynamoDBClient, counter: ShardedCounter, backoff: retry.Backoff = _BACKOFF
) -> list[int]:
    """Every shard's count (see :func:`read_items`)."""
    return _core.run(client, read_all_protocol(counter, backoff))


def _decrement(counter: ShardedCounter, shard: int, quantity: int) -> _core.Call:
    return _core.Call(
        "update_item",
        {
            "TableName": counter.table,
            "Key": counter.wire_key(shard),
            "UpdateExpression": "SET #count = #count - :q",
            "ConditionExpression": "attribute_exists(#pk) AND #count >= :q",
            "ExpressionAttributeNames": {"#pk": counter.key_attr, "#count": counter.count_attr},
            "ExpressionAttributeValues": codec.values(q=quantity),
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    )


def _decrement_many(counter: ShardedCounter, takes: dict[int, int]) -> _core.Call:
    """One transaction taking ``takes[k]`` from each shard ``k``, each guarded by its own
    ``#count >= :take``: the shards cannot go below zero whatever sold meanwhile."""
    return _core.Call(
        "transact_write_items",
        {
            "TransactItems": [
                {
                    "Update": {
                        "TableName": counter.table,
                        "Key": counter.wire_key(shard),
                        "UpdateExpression": "SET #count = #count - :take",
                        "ConditionExpression": "#count >= :take",
                        "ExpressionAttributeNames": {"#count": counter.count_attr},
                        "ExpressionAttributeValues": codec.values(take=take),
                    }
                }
                for shard, take in takes.items()
            ],
            "ClientRequestToken": transact.new_token(),
        },
    )


def spread(counts: Sequence[int], quantity: int, rand: random.Random) -> dict[int, int]:
    """Shards (largest first) whose counts add up to ``quantity``: how much to take from each."""
    order = sorted(range(len(counts)), key=lambda k: (-counts[k], rand.random()))
    takes: dict[int, int] = {}
    left = quantity
    for k in order:
        if left == 0 or counts[k] == 0:
            break
        takes[k] = min(counts[k], left)
        left -= takes[k]
    return takes


class _Take:
    """One :func:`take`: what it has spent and learned across its rounds, one protocol a step
    (each a generator: see :mod:`turnstile_ddb._core`)."""

    def __init__(self, counter: ShardedCounter, quantity: int, options: TakeOptions) -> None:
        self.counter = counter
        self.quantity = quantity
        self.options = options
        self.rand = options.rand or random.Random()
        self.hints = options.hints if options.hints is not None else Hints()
        self.calls = 0
        self.throttled_rounds = 0
        self.total = 0  # the counts last read added up to this
        self.saw_enough = False  # a read showed enough units at least once

    def run(self) -> _core.Steps[Taken]:
        self.refuse_from_hints()
        candidates = self.first_choice()
        for round_ in range(self.options.rounds + 1):
            taken, answered = yield from self.try_shards(candidates)
            if taken is not None:
                return taken
            if round_ == self.options.rounds:
                break
            counts, items, candidates = yield from self.read_counts(round_, answered)
            if not candidates:  # only a sum of shards holds q
                taken = yield from self.take_across(counts, items)
                if taken is not None:
                    return taken
        if not self.saw_enough:  # no read decided yet: a refusal rests on one, never a guess
            yield from self.read_counts(self.options.rounds, {})
        metrics.count("ShardRaceRefusal", pattern=PATTERN)
        raise Exhausted(self.total, raced=True)

    def refuse_from_hints(self) -> None:
        """Step 0: refuse without a call when the hints alone show too few units."""
        if self.hints.sold_out.fresh(self.counter):
            metrics.count("SoldOutHint", pattern=PATTERN)
            raise Exhausted(0)
        fresh = self.hints.shards.known(self.counter)
        if len(fresh) == self.counter.shards and sum(fresh.values()) < self.quantity:
            metrics.count("ShortHint", pattern=PATTERN)
            raise Exhausted(sum(fresh.values()))

    def first_choice(self) -> list[int]:
        """Step 1's shard, or none when the counter was last read empty (read at once)."""
        if self.hints.sold_out.empty(self.counter):
            return []
        return [self.hints.shards.choose(self.counter, self.rand, self.quantity)]

    def try_shards(
        self, candidates: Sequence[int]
    ) -> _core.Steps[tuple[Taken | None, dict[int, int]]]:
        """Steps 1 and 3: each candidate's conditional write until one takes ``q``; else the
        counts the refused writes answered (after a wait if one was throttled)."""
        answered: dict[int, int] = {}
        throttled: BaseException | None = None
        for shard in candidates:
            outcome = yield from self.try_one(shard)
            if isinstance(outcome, Taken):
                return outcome, answered
            if isinstance(outcome, BaseException):
                throttled = outcome
            else:
                answered[shard] = outcome
        if throttled is not None:
            self.throttled_rounds += 1
            if self.throttled_rounds >= self.options.backoff.attempts:
                raise errors.StayedThrottled(
                    self.throttled_rounds, f"the shards of {self.counter.base!r}", throttled
                )
            yield from retry.pause(self.options.backoff, self.throttled_rounds)
        return None, answered

    def try_one(self, shard: int) -> _core.Steps[Taken | int | BaseException]:
        """One shard's write: what it took, the count it answered, or the throttle (or the
        refused connection) that kept it from being sent."""
        counter = self.counter
        self.calls += 1
        try:
            response = yield _decrement(counter, shard, self.quantity)
        except retry.MAYBE_APPLIED_ERRORS as exc:
            raise retry.OutcomeUnknown(str(exc)) from exc
        except retry.NOT_SENT_ERRORS as exc:
            return exc
        except ClientError as exc:
            if retry.is_throttle(exc):
                metrics.count("Throttle", pattern=PATTERN)
                metrics.count("ShardFailover", pattern=PATTERN)
                self.hints.shards.throttled(counter, shard)
                return exc
            if not retry.condition_failed(exc):
                raise
            old = codec.old_item(exc)
            if old is None:
                raise Missing(counter.base) from exc
            metrics.count("ShardFailover", pattern=PATTERN)
            return learn(self.hints, counter, {shard: old})[shard]
        item = codec.decode_item(response["Attributes"]) or {}
        left = learn(self.hints, counter, {shard: item})[shard]
        return Taken((shard,), left, self.calls, item)

    def read_counts(
        self, round_: int, answered: dict[int, int]
    ) -> _core.Steps[tuple[dict[int, int], dict[int, dict[str, Any]], list[int]]]:
        """Step 2: every shard's count, reading only what is not known, then the shards that
        hold ``q`` in the order to try them; refuses (:class:`Exhausted`) when the counts add up
        to fewer than ``q``. Known: the counts the writes just answered, and on the first read
        those learned within the trust window too (each an upper bound of the count now: counts
        only go down between restocks). Later rounds read the rest again, so a refusal for lost
        races always rests on counts read or answered in that round. When no shard holds ``q``
        alone, every shard is read (unless just done): the transaction over several needs them
        all read now."""
        counter = self.counter
        counts = {**(self.hints.shards.known(counter) if round_ == 0 else {}), **answered}
        unknown = [k for k in range(counter.shards) if k not in counts]
        items: dict[int, dict[str, Any]] = {}
        candidates: list[int] = []
        for _ in range(2):
            if unknown:
                self.calls += 1
                items = yield from read_shards_protocol(counter, unknown, self.options.backoff)
                counts.update(learn(self.hints, counter, items))
            self.total = sum(counts.values())
            self.hints.sold_out.mark(counter, self.total == 0)
            if self.total < self.quantity:
                metrics.count("SoldOutRead", pattern=PATTERN)
                raise Exhausted(self.total)
            self.saw_enough = True
            candidates = [k for k, count in counts.items() if count >= self.quantity]
            if candidates or len(items) == counter.shards:
                break
            unknown = list(range(counter.shards))
        self.rand.shuffle(candidates)
        return counts, items, self.hints.shards.order(counter, candidates)

    def take_across(
        self, counts: dict[int, int], items: dict[int, dict[str, Any]]
    ) -> _core.Steps[Taken | None]:
        """Step 3's fallback: ``q`` from several shards in one transaction (each guarded by its
        own count, see :func:`_decrement_many`); ``None`` when it lost a race or was throttled."""
        counter = self.counter
        ordered = [counts[k] for k in range(counter.shards)]
        takes = spread(ordered, self.quantity, self.rand)
        self.calls += 1
        try:
            yield _decrement_many(counter, takes)
        except retry.MAYBE_APPLIED_ERRORS as exc:
            raise retry.OutcomeUnknown(str(exc)) from exc
        except ClientError as exc:
            code = retry.error_code(exc)
            if code != "TransactionCanceledException" and not retry.is_throttle(exc):
                raise
            metrics.count("ShardFailover", pattern=PATTERN)
            return None
        left = {shard: ordered[shard] - taken for shard, taken in takes.items()}
        learn(self.hints, counter, {shard: {counter.count_attr: n} for shard, n in left.items()})
        return Taken(tuple(takes), sum(left.values()), self.calls, items[next(iter(takes))])


def take_protocol(
    counter: ShardedCounter, quantity: int, options: TakeOptions | None = None
) -> _core.Steps[Taken]:
    """:func:`take`'s protocol."""
    return _Take(counter, quantity, options or TakeOptions()).run()


@_contract.write
def take(
    client: DynamoDBClient,
    counter: ShardedCounter,
    quantity: int,
    options: TakeOptions | None = None,
    **legacy: Any,
) -> Taken:
    """Take ``quantity`` units from some shard(s) (see the module docstring), or raise
    :class:`Exhausted` / :class:`Missing`; :class:`turnstile_ddb.retry.RetriesExhausted` when every
    shard stayed throttled for the whole backoff. ``options``: :class:`TakeOptions` (defaults:
    no hints, a fresh ``Backoff()``). The keywords of 0.3 (``backoff``, ``rand``, ``sold_out``,
    ``rounds``, ``known``) still work, with a deprecation warning."""
    if legacy:
        if options is not None:
            raise TypeError("take() takes options or the deprecated keywords, not both")
        options = _legacy_options(legacy)
    return _core.run(client, take_protocol(counter, quantity, options))


def _join_shard(
    counter: ShardedCounter,
    member: capacity.Member,
    shard: int,
    transactions: retry.Backoff,
    also: Sequence[dict[str, Any]],
) -> _core.Steps[bool]:
    """One shard's join (:func:`turnstile_ddb.capacity.join`, the member recording ``shard``);
    False when that shard was full."""
    recorded = capacity.Member(
        member.table, member.key, {**(member.item or {}), counter.shard_attr: shard}
    )
    try:
        yield from capacity.join_protocol(
            counter.capacity_row(shard), recorded, backoff=transactions, also=also
        )
    except capacity.NoCounter as exc:
        raise Missing(counter.base) from exc
    except capacity.Full:
        metrics.count("ShardFailover", pattern=PATTERN)
        return False
    return True


def _with_room(
    counter: ShardedCounter, member: capacity.Member, backoff: retry.Backoff
) -> _core.Steps[tuple[list[int], int, int]]:
    """One read of every shard and of the member's key: the shards with room, and the counts
    and limits added up. Raises :class:`turnstile_ddb.capacity.AlreadyMember` when the member
    exists."""
    items, (found,) = yield from read_with_protocol(counter, backoff, [dict(member.key)])
    if found is not None:
        raise capacity.AlreadyMember(found)
    counts = [int(item.get(counter.count_attr, 0)) for item in items]
    limits = [int(item.get(counter.limit_attr, 0)) for item in items]
    room = [k for k, (count, limit) in enumerate(zip(counts, limits, strict=True)) if count < limit]
    return room, sum(counts), sum(limits)


def join_protocol(
    counter: ShardedCounter,
    member: capacity.Member,
    options: TakeOptions | None = None,
    *,
    transactions: retry.Backoff | None = None,
    also: Sequence[dict[str, Any]] = (),
) -> _core.Steps[int]:
    """:func:`join`'s protocol."""
    options = options or TakeOptions()
    rand = options.rand or random.Random()
    hints = options.hints if options.hints is not None else Hints()
    backoff = transactions or options.backoff
    candidates = [] if hints.sold_out.empty(counter) else [rand.randrange(counter.shards)]
    count = limit = 0
    for _ in range(options.rounds + 1):
        for shard in candidates:
            if (yield from _join_shard(counter, member, shard, backoff, also)):
                return shard
        candidates, count, limit = yield from _with_room(counter, member, options.backoff)
        hints.sold_out.mark(counter, not candidates)
        if not candidates:
            metrics.count("SoldOutRead", pattern=PATTERN)
            raise Full(count, limit)
        rand.shuffle(candidates)
    metrics.count("ShardRaceRefusal", pattern=PATTERN)
    raise Full(count, limit, raced=True)


@_contract.write
def join(
    client: DynamoDBClient,
    counter: ShardedCounter,
    member: capacity.Member,
    options: TakeOptions | None = None,
    *,
    transactions: retry.Backoff | None = None,
    also: Sequence[dict[str, Any]] = (),
) -> int:
    """Add ``member`` to the sharded capacity ``counter`` (see the module docstring) and return
    the shard it joined. A random shard first (none when the hints saw the counter full); on
    ``Full``, one read of every shard and of the member's key, then the shards with room in
    random order, at most ``options.rounds`` times. ``member`` lives in the counter's table.
    ``transactions``: the backoff of each join's transaction (``options.backoff`` unless given).

    Raises :class:`turnstile_ddb.capacity.AlreadyMember`, :class:`Missing` (no shards),
    :class:`Full` (a read showed every shard full, or ``raced``: every shard with room was taken
    meanwhile, ``rounds`` times), and :class:`turnstile_ddb.transact.Cancelled` unchanged when
    one of the caller's ``also`` elements failed."""
    steps = join_protocol(counter, member, options, transactions=transactions, also=also)
    return _core.run(client, steps)


def leave_protocol(
    counter: ShardedCounter,
    member: capacity.Member,
    options: TakeOptions | None = None,
    *,
    transactions: retry.Backoff | None = None,
) -> _core.Steps[int]:
    """:func:`leave`'s protocol."""
    options = options or TakeOptions()
    item = yield from versioned.read_protocol(member.table, member.key, options.backoff)
    if item is None:
        raise capacity.NotMember()
    shard = int(item[counter.shard_attr])
    yield from capacity.leave_protocol(
        counter.capacity_row(shard), member, backoff=transactions or options.backoff
    )
    if options.hints is not None:
        options.hints.restocked(counter)
    return shard


@_contract.write
def leave(
    client: DynamoDBClient,
    counter: ShardedCounter,
    member: capacity.Member,
    options: TakeOptions | None = None,
    *,
    transactions: retry.Backoff | None = None,
) -> int:
    """Remove ``member`` from the shard it joined (its ``shard_attr``, read consistently) and
    give the place back, in :func:`turnstile_ddb.capacity.leave`'s transaction; returns that
    shard. The hints forget the counter (it has room again). Raises
    :class:`turnstile_ddb.capacity.NotMember` (no such member, or it left meanwhile) and
    :class:`turnstile_ddb.capacity.NoCounter`."""
    steps = leave_protocol(counter, member, options, transactions=transactions)
    return _core.run(client, steps)


def _stamp(stamp: dict[str, Any] | None) -> tuple[dict[str, str], str, dict[str, Any]]:
    """Expression parts that set ``stamp``'s attributes: names, ", #s0 = :s0...", values."""
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    sets = ""
    for i, (name, value) in enumerate((stamp or {}).items()):
        names[f"#s{i}"] = name
        values[f":s{i}"] = codec.encode(value)
        sets += f", #s{i} = :s{i}"
    return names, sets, values


def set_total_protocol(
    counter: ShardedCounter,
    total: int,
    *,
    backoff: retry.Backoff = _BACKOFF,
    also: Callable[[], Sequence[dict[str, Any]]] = lambda: (),
    stamp: dict[str, Any] | None = None,
    attempts: int = 8,
    hints: Hints | None = None,
) -> _core.Steps[list[int]]:
    """:func:`set_total`'s protocol."""
    _checks.at_least("set_total", "attempts", attempts, 1)
    target = split(total, counter.shards)
    names, sets, stamped = _stamp(stamp)
    last: transact.Cancelled | None = None
    for attempt in range(1, attempts + 1):
        seen = yield from read_all_protocol(counter, backoff)
        elements = [*also()]
        offset = len(elements)
        for shard, (before, after) in enumerate(zip(seen, target, strict=True)):
            elements.append(
                {
                    "Update": {
                        "TableName": counter.table,
                        "Key": counter.wire_key(shard),
                        "UpdateExpression": "SET #count = :after" + sets,
                        "ConditionExpression": "#count = :before",
                        "ExpressionAttributeNames": {"#count": counter.count_attr, **names},
                        "ExpressionAttributeValues": {
                            **codec.values(before=before, after=after),
                            **stamped,
                        },
                    }
                }
            )
        try:
            yield from transact.transact_write_protocol(elements, backoff=backoff)
            if hints is not None:
                hints.restocked(counter, total)
            return target
        except transact.Cancelled as exc:
            if any(exc.failed_at(i) for i in range(offset)):
                raise
            metrics.count("ShardConflict", pattern=PATTERN)
            last = exc
            yield from retry.pause(backoff, attempt)
    raise errors.LostEveryRace(attempts, "sales kept changing the shards", last)


@_contract.write
def set_total(
    client: DynamoDBClient,
    counter: ShardedCounter,
    total: int,
    *,
    backoff: retry.Backoff = _BACKOFF,
    also: Callable[[], Sequence[dict[str, Any]]] = lambda: (),
    stamp: dict[str, Any] | None = None,
    attempts: int = 8,
    hints: Hints | None = None,
) -> list[int]:
    """Make the shards add up to exactly ``total`` (split evenly), atomically with ``also()``'s
    elements. Each shard is conditioned on the count just read; a sale in between cancels the
    transaction and it is read and tried again (at most ``attempts`` times, then
    :class:`turnstile_ddb.retry.RetriesExhausted`). A failed ``also`` element raises
    :class:`turnstile_ddb.transact.Cancelled` for the caller to read (its index is 0). ``stamp``'s
    attributes are set on every shard in the same transaction (a catalogue version, say).
    ``hints``: the caller's :class:`Hints`, told the new total (:meth:`Hints.restocked`)."""
    steps = set_total_protocol(
        counter, total, backoff=backoff, also=also, stamp=stamp, attempts=attempts, hints=hints
    )
    return _core.run(client, steps)


def add_protocol(
    counter: ShardedCounter,
    units: int,
    *,
    backoff: retry.Backoff = _BACKOFF,
    also: Sequence[dict[str, Any]] = (),
    stamp: dict[str, Any] | None = None,
    increments: Sequence[str] = (),
    hints: Hints | None = None,
) -> _core.Steps[None]:
    """:func:`add`'s protocol."""
    names, sets, stamped = _stamp(stamp)
    adds = "".join(f", #i{i} :one" for i in range(len(increments)))
    added = {f"#i{i}": name for i, name in enumerate(increments)}
    elements = [*also]
    for shard, share in enumerate(split(units, counter.shards)):
        elements.append(
            {
                "Update": {
                    "TableName": counter.table,
                    "Key": counter.wire_key(shard),
                    "UpdateExpression": "ADD #count :share"
                    + adds
                    + (f" SET {sets[2:]}" if sets else ""),
                    "ConditionExpression": "attribute_exists(#pk)",
                    "ExpressionAttributeNames": {
                        "#pk": counter.key_attr,
                        "#count": counter.count_attr,
                        **names,
                        **added,
                    },
                    "ExpressionAttributeValues": {
                        **codec.values(share=share),
                        **(codec.values(one=1) if increments else {}),
                        **stamped,
                    },
                }
            }
        )
    yield from transact.transact_write_protocol(elements, backoff=backoff)
    if hints is not None:
        hints.restocked(counter)


@_contract.write
def add(
    client: DynamoDBClient,
    counter: ShardedCounter,
    units: int,
    *,
    backoff: retry.Backoff = _BACKOFF,
    also: Sequence[dict[str, Any]] = (),
    stamp: dict[str, Any] | None = None,
    increments: Sequence[str] = (),
    hints: Hints | None = None,
) -> None:
    """Add ``units`` spread over the shards, atomically with ``also`` (no read needed); every
    shard is written, so ``stamp`` reaches all of them (SET), and each attribute of
    ``increments`` is incremented by one on every shard (ADD: commutes with concurrent adds, so
    a copy of a parent's counter stays equal to it when the parent is incremented alongside).
    ``hints``: the caller's :class:`Hints`, which forget the counter (:meth:`Hints.restocked`)."""
    steps = add_protocol(
        counter,
        units,
        backoff=backoff,
        also=also,
        stamp=stamp,
        increments=increments,
        hints=hints,
    )
    _core.run(client, steps)


# Names of 0.3 that leave the public surface: each still answers, with a deprecation warning.
# ``hints`` and ``shard_hints`` were process-wide objects the library consulted by default; the
# library keeps no state now, so each use gets a new, empty one: pass your own Hints instead.
__getattr__ = deprecation.renamed(
    __name__,
    {
        "ROUNDS": ("1.0.0", "2.0.0", "TakeOptions().rounds", lambda: _ROUNDS),
        "hints": ("1.0.0", "2.0.0", "Hints().sold_out, passed in TakeOptions", SoldOutHints),
        "shard_hints": ("1.0.0", "2.0.0", "Hints().shards, passed in TakeOptions", ShardHints),
        "read_with": ("1.0.0", "2.0.0", "join (a sharded capacity)", lambda: _read_with),
        "read_shards": ("1.0.0", "2.0.0", "read_items", lambda: _read_shards),
    },
)
