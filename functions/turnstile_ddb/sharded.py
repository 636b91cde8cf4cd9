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

The shard count changes online (:func:`resize`, with its conditions in
:mod:`turnstile_ddb._sharded_resize`'s docstring): one transaction per resize moves units (or a
capacity's places) between shards and writes the new layout (``shards_attr``, ``layout_attr``: a
generation) on every shard, each element conditioned on the generation read; dropped shards are
deleted there. Callers learn the layout from any shard item a read or a write answers, and from a
shard that is gone (shard 0 never is), never by waiting: a take at a dropped shard fails its
condition and reads the layout again; a refusal rests on a read of one layout (the items of one
read showing one generation); a member whose shard was dropped leaves at a shard that counts it.
A resize counts as a restock for the hints' bound above (its units move between shards).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from turnstile_ddb import (
    _checks,
    _contract,
    _core,
    _sharded_hints,
    _sharded_resize,
    _sharded_take,
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
    PATTERN,
    RELAYOUT_READS,
    Exhausted,
    Full,
    Layout,
    Missing,
    ShardedCounter,
    Taken,
    _read_shards,
    _read_with,
    read_with_protocol,
    same_layout,
    shard_items,
    shard_update,
    split,
)
from turnstile_ddb._sharded_hints import (
    _ROUNDS,
    Hints,
    LoadObserver,
    ShardHints,
    SoldOutHints,
    TakeOptions,
    _legacy_options,
    learn,
)
from turnstile_ddb._sharded_resize import MAX_SHARDS, Resized, resize_protocol
from turnstile_ddb._sharded_take import _Take

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "MAX_SHARDS",
    "METRICS",
    "Exhausted",
    "Full",
    "Hints",
    "Layout",
    "LoadObserver",
    "Missing",
    "Resized",
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
    "resize",
    "set_total",
    "shard_items",
    "split",
    "take",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = (
    "LayoutChanged",
    "ResizeConflict",
    "ShardResize",
    "ShardFailover",
    "ShardConflict",
    "ShardRaceRefusal",
    "SoldOutRead",
    "SoldOutHint",
    "ShortHint",
    "Throttle",
)


def read_items_protocol(
    counter: ShardedCounter, backoff: retry.Backoff = _BACKOFF
) -> _core.Steps[list[dict[str, Any]]]:
    """Every shard item, strongly consistent, in shard order: one ``BatchGetItem`` per 100
    shards, sent together (more only for ``UnprocessedKeys``). Raises :class:`Missing` when the
    shards do not exist."""
    items, _ = yield from read_with_protocol(counter, backoff)
    return items


read_items = _contract.read(_core.driven(read_items_protocol))


def read_all_protocol(
    counter: ShardedCounter, backoff: retry.Backoff = _BACKOFF
) -> _core.Steps[list[int]]:
    """Every shard's count (see :func:`read_items`)."""
    items = yield from read_items_protocol(counter, backoff)
    return [int(item.get(counter.count_attr, 0)) for item in items]


read_all = _contract.read(_core.driven(read_all_protocol))


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
        if shard == 0:  # shard 0 is never dropped: the counter is gone
            raise Missing(counter.base) from exc
        metrics.count("ShardFailover", pattern=PATTERN)  # a resize dropped it: read again
        return False
    except capacity.Full:
        metrics.count("ShardFailover", pattern=PATTERN)
        return False
    return True


def _with_room(
    counter: ShardedCounter, member: capacity.Member, backoff: retry.Backoff, hints: Hints
) -> _core.Steps[tuple[list[int], int, int, ShardedCounter]]:
    """One read of every shard and of the member's key: the shards with room, the counts and
    limits added up, and the counter at the layout read (told to ``hints``). Raises
    :class:`turnstile_ddb.capacity.AlreadyMember` when the member exists."""
    current = hints.shards.current(counter)
    items, (found,) = yield from read_with_protocol(current, backoff, [dict(member.key)])
    if found is not None:
        raise capacity.AlreadyMember(found)
    learn(hints, counter, dict(enumerate(items)))
    counts = [int(item.get(counter.count_attr, 0)) for item in items]
    limits = [int(item.get(counter.limit_attr, 0)) for item in items]
    room = [k for k, (count, limit) in enumerate(zip(counts, limits, strict=True)) if count < limit]
    return room, sum(counts), sum(limits), counter.with_shards(len(items))


def join_protocol(
    counter: ShardedCounter,
    member: capacity.Member,
    options: TakeOptions | None = None,
    *,
    transactions: retry.Backoff | None = None,
    also: Sequence[dict[str, Any]] = (),
) -> _core.Steps[int]:
    """Add ``member`` to the sharded capacity ``counter`` (see the module docstring) and return
    the shard it joined. A random shard first (none when the hints saw the counter full); on
    ``Full``, one read of every shard and of the member's key, then the shards with room in
    random order, at most ``options.rounds`` times. ``member`` lives in the counter's table.
    ``transactions``: the backoff of each join's transaction (``options.backoff`` unless given).

    Raises :class:`turnstile_ddb.capacity.AlreadyMember`, :class:`Missing` (no shards),
    :class:`Full` (a read showed every shard full, or ``raced``: every shard with room was taken
    meanwhile, ``rounds`` times), and :class:`turnstile_ddb.transact.Cancelled` unchanged when
    one of the caller's ``also`` elements failed."""
    options = options or TakeOptions()
    rand = options.rand or random.Random()
    hints = options.hints if options.hints is not None else Hints()
    backoff = transactions or options.backoff
    current = hints.shards.current(counter)
    candidates = [] if hints.sold_out.empty(counter) else [rand.randrange(current.shards)]
    count = limit = 0
    for _ in range(options.rounds + 1):
        for shard in candidates:
            if (yield from _join_shard(current, member, shard, backoff, also)):
                hints.saw(counter, "taken")
                return shard
            hints.saw(counter, "conflict")
        candidates, count, limit, current = yield from _with_room(
            counter, member, options.backoff, hints
        )
        hints.sold_out.mark(counter, not candidates)
        if not candidates:
            metrics.count("SoldOutRead", pattern=PATTERN)
            hints.saw(counter, "refused")
            raise Full(count, limit)
        rand.shuffle(candidates)
    metrics.count("ShardRaceRefusal", pattern=PATTERN)
    hints.saw(counter, "refused")
    raise Full(count, limit, raced=True)


join = _contract.write(_core.driven(join_protocol))


def leave_protocol(
    counter: ShardedCounter,
    member: capacity.Member,
    options: TakeOptions | None = None,
    *,
    transactions: retry.Backoff | None = None,
) -> _core.Steps[int]:
    """Remove ``member`` from the shard it joined (its ``shard_attr``, read consistently) and
    give the place back, in :func:`turnstile_ddb.capacity.leave`'s transaction; returns that
    shard. When a resize dropped that shard (or moved its members' places into another), the
    place is given back at a shard that counts one (the counts add up to the members present:
    see :func:`resize`), and that shard is returned; so is one where that shard is still
    throttled or contended after one retry (up to ``options.rounds`` other shards, in random
    order, one retry each). A shard's count is therefore not the members recorded on it: only
    the sum is. The hints forget the counter (it has room again). Raises
    :class:`turnstile_ddb.capacity.NotMember` (no such member, or it left meanwhile),
    :class:`turnstile_ddb.capacity.NoCounter`, and :class:`turnstile_ddb.errors.RetriesExhausted`
    when every shard tried stayed busy (nothing written)."""
    options = options or TakeOptions()
    backoff = transactions or options.backoff
    item = yield from versioned.read_protocol(member.table, member.key, options.backoff)
    if item is None:
        raise capacity.NotMember()
    shard = int(item[counter.shard_attr])
    try:
        left = yield from _leave_shard(counter, member, shard, _brief(backoff))
    except errors.RetriesExhausted as exc:  # its shard stayed throttled or contended
        shard = yield from _leave_around(counter, member, shard, options, backoff, exc)
    else:
        if not left:
            shard = yield from _leave_elsewhere(counter, member, options, backoff)
    if options.hints is not None:
        options.hints.restocked(counter)
        options.hints.saw(counter, "left")
    return shard


leave = _contract.write(_core.driven(leave_protocol))


def _leave_shard(
    counter: ShardedCounter, member: capacity.Member, shard: int, backoff: retry.Backoff
) -> _core.Steps[bool]:
    """The member's leave at ``shard`` (:func:`turnstile_ddb.capacity.leave`); False when that
    shard is gone or counts nobody: a resize moved the place the member took elsewhere."""
    try:
        yield from capacity.leave_protocol(counter.capacity_row(shard), member, backoff=backoff)
    except capacity.NoCounter:
        if shard == 0:  # shard 0 is never dropped: the counter is gone
            raise
        return False
    except transact.Cancelled as exc:
        if not exc.failed_at(0):
            raise
        return False
    return True


def _brief(backoff: retry.Backoff) -> retry.Backoff:
    """A leave's patience at one shard: one retry, then another (:func:`_leave_around`)."""
    return dataclasses.replace(backoff, attempts=min(2, backoff.attempts))


def _leave_around(
    counter: ShardedCounter,
    member: capacity.Member,
    busy: int,
    options: TakeOptions,
    backoff: retry.Backoff,
    exc: errors.RetriesExhausted,
) -> _core.Steps[int]:
    """Leave at another shard when the member's own (``busy``) stayed throttled or contended
    through one retry (a leave waits no longer at a busy shard: any other that counts a member
    takes the place back at once).
    A member's place need not come back where it was taken: the shards' counts add up to the
    members present (see :func:`_leave_elsewhere`), so any shard that counts one may give it
    back. Without this, the oldest members' leaves all land on the first shards (a counter that
    grew kept its early members there) and hold those keys at their limit, which no resize can
    spread. The other shards of the layout the hints know are tried in random order, each with
    one retry, without a read (one that counts nobody refuses the write, which decides); after
    ``options.rounds`` of them the leave gives up with ``exc``."""
    if options.hints is not None:
        options.hints.shards.throttled(counter, busy)
        options.hints.saw(counter, "throttled")
        counter = options.hints.shards.current(counter)
    others = [k for k in range(counter.shards) if k != busy]
    (options.rand or random.Random()).shuffle(others)
    quick = _brief(backoff)
    for shard in others[: options.rounds]:
        metrics.count("ShardFailover", pattern=PATTERN)
        try:
            if (yield from _leave_shard(counter, member, shard, quick)):
                return shard
        except errors.RetriesExhausted:
            continue
    raise exc


def _leave_elsewhere(
    counter: ShardedCounter, member: capacity.Member, options: TakeOptions, backoff: retry.Backoff
) -> _core.Steps[int]:
    """Leave at any shard that counts a member. A shrink adds a dropped shard's members to a
    kept one, so the shards' counts add up to the members present, never less: while this
    member is present, some shard counts at least one, and the member's delete in the same
    transaction (``attribute_exists``) makes the leave count once."""
    rand = options.rand or random.Random()
    for _ in range(options.rounds + 1):
        try:
            items, _ = yield from read_with_protocol(counter, options.backoff)
        except Missing as exc:
            raise capacity.NoCounter() from exc
        counted = [k for k, item in enumerate(items) if int(item.get(counter.count_attr, 0)) > 0]
        rand.shuffle(counted)
        current = counter.with_shards(len(items))
        for shard in counted:
            if (yield from _leave_shard(current, member, shard, backoff)):
                return shard
        metrics.count("ShardFailover", pattern=PATTERN)
        counter = current
    raise errors.LostEveryRace(options.rounds + 1, f"resizes of {counter.base!r} kept moving")


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
    """Make the shards add up to exactly ``total`` (split evenly), atomically with ``also()``'s
    elements. Each shard is conditioned on the count just read; a sale in between cancels the
    transaction and it is read and tried again (at most ``attempts`` times, then
    :class:`turnstile_ddb.retry.RetriesExhausted`). A failed ``also`` element raises
    :class:`turnstile_ddb.transact.Cancelled` for the caller to read (its index is 0). ``stamp``'s
    attributes are set on every shard in the same transaction (a catalogue version, say).
    ``hints``: the caller's :class:`Hints`, told the new total (:meth:`Hints.restocked`)."""
    _checks.at_least("set_total", "attempts", attempts, 1)
    hints = hints if hints is not None else Hints()
    names, sets, stamped = _stamp(stamp)
    last: transact.Cancelled | None = None
    for attempt in range(1, attempts + 1):
        items, _ = yield from read_with_protocol(hints.shards.current(counter), backoff)
        learn(hints, counter, dict(enumerate(items)))
        # every shard conditioned on its count and on the layout read: a resize meanwhile
        # cancels it (its shards would not be these)
        same, same_names, same_values = same_layout(counter, counter.layout_of(items[0]).generation)
        target = split(total, len(items))
        elements = [*also()]
        offset = len(elements)
        for shard, (item, after) in enumerate(zip(items, target, strict=True)):
            before = int(item.get(counter.count_attr, 0))
            values = {**codec.values(before=before, after=after), **same_values, **stamped}
            elements.append(
                shard_update(
                    counter,
                    shard,
                    "SET #count = :after" + sets,
                    f"#count = :before AND {same}",
                    {"#count": counter.count_attr, **same_names, **names},
                    values,
                )
            )
        try:
            yield from transact.transact_write_protocol(elements, backoff=backoff)
            hints.restocked(counter, total)
            hints.saw(counter, "restocked", total)
            return target
        except transact.Cancelled as exc:
            if any(exc.failed_at(i) for i in range(offset)):
                raise
            metrics.count("ShardConflict", pattern=PATTERN)
            hints.saw(counter, "conflict")
            last = exc
            yield from retry.pause(backoff, attempt)
    raise errors.LostEveryRace(attempts, "sales kept changing the shards", last)


set_total = _contract.write(_core.driven(set_total_protocol))


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
    """Add ``units`` spread over the shards, atomically with ``also`` (no read needed); every
    shard is written, so ``stamp`` reaches all of them (SET), and each attribute of
    ``increments`` is incremented by one on every shard (ADD: commutes with concurrent adds, so
    a copy of a parent's counter stays equal to it when the parent is incremented alongside).
    ``hints``: the caller's :class:`Hints`, which forget the counter (:meth:`Hints.restocked`)."""
    names, sets, stamped = _stamp(stamp)
    adds = "".join(f", #i{i} :one" for i in range(len(increments)))
    added = {f"#i{i}": name for i, name in enumerate(increments)}
    one = codec.values(one=1) if increments else {}
    known = hints if hints is not None else Hints()
    current = known.shards.current(counter)
    for _ in range(RELAYOUT_READS):
        elements = [*also]
        update = "ADD #count :share" + adds + (f" SET {sets[2:]}" if sets else "")
        key_names = {"#pk": counter.key_attr, "#count": counter.count_attr, **names, **added}
        for shard, share in enumerate(split(units, current.shards)):
            values = {**codec.values(share=share), **one, **stamped}
            elements.append(
                shard_update(counter, shard, update, "attribute_exists(#pk)", key_names, values)
            )
        try:
            yield from transact.transact_write_protocol(elements, backoff=backoff)
        except transact.Cancelled as exc:
            shards = range(len(also) + 1, len(elements))  # shard 0's missing: the counter's gone
            if not any(exc.failed_at(i) for i in shards) or exc.failed_at(len(also)):
                raise
            # a shard is gone: a resize dropped it; add again over the shards there are now
            metrics.count("ShardConflict", pattern=PATTERN)
            items, _ = yield from read_with_protocol(current, backoff)
            learn(known, counter, dict(enumerate(items)))
            current = counter.with_shards(len(items))
            continue
        known.restocked(counter)
        known.saw(counter, "restocked", units)
        return
    raise errors.LostEveryRace(RELAYOUT_READS, f"resizes of {counter.base!r} kept moving")


add = _contract.write(_core.driven(add_protocol))


# How a take spreads ``q`` over several shards (the service's catalogue update uses it too).
spread = _sharded_take.spread
_PROTOCOL_MODULES = (_sharded_take, _sharded_hints, _sharded_resize)


resize = _contract.write(_core.driven(resize_protocol))


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
