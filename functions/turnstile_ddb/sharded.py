"""A counter split over N shard items, so that one hot counter is not one hot partition key.

One item takes at most 1000 write units per second on DynamoDB (a partition's limit). A counter
that every sale decrements therefore caps every sale at that rate, refusals included. Splitting its
value over N items with distinct partition keys (``<base>#0`` .. ``<base>#N-1``) gives N times the
write rate, and each shard stays a plain conditional write on its own share, so the total can
never go below zero: no oversell by construction, whatever the interleaving.

Taking ``q`` units (:func:`take`)::

    0. this process knows every shard's count (:class:`ShardHints`, learned within 100 ms) and
       they add up to fewer than q: refuse without a call (``ShortHint``)
    1. the better of two random shards not last seen holding fewer than q
       (:meth:`ShardHints.choose`: not throttled lately, then the larger count last seen):
                             UpdateItem  SET #count = #count - :q
                             ConditionExpression: attribute_exists(#pk) AND #count >= :q
                             ReturnValuesOnConditionCheckFailure: ALL_OLD
       (throttled or refused: fail over, do not wait on the same hot key)
    2. read the shards whose count this process has not learned within 100 ms:
                             BatchGetItem, ConsistentRead (one call, those keys only)
       the counts known and read add up to fewer than q: refuse (Exhausted)
    3. the shards that hold q, in random order with the ones throttled lately last, each the
       write of step 1; if only a sum of shards holds q: read every shard (unless step 2 just
       did) and take it in one TransactWriteItems over several shards,
       each element  SET #count = #count - :take  ConditionExpression: #count >= :take
    4. back to 2, at most ``rounds`` times; every throttled attempt waits under the backoff.

A refusal is exact up to races and one stated bound. Between restocks a shard's count only goes
down, so a count learned from a consistent read or from a write's answer is an upper bound of the
count at any later moment: when the counts (learned within ``trust_seconds`` = 100 ms, or read
just now) add up to fewer than ``q``, the total was below ``q`` at the refusal. The bound: this is
wrong only if another process restocked the counter (``add``, ``set_total``, ``PATCH``) less than
100 ms after one of those counts was learned; this process's own restocks forget its counts. The
other refusal is the race: ``rounds`` reads that each showed enough but whose every write lost
(:class:`Exhausted` with ``raced=True``, counted as ``ShardRaceRefusal``). A refusal reads at
most the shards this process does not know (all N only when it knows none), and none while it
knows them all. Sold out is cheaper still: a process remembers that a counter read empty and
then goes straight to step 2; and for ``trust_seconds`` (100 ms) after such a read it refuses
without any call (``SoldOutHint``), with the same bound. Sales never depend on the hints: writes
decide.

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
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _contract, codec, errors, metrics, retry, transact

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "ROUNDS",
    "Exhausted",
    "Missing",
    "ShardHints",
    "ShardedCounter",
    "SoldOutHints",
    "Taken",
    "add",
    "hints",
    "read_all",
    "read_items",
    "read_shards",
    "read_with",
    "set_total",
    "shard_hints",
    "shard_items",
    "split",
    "take",
]

PATTERN = "sharded"
ROUNDS = 4


@dataclass(frozen=True)
class ShardedCounter:
    """Shard ``k`` of counter ``base``: ``{key_attr: f"{base}#{k}", **extra_key}`` in ``table``."""

    table: str
    key_attr: str
    base: str
    shards: int
    count_attr: str
    extra_key: tuple[tuple[str, Any], ...] = ()

    def key(self, shard: int) -> dict[str, Any]:
        return {self.key_attr: f"{self.base}#{shard}", **dict(self.extra_key)}

    @property
    def identity(self) -> tuple[Any, ...]:
        """What tells this counter from every other one in the process: its table, key and
        count attribute, not its bare id (an event and a product may share an id)."""
        return (self.table, self.key_attr, self.base, self.extra_key, self.count_attr)

    def wire_key(self, shard: int) -> dict[str, Any]:
        return codec.encode_item(self.key(shard))


class Exhausted(errors.Refused):
    """No shard could serve: ``total`` is the sum last read (``raced``: it covered the request)."""

    def __init__(self, total: int, raced: bool = False) -> None:
        super().__init__(f"{total} left")
        self.total = total
        self.raced = raced


class Missing(errors.NotFound):
    """The counter's shard items do not exist."""


@dataclass(frozen=True)
class Taken:
    shards: tuple[int, ...]  # the shard(s) the units came from
    remaining: int  # what those shards still held after the take (a lower bound of the total)
    calls: int
    item: dict[str, Any]  # the (first) shard's item after the take, or as last read


def split(total: int, shards: int) -> list[int]:
    """``total`` over ``shards`` as evenly as possible (the first ones get the remainder)."""
    share, extra = divmod(total, shards)
    return [share + (1 if k < extra else 0) for k in range(shards)]


def shard_items(counter: ShardedCounter, total: int, **attributes: Any) -> list[dict[str, Any]]:
    """The initial shard items (for the caller's creating transaction)."""
    return [
        {**counter.key(k), counter.count_attr: share, **attributes}
        for k, share in enumerate(split(total, counter.shards))
    ]


@dataclass
class SoldOutHints:
    """Counters this process last read empty, and when (a monotonic clock; a hint, never a lock).

    ``empty``: skip the first write and read at once. ``fresh``: the empty read is younger than
    ``trust_seconds``, so a refusal may be answered from it without any call (see the module
    docstring for the bound this puts on refusals)."""

    trust_seconds: float = 0.1
    clock: Callable[[], float] = time.monotonic
    _empty: dict[tuple[Any, ...], float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def empty(self, counter: ShardedCounter) -> bool:
        return counter.identity in self._empty

    def fresh(self, counter: ShardedCounter) -> bool:
        seen = self._empty.get(counter.identity)
        return seen is not None and self.clock() - seen < self.trust_seconds

    def mark(self, counter: ShardedCounter, empty: bool) -> None:
        with self._lock:
            if empty:
                self._empty[counter.identity] = self.clock()
            else:
                self._empty.pop(counter.identity, None)


hints = SoldOutHints()


@dataclass
class ShardHints:
    """What this process last learned of each shard (a hint, never a lock): the count a write or
    a read returned, and when; and when the shard last throttled.

    Choosing (:meth:`choose`): the first shard of a take is the better of two random ones (power
    of two choices), drawn from the shards not last seen holding fewer than ``q`` units (from all
    when every one was): a shard not throttled within ``throttle_seconds`` beats one that was,
    then the larger known count; so takes stop piling onto a shard that is hot or nearly empty
    while the total has room. Writes still decide: a wrong hint costs one failover, never a sale.

    Knowing (:meth:`known`): counts learned within ``trust_seconds`` (100 ms). Between restocks a
    shard's count only goes down, so a count learned earlier is an upper bound of the count now;
    :func:`take` reads only the shards it does not know, and refuses when the known counts plus
    the ones just read add up to fewer than ``q``. Bound: such a refusal is wrong only if another
    process restocked the counter less than ``trust_seconds`` after a count was learned (this
    process's own :func:`add` and :func:`set_total` forget the counter's counts)."""

    throttle_seconds: float = 1.0
    trust_seconds: float = 0.1
    clock: Callable[[], float] = time.monotonic
    _counts: dict[tuple[tuple[Any, ...], int], tuple[int, float]] = field(default_factory=dict)
    _throttled: dict[tuple[tuple[Any, ...], int], float] = field(default_factory=dict)

    def count(self, counter: ShardedCounter, shard: int, value: int) -> None:
        self._counts[(counter.identity, shard)] = (value, self.clock())

    def throttled(self, counter: ShardedCounter, shard: int) -> None:
        self._throttled[(counter.identity, shard)] = self.clock()

    def forget(self, counter: ShardedCounter) -> None:
        """Drop the counter's known counts (after this process changed its total)."""
        for shard in range(counter.shards):
            self._counts.pop((counter.identity, shard), None)

    def known(self, counter: ShardedCounter) -> dict[int, int]:
        """Shard -> count, for the shards whose count was learned within ``trust_seconds``."""
        now = self.clock()
        fresh = {}
        for shard in range(counter.shards):
            seen = self._counts.get((counter.identity, shard))
            if seen is not None and now - seen[1] < self.trust_seconds:
                fresh[shard] = seen[0]
        return fresh

    def is_hot(self, counter: ShardedCounter, shard: int) -> bool:
        at = self._throttled.get((counter.identity, shard))
        return at is not None and self.clock() - at < self.throttle_seconds

    def _score(self, counter: ShardedCounter, shard: int, quantity: int) -> tuple[bool, bool, int]:
        seen = self._counts.get((counter.identity, shard))
        last = seen[0] if seen is not None else 1 << 30
        return (not self.is_hot(counter, shard), last >= quantity, last)

    def choose(self, counter: ShardedCounter, rand: random.Random, quantity: int = 1) -> int:
        """The better of two distinct random shards, drawn from those not last seen holding fewer
        than ``quantity`` (from all when every shard was)."""
        pool = [
            shard
            for shard in range(counter.shards)
            if self._counts.get((counter.identity, shard), (quantity, 0.0))[0] >= quantity
        ] or list(range(counter.shards))
        if len(pool) == 1:
            return pool[0]
        one, two = rand.sample(pool, 2)
        better = self._score(counter, one, quantity) >= self._score(counter, two, quantity)
        return one if better else two

    def order(self, counter: ShardedCounter, shards: Sequence[int]) -> list[int]:
        """``shards`` with the ones throttled lately last (stable otherwise)."""
        return sorted(shards, key=lambda shard: self.is_hot(counter, shard))


shard_hints = ShardHints()


@_contract.read
def read_items(
    client: DynamoDBClient, counter: ShardedCounter, backoff: retry.Backoff
) -> list[dict[str, Any]]:
    """Every shard item, strongly consistent, in one ``BatchGetItem`` (more only for
    ``UnprocessedKeys``), in shard order. Raises :class:`Missing` when the shards do not exist."""
    return read_with(client, counter, backoff)[0]


def _batch_get(
    client: DynamoDBClient,
    counter: ShardedCounter,
    keys: Sequence[dict[str, Any]],
    backoff: retry.Backoff,
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The items at ``keys`` of the counter's table, strongly consistent, in one
    ``BatchGetItem`` (more only for ``UnprocessedKeys``), by their key values."""
    names = list(counter.key(0))
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    pending: dict[str, Any] = {
        counter.table: {"Keys": [codec.encode_item(key) for key in keys], "ConsistentRead": True}
    }
    while pending:
        response = retry.call(
            lambda request=pending: client.batch_get_item(RequestItems=request),  # type: ignore[misc]
            backoff=backoff,
            idempotent=True,
        )
        for raw in response["Responses"].get(counter.table, []):
            item = codec.decode_item(raw) or {}
            found[tuple(item.get(name) for name in names)] = item
        pending = response.get("UnprocessedKeys") or {}
    return found


def _at(found: dict[tuple[Any, ...], dict[str, Any]], key: dict[str, Any]) -> dict[str, Any] | None:
    return found.get(tuple(key.values()))


@_contract.read
def read_with(
    client: DynamoDBClient,
    counter: ShardedCounter,
    backoff: retry.Backoff,
    extra_keys: Sequence[dict[str, Any]] = (),
) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
    """:func:`read_items`, plus the items at ``extra_keys`` of the same table in the same call
    (``None`` where absent): a membership check that costs no extra round trip."""
    names = list(counter.key(0))
    shard_keys = [counter.key(k) for k in range(counter.shards)]
    extra = [{name: key.get(name) for name in names} for key in extra_keys]
    found = _batch_get(client, counter, [*shard_keys, *extra_keys], backoff)
    shards = [_at(found, key) for key in shard_keys]
    if any(item is None for item in shards):
        raise Missing(counter.base)
    return [item for item in shards if item is not None], [_at(found, key) for key in extra]


@_contract.read
def read_shards(
    client: DynamoDBClient, counter: ShardedCounter, shards: Sequence[int], backoff: retry.Backoff
) -> dict[int, dict[str, Any]]:
    """The items of ``shards`` only (one ``BatchGetItem``, strongly consistent): shard -> item.
    Raises :class:`Missing` when one of them does not exist."""
    found = _batch_get(client, counter, [counter.key(k) for k in shards], backoff)
    items = {k: _at(found, counter.key(k)) for k in shards}
    if any(item is None for item in items.values()):
        raise Missing(counter.base)
    return {k: item for k, item in items.items() if item is not None}


@_contract.read
def read_all(client: DynamoDBClient, counter: ShardedCounter, backoff: retry.Backoff) -> list[int]:
    """Every shard's count (see :func:`read_items`)."""
    return [int(item.get(counter.count_attr, 0)) for item in read_items(client, counter, backoff)]


def _decrement(
    client: DynamoDBClient, counter: ShardedCounter, shard: int, quantity: int
) -> dict[str, Any]:
    response = client.update_item(
        TableName=counter.table,
        Key=counter.wire_key(shard),
        UpdateExpression="SET #count = #count - :q",
        ConditionExpression="attribute_exists(#pk) AND #count >= :q",
        ExpressionAttributeNames={"#pk": counter.key_attr, "#count": counter.count_attr},
        ExpressionAttributeValues=codec.values(q=quantity),
        ReturnValues="ALL_NEW",
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    return codec.decode_item(response["Attributes"]) or {}


def _decrement_many(client: DynamoDBClient, counter: ShardedCounter, takes: dict[int, int]) -> None:
    client.transact_write_items(
        TransactItems=[
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
        ClientRequestToken=transact.new_token(),
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


@_contract.write
def take(
    client: DynamoDBClient,
    counter: ShardedCounter,
    quantity: int,
    *,
    backoff: retry.Backoff,
    rand: random.Random | None = None,
    sold_out: SoldOutHints = hints,
    rounds: int = ROUNDS,
    known: ShardHints | None = None,
) -> Taken:
    """Take ``quantity`` units from some shard(s) (see the module docstring), or raise
    :class:`Exhausted` / :class:`Missing`; :class:`turnstile_ddb.retry.RetriesExhausted` when every
    shard stayed throttled for the whole backoff. ``known``: the shard hints (this process's
    :data:`shard_hints` unless given)."""
    rand = rand or random.Random()
    known = known if known is not None else shard_hints
    if sold_out.fresh(counter):
        metrics.count("SoldOutHint", pattern=PATTERN)
        raise Exhausted(0)
    fresh = known.known(counter)
    if len(fresh) == counter.shards and sum(fresh.values()) < quantity:
        metrics.count("ShortHint", pattern=PATTERN)
        raise Exhausted(sum(fresh.values()))
    calls = 0
    throttled_rounds = 0
    candidates: list[int] = []
    if not sold_out.empty(counter):
        candidates = [known.choose(counter, rand, quantity)]
    saw_enough = False
    total = 0
    for round_ in range(rounds + 1):
        throttled = False
        answered: dict[int, int] = {}  # counts the refused writes of this round answered
        for shard in candidates:
            calls += 1
            try:
                item = _decrement(client, counter, shard, quantity)
                known.count(counter, shard, int(item[counter.count_attr]))
                return Taken((shard,), int(item[counter.count_attr]), calls, item)
            except retry.MAYBE_APPLIED_ERRORS as exc:
                raise retry.OutcomeUnknown(str(exc)) from exc
            except retry.NOT_SENT_ERRORS:
                throttled = True
                continue
            except ClientError as exc:
                if retry.is_throttle(exc):
                    metrics.count("Throttle", pattern=PATTERN)
                    known.throttled(counter, shard)
                    throttled = True
                elif not retry.condition_failed(exc):
                    raise
                elif (old := codec.old_item(exc)) is None:
                    raise Missing(counter.base) from exc
                else:
                    answered[shard] = int(old.get(counter.count_attr, 0))
                    known.count(counter, shard, answered[shard])
                metrics.count("ShardFailover", pattern=PATTERN)
        if throttled:
            throttled_rounds += 1
            if throttled_rounds >= backoff.attempts:
                raise retry.RetriesExhausted(throttled_rounds, RuntimeError("shards throttled"))
            backoff.pause(throttled_rounds)
        if round_ == rounds:
            break
        # Read only what is not known: the counts the writes just answered, and on the first
        # read those learned within the trust window too (each an upper bound of the count now:
        # counts only go down between restocks). Later rounds read the rest again, so a refusal
        # for lost races always rests on counts read or answered in that round.
        counts = {**(known.known(counter) if round_ == 0 else {}), **answered}
        unknown = [k for k in range(counter.shards) if k not in counts]
        items: dict[int, dict[str, Any]] = {}
        for _ in range(2):  # twice only when a transaction over several shards needs them all
            if unknown:
                calls += 1
                items = read_shards(client, counter, unknown, backoff)
                for shard, item in items.items():
                    counts[shard] = int(item.get(counter.count_attr, 0))
                    known.count(counter, shard, counts[shard])
            total = sum(counts.values())
            sold_out.mark(counter, total == 0)
            if total < quantity:
                metrics.count("SoldOutRead", pattern=PATTERN)
                raise Exhausted(total)
            saw_enough = True
            candidates = [k for k, count in counts.items() if count >= quantity]
            if candidates or len(items) == counter.shards:
                break
            # Only a sum of shards holds q: take it from counts (and items) all read just now.
            unknown = list(range(counter.shards))
        rand.shuffle(candidates)
        candidates = known.order(counter, candidates)
        if candidates:
            continue
        ordered = [counts[k] for k in range(counter.shards)]
        takes = spread(ordered, quantity, rand)
        calls += 1
        try:
            _decrement_many(client, counter, takes)
        except retry.MAYBE_APPLIED_ERRORS as exc:
            raise retry.OutcomeUnknown(str(exc)) from exc
        except ClientError as exc:
            code = retry.error_code(exc)
            if code != "TransactionCanceledException" and not retry.is_throttle(exc):
                raise
            metrics.count("ShardFailover", pattern=PATTERN)
            continue
        for shard, taken in takes.items():
            known.count(counter, shard, ordered[shard] - taken)
        left = sum(ordered[k] - t for k, t in takes.items())
        return Taken(tuple(takes), left, calls, items[next(iter(takes))])
    metrics.count("ShardRaceRefusal", pattern=PATTERN)
    raise Exhausted(total if saw_enough else 0, raced=saw_enough)


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


@_contract.write
def set_total(
    client: DynamoDBClient,
    counter: ShardedCounter,
    total: int,
    *,
    backoff: retry.Backoff,
    also: Callable[[], Sequence[dict[str, Any]]] = lambda: (),
    stamp: dict[str, Any] | None = None,
    attempts: int = 8,
) -> list[int]:
    """Make the shards add up to exactly ``total`` (split evenly), atomically with ``also()``'s
    elements. Each shard is conditioned on the count just read; a sale in between cancels the
    transaction and it is read and tried again (at most ``attempts`` times, then
    :class:`turnstile_ddb.retry.RetriesExhausted`). A failed ``also`` element raises
    :class:`turnstile_ddb.transact.Cancelled` for the caller to read (its index is 0). ``stamp``'s
    attributes are set on every shard in the same transaction (a catalogue version, say)."""
    target = split(total, counter.shards)
    names, sets, stamped = _stamp(stamp)
    for attempt in range(1, attempts + 1):
        seen = read_all(client, counter, backoff)
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
            transact.transact_write(client, elements, backoff=backoff)
            hints.mark(counter, total == 0)
            shard_hints.forget(counter)
            return target
        except transact.Cancelled as exc:
            if any(exc.failed_at(i) for i in range(offset)):
                raise
            metrics.count("ShardConflict", pattern=PATTERN)
            backoff.pause(attempt)
    raise retry.RetriesExhausted(attempts, RuntimeError("sales kept changing the shards"))


@_contract.write
def add(
    client: DynamoDBClient,
    counter: ShardedCounter,
    units: int,
    *,
    backoff: retry.Backoff,
    also: Sequence[dict[str, Any]] = (),
    stamp: dict[str, Any] | None = None,
    increments: Sequence[str] = (),
) -> None:
    """Add ``units`` spread over the shards, atomically with ``also`` (no read needed); every
    shard is written, so ``stamp`` reaches all of them (SET), and each attribute of
    ``increments`` is incremented by one on every shard (ADD: commutes with concurrent adds, so
    a copy of a parent's counter stays equal to it when the parent is incremented alongside)."""
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
    transact.transact_write(client, elements, backoff=backoff)
    hints.mark(counter, False)
    shard_hints.forget(counter)
