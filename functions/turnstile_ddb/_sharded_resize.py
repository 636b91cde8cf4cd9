"""Changing a sharded counter's shard count while it is used (:func:`turnstile_ddb.sharded.resize`).

Private: the public names are :mod:`turnstile_ddb.sharded`'s. One resize is one read of every
shard and one ``TransactWriteItems``, with generation ``g`` read and ``N`` shards becoming ``M``
(``#layout``: the counter's ``layout_attr``, absent before the first resize)::

    every shard k < N that is kept (k < M)
        Update  SET #shards = :M, #layout = :g+1, and the move below
                ConditionExpression: #layout = :g (attribute_not_exists(#layout) for g = 0)
                                     AND the move's own condition
    grow (M > N): each new shard j (N <= j < M), a copy of shard 0's other attributes
        Put     ConditionExpression: attribute_not_exists(#pk)
    shrink (M < N): each dropped shard k (k >= M)
        Delete  ConditionExpression: #layout = :g AND #count = :c_k  (the count read)

A **counter** moves units. Growing, a kept shard gives what it holds over its even share,
``SET #count = #count - :d`` with ``#count >= :d`` (sales may go on at it meanwhile: only
a shard holding less than ``d`` cancels the move), and the new shards get those units, split
evenly. Shrinking, dropped shard ``k``'s count is added to kept shard ``k % M``
(``ADD #count :c``), conditioned on the exact count read, so a sale at it in between cancels.

A **sharded capacity** (``capacity=True``) moves places (``limit_attr``), never members: growing,
a kept shard gives spare room (``SET #limit = :l2`` with ``#limit = :l AND #count <= :l2``: joins
may go on meanwhile while they leave it room), new shards get that room and no members;
shrinking, a dropped shard's members and places are added to kept shard ``k % M``
(``ADD #count :c, #limit :l``, the drop conditioned on both as read).

Invariants, each held by the conditions above (a resize either applies whole or not at all):
the total (the counts added up) never changes by a resize; a capacity's limits added up and
counts added up never change; no shard goes below zero or over its limit; shard items exist
exactly for ``k < M`` afterwards, all at generation ``g+1``; of two resizes racing from the same
read, one applies and the other is cancelled by the generation. A take in flight lands on a shard
that still exists (and so counts) or fails its condition on a dropped one and reads the layout
again; a member whose shard was dropped leaves at the shard that took its place.

A shrink drops one shard per step (each step a read and a transaction as above), and a step
applies only if the dropped shard's count held still between its read and its transaction: under
sustained sales at that shard it can lose every attempt (``LostEveryRace``, nothing changed).
Shrink when the counter is quiet, as the resize policy does (:mod:`turnstile_ddb.adaptive`). A
shrink under load would first close the dropped shards to sales (a condition on the shard's
own index against ``#shards`` in every take), then move their frozen counts (not built).

Bounded by the 100 elements of one transaction: ``max(N, M) <= 100``. Larger counts would keep
the layout on shard 0 alone, move shards in steps of at most 99 with shard 0 in each, and have
readers check shard 0's generation around every multi-page read (not built: 100 shards is
100,000 write units a second, past a table's default quota).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from turnstile_ddb import _checks, _core, codec, errors, metrics, retry, transact
from turnstile_ddb._sharded_counter import (
    _BACKOFF,
    PATTERN,
    Layout,
    ShardedCounter,
    read_with_protocol,
    same_layout,
    shard_update,
    split,
)
from turnstile_ddb._sharded_hints import Hints, learn

# One transaction writes at most 100 items: the most shards a resize may start or end with.
MAX_SHARDS = 100


@dataclass(frozen=True)
class Resized:
    """What one :func:`resize` did: ``before`` shards became ``after`` at layout ``generation``
    (the last this call wrote), moving ``moved`` units (a capacity: places) between shards, in
    ``steps`` transactions of ``items`` elements in all (each transactional write costs two
    write units per KB). A grow is one step; a shrink one step per dropped shard. ``after`` is
    above the count asked for when a later step of a shrink wrote nothing (it lost every race or
    stayed throttled; the steps made stand), and ``steps`` is 0 when the counter already had that
    count."""

    before: int
    after: int
    generation: int
    moved: int
    items: int
    steps: int


def _keep(
    counter: ShardedCounter,
    shard: int,
    layout: Layout,
    generation: int,
    update: str,
    condition: str,
    values: dict[str, Any],
    names: dict[str, str],
) -> dict[str, Any]:
    """A kept shard's element: its move (``update``: a ``SET`` or an ``ADD`` clause, and its
    ``condition``) and the new layout."""
    same, same_names, same_values = same_layout(counter, generation)
    relayout = "#shards = :shards, #layout = :next"
    joined = ", " if update.startswith("SET ") else " SET "
    return shard_update(
        counter,
        shard,
        f"{update}{joined}{relayout}",
        " AND ".join(c for c in (same, condition) if c),
        {"#shards": counter.shards_attr, **same_names, **names},
        {**codec.values(shards=layout.shards, next=layout.generation), **same_values, **values},
    )


def _grow(
    counter: ShardedCounter, items: list[dict[str, Any]], layout: Layout, capacity: bool
) -> tuple[list[dict[str, Any]], int]:
    """The elements that grow ``items`` to ``layout.shards`` shards, and what they move."""
    before, generation = len(items), counter.layout_of(items[0]).generation
    amount = counter.limit_attr if capacity else counter.count_attr
    held = [int(item.get(amount, 0)) for item in items]
    fair = split(sum(held), layout.shards)[:before]  # the kept shards' even shares
    if capacity:  # only spare room moves: a place a member holds stays where it is
        counts = [int(item.get(counter.count_attr, 0)) for item in items]
        give = [max(0, min(h - f, h - c)) for h, f, c in zip(held, fair, counts, strict=True)]
    else:
        give = [max(0, h - f) for h, f in zip(held, fair, strict=True)]
    elements = []
    for shard, (has, gives) in enumerate(zip(held, give, strict=True)):
        if capacity:
            move = ("SET #limit = :left", "#limit = :had AND #count <= :left")
            values = codec.values(left=has - gives, had=has)
            names = {"#limit": counter.limit_attr, "#count": counter.count_attr}
        else:
            move = ("SET #count = #count - :give", "#count >= :give")
            values, names = codec.values(give=gives), {"#count": counter.count_attr}
        elements.append(_keep(counter, shard, layout, generation, move[0], move[1], values, names))
    copied = {k: v for k, v in items[0].items() if k not in counter.key(0)}
    for offset, share in enumerate(split(sum(give), layout.shards - before)):
        shard = before + offset
        item = {
            **copied,
            **counter.key(shard),
            counter.count_attr: 0 if capacity else share,
            counter.shards_attr: layout.shards,
            counter.layout_attr: layout.generation,
        }
        if capacity:
            item[counter.limit_attr] = share
        elements.append(
            {
                "Put": {
                    "TableName": counter.table,
                    "Item": codec.encode_item(item),
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": counter.key_attr},
                }
            }
        )
    return elements, sum(give)


def _shrink(
    counter: ShardedCounter, items: list[dict[str, Any]], layout: Layout, capacity: bool
) -> tuple[list[dict[str, Any]], int]:
    """The elements that shrink ``items`` to ``layout.shards`` shards, and what they move."""
    generation = counter.layout_of(items[0]).generation
    keep = layout.shards
    counts = [int(item.get(counter.count_attr, 0)) for item in items]
    limits = [int(item.get(counter.limit_attr, 0)) for item in items]
    into: dict[int, tuple[int, int]] = {k: (0, 0) for k in range(keep)}
    for dropped in range(keep, len(items)):
        count, limit = into[dropped % keep]
        into[dropped % keep] = (count + counts[dropped], limit + limits[dropped])
    names = {"#count": counter.count_attr}
    if capacity:
        names["#limit"] = counter.limit_attr
    elements = []
    for shard, (count, limit) in into.items():
        update = "ADD #count :count" + (", #limit :limit" if capacity else "")
        values = codec.values(count=count, **({"limit": limit} if capacity else {}))
        elements.append(_keep(counter, shard, layout, generation, update, "", values, names))
    same, same_names, same_values = same_layout(counter, generation)
    for dropped in range(keep, len(items)):
        exact = "#count = :count" + (" AND #limit = :limit" if capacity else "")
        exact_values = codec.values(
            count=counts[dropped], **({"limit": limits[dropped]} if capacity else {})
        )
        elements.append(
            {
                "Delete": {
                    "TableName": counter.table,
                    "Key": counter.wire_key(dropped),
                    "ConditionExpression": f"{same} AND {exact}",
                    "ExpressionAttributeNames": {**same_names, **names},
                    "ExpressionAttributeValues": {**same_values, **exact_values},
                }
            }
        )
    moved = sum(limits[keep:]) if capacity else sum(counts[keep:])
    return elements, moved


def resize_protocol(
    counter: ShardedCounter,
    shards: int,
    *,
    capacity: bool = False,
    backoff: retry.Backoff = _BACKOFF,
    attempts: int = 8,
    hints: Hints | None = None,
) -> _core.Steps[Resized]:
    """Change the counter's shard count to ``shards`` while it is used: one read of every shard
    and one transaction that moves units (``capacity=True``, a sharded capacity: places) between
    shards and writes the new layout on every shard, each element conditioned on the layout read.
    The total (a capacity's members and places) never changes; takes, joins, leaves and restocks
    may run throughout (see the module docstring). A transaction cancelled by a concurrent write
    is read and tried again, at most ``attempts`` times (then
    :class:`turnstile_ddb.retry.RetriesExhausted`, each counted ``ResizeConflict``). Already
    ``shards``: no write. ``ValueError`` when the counter has, or would have, more than
    :data:`MAX_SHARDS` (100: one transaction's items). ``hints`` learn the new layout."""
    # A grow in one step, a shrink one dropped shard a step (each step's drop is conditioned on
    # that shard's exact count, which every sale at it changes: one shard at a time gives a busy
    # counter a chance between its sales). The doc is the front door's (sharded.resize).
    _checks.at_least("resize", "attempts", attempts, 1)
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(
            f"resize: shards must be 1 to {MAX_SHARDS} (one transaction), not {shards}"
        )
    hints = hints if hints is not None else Hints()
    done = yield from _step(counter, shards, capacity, backoff, attempts, hints)
    while done.after > shards:
        try:
            step = yield from _step(counter, shards, capacity, backoff, attempts, hints)
        except errors.Retryable:  # this step wrote nothing (lost every race, stayed throttled)
            return done  # the steps made stand: a valid layout, nearer the count asked for
        if not step.steps:  # someone else's resize made the count: nothing more to write
            return dataclasses.replace(done, after=step.after)
        done = Resized(
            done.before,
            step.after,
            step.generation,
            done.moved + step.moved,
            done.items + step.items,
            done.steps + 1,
        )
    return done


def _step(
    counter: ShardedCounter,
    shards: int,
    capacity: bool,
    backoff: retry.Backoff,
    attempts: int,
    hints: Hints,
) -> _core.Steps[Resized]:
    """One resize transaction towards ``shards`` (all the way up, or one shard down)."""
    last: transact.Cancelled | None = None
    for attempt in range(1, attempts + 1):
        items, _ = yield from read_with_protocol(hints.shards.current(counter), backoff)
        learn(hints, counter, dict(enumerate(items)))
        read = Layout(len(items), counter.layout_of(items[0]).generation)
        if read.shards == shards:
            return Resized(read.shards, shards, read.generation, 0, 0, 0)
        if read.shards > MAX_SHARDS:
            raise ValueError(
                f"resize: {counter.base!r} has {read.shards} shards, over {MAX_SHARDS}"
            )
        if not capacity and counter.limit_attr in items[0]:
            # moved as a counter, a capacity's members would move and its places be copied
            raise ValueError(
                f"resize: {counter.base!r} has places ({counter.limit_attr!r}): it is a sharded"
                " capacity, resized with capacity=True"
            )
        grow = shards > read.shards
        layout = Layout(shards if grow else read.shards - 1, read.generation + 1)
        plan = _grow if grow else _shrink
        elements, moved = plan(counter, items, layout, capacity)
        try:
            yield from transact.transact_write_protocol(elements, backoff=backoff, pattern=PATTERN)
        except transact.Cancelled as exc:
            metrics.count("ResizeConflict", pattern=PATTERN)
            hints.saw(counter, "conflict")
            last = exc
            yield from retry.pause(backoff, attempt)
            continue
        metrics.count("ShardResize", pattern=PATTERN)
        hints.shards.relayout(counter, layout)
        hints.sold_out.mark(counter, False)
        return Resized(read.shards, layout.shards, layout.generation, moved, len(elements), 1)
    raise errors.LostEveryRace(attempts, f"writes to {counter.base!r} kept moving its shards", last)


# shown, pickled and documented there (the protocol: its asyncio twin names the sync function)
Resized.__module__ = resize_protocol.__module__ = "turnstile_ddb.sharded"
