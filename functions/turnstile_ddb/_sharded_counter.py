"""A sharded counter's layout (:class:`ShardedCounter`), its errors and its consistent reads.

Private: the public names are :mod:`turnstile_ddb.sharded`'s (``sharded.ShardedCounter`` and the
rest), whose docstring says how the counter works. The reads live here, as protocols
(:mod:`turnstile_ddb._core`) below the take's: the public reads, a take's and a sharded
capacity's membership check all use them. A read of more than 100 keys goes in pages, sent
together (:func:`side_by_side`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from turnstile_ddb import _checks, _contract, _core, capacity, codec, errors, retry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_BACKOFF = retry.Backoff()
PATTERN = "sharded"  # the metrics' pattern
T = TypeVar("T")


@dataclass(frozen=True)
class ShardedCounter:
    """Shard ``k`` of counter ``base``: ``{key_attr: f"{base}#{k}", **extra_key}`` in ``table``.

    The stored attribute names are fields: ``count_attr`` holds each shard's share;
    ``limit_attr`` and ``version_attr`` are read and written only by a sharded capacity
    (:func:`join`, :func:`leave`), and ``shard_attr`` names the member item's record of the
    shard it joined. A resize (:func:`resize`) writes ``shards_attr`` (the shard count now) and
    ``layout_attr`` (a generation, one more with every resize) on every shard: a counter never
    resized has neither, and its ``shards`` is the one it was created with.

    ``shards`` is the count the caller believes: the calls learn the current one from the shards
    themselves (see :class:`Layout`) and remember it in the caller's hints."""

    table: str
    key_attr: str
    base: str
    shards: int
    count_attr: str
    extra_key: tuple[tuple[str, Any], ...] = ()
    limit_attr: str = "limit"
    version_attr: str = "version"
    shard_attr: str = "shard"
    shards_attr: str = "shards"
    layout_attr: str = "layout"

    def __post_init__(self) -> None:
        extra = [(f"extra_key[{name!r}]", name) for name, _ in self.extra_key]
        _checks.distinct_names("ShardedCounter", [*_checks.attr_fields(self), *extra])
        _checks.at_least("ShardedCounter", "shards", self.shards, 1)

    def key(self, shard: int) -> dict[str, Any]:
        """Shard ``shard``'s primary key as plain Python values (see :meth:`wire_key`)."""
        return {self.key_attr: f"{self.base}#{shard}", **dict(self.extra_key)}

    def wire_key(self, shard: int) -> dict[str, Any]:
        """Shard ``shard``'s primary key in DynamoDB's typed form (``{"S": ...}``)."""
        return codec.encode_item(self.key(shard))

    @property
    def identity(self) -> tuple[Any, ...]:
        """What tells this counter from every other one in the process: its table, key and
        count attribute, not its bare id (an event and a product may share an id)."""
        return (self.table, self.key_attr, self.base, self.extra_key, self.count_attr)

    def layout_of(self, item: Mapping[str, Any]) -> Layout:
        """The layout a shard item belongs to (never resized: ``shards`` as built, generation 0)."""
        return Layout(
            int(item.get(self.shards_attr, self.shards)), int(item.get(self.layout_attr, 0))
        )

    def with_shards(self, shards: int) -> ShardedCounter:
        """This counter with ``shards`` shards (the same counter, another layout)."""
        return self if shards == self.shards else replace(self, shards=shards)

    def capacity_row(self, shard: int) -> capacity.CapacityRow:
        """Shard ``shard`` as a :class:`turnstile_ddb.capacity.CapacityRow` (for :func:`join`)."""
        return capacity.CapacityRow(
            table=self.table,
            key=self.key(shard),
            count_attr=self.count_attr,
            limit_attr=self.limit_attr,
            version_attr=self.version_attr,
        )


@dataclass(frozen=True, order=True)
class Layout:
    """How many shards a counter has (``shards``) as of resize number ``generation``.

    Every resize writes the new layout on every shard it keeps or creates, in the transaction
    that moves the units, each element conditioned on the generation it read; the shards it
    drops are deleted there too. So shard items exist exactly for ``k < shards``, and two shards
    read showing the same generation were read with no resize between them."""

    shards: int
    generation: int


def same_layout(
    counter: ShardedCounter, generation: int
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A condition that a shard is still at layout ``generation`` (a counter never resized has
    no ``layout_attr``): the expression, its names and its values."""
    names = {"#layout": counter.layout_attr}
    if generation == 0:
        return "attribute_not_exists(#layout)", names, {}
    return "#layout = :layout", names, codec.values(layout=generation)


def shard_update(
    counter: ShardedCounter,
    shard: int,
    update: str,
    condition: str,
    names: dict[str, str],
    values: dict[str, Any],
) -> dict[str, Any]:
    """The ``Update`` element of one shard's write in a transaction (a restock's, a resize's)."""
    return {
        "Update": {
            "TableName": counter.table,
            "Key": counter.wire_key(shard),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


class Moved(errors.Retryable):
    """A shard a read named is gone (a resize dropped it): nothing was written; read the
    layout again. Raised inside the protocols, which do so; never to a caller."""


class Exhausted(errors.Refused):
    """No shard could serve: ``total`` is the sum last read (``raced``: it covered the request)."""

    def __init__(self, total: int, raced: bool = False) -> None:
        super().__init__(f"{total} left")
        self.total = total
        self.raced = raced


class Full(Exhausted):
    """No shard of a sharded capacity had room: ``count`` members of ``limit`` when last read
    (``raced``: the read showed room, but every join at it lost)."""

    def __init__(self, count: int, limit: int, raced: bool = False) -> None:
        super().__init__(limit - count, raced)
        self.count = count
        self.limit = limit


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


# The most keys one BatchGetItem may name: more shards are read in pages, sent together.
PAGE = 100


def side_by_side(protocols: Sequence[_core.Steps[T]]) -> _core.Steps[list[T]]:
    """Run independent ``protocols`` together: the requests they have pending at the same
    moment go out as one :class:`~turnstile_ddb._core.Gather` (one after another through the
    synchronous driver, at once through the asyncio one); their other effects (a clock read, a
    sleep before a retry) are passed on, one protocol after another. Their answers, in order;
    the first error one of them raises is raised."""
    answers: dict[int, T] = {}
    replies: dict[int, tuple[Any, Exception | None]] = dict.fromkeys(
        range(len(protocols)), (None, None)
    )
    while replies:
        pending: dict[int, _core.Call] = {}
        for i, (answer, failure) in replies.items():
            try:
                effect = _advance(protocols[i], answer, failure)
                while not isinstance(effect, _core.Call):
                    try:
                        answer, failure = (yield effect), None
                    except Exception as exc:  # noqa: BLE001 - the protocol's to decide
                        answer, failure = None, exc
                    effect = _advance(protocols[i], answer, failure)
            except StopIteration as stop:
                answers[i] = stop.value
            else:
                pending[i] = effect
        sent = (yield _core.Gather(tuple(pending.values()))) if pending else []
        replies = {
            i: (None, reply) if isinstance(reply, Exception) else (reply, None)
            for i, reply in zip(pending, sent, strict=True)
        }
    return [answers[i] for i in range(len(protocols))]


def _advance(protocol: _core.Steps[T], answer: Any, failure: Exception | None) -> _core.Effect:
    return protocol.send(answer) if failure is None else protocol.throw(failure)


def _batch_get(
    counter: ShardedCounter, keys: Sequence[dict[str, Any]], backoff: retry.Backoff
) -> _core.Steps[dict[tuple[Any, ...], dict[str, Any]]]:
    """The items at ``keys`` of the counter's table, strongly consistent, by their key values:
    one ``BatchGetItem`` per :data:`PAGE` keys, the pages sent together (:func:`side_by_side`),
    each retried as a read, then what came back unprocessed, together again."""
    names = list(counter.key(0))
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    pending: list[dict[str, Any]] = [
        {counter.table: {"Keys": [codec.encode_item(k) for k in page], "ConsistentRead": True}}
        for page in (keys[start : start + PAGE] for start in range(0, len(keys), PAGE))
    ]
    while pending:
        responses = yield from side_by_side(
            [
                retry.retrying(
                    _core.Call("batch_get_item", {"RequestItems": request}),
                    backoff=backoff,
                    idempotent=True,
                )
                for request in pending
            ]
        )
        for response in responses:
            for raw in response["Responses"].get(counter.table, []):
                item = codec.decode_item(raw) or {}
                found[tuple(item.get(name) for name in names)] = item
        pending = [r["UnprocessedKeys"] for r in responses if r.get("UnprocessedKeys")]
    return found


def _at(found: dict[tuple[Any, ...], dict[str, Any]], key: dict[str, Any]) -> dict[str, Any] | None:
    return found.get(tuple(key.values()))


# A layout may change between the pages of one read: read again, at most this many times (the
# first at once, each later one after a pause of the read's backoff: a shrink is one step per
# dropped shard, and a reader chasing it read for read can lose every race on a busy machine).
RELAYOUT_READS = 8


def read_with_protocol(
    counter: ShardedCounter,
    backoff: retry.Backoff = _BACKOFF,
    extra_keys: Sequence[dict[str, Any]] = (),
) -> _core.Steps[tuple[list[dict[str, Any]], list[dict[str, Any] | None]]]:
    """Every shard item of the counter's current layout, in shard order (as many as it has
    shards: ``counter.shards`` is only where the read starts), plus the items at ``extra_keys``
    of the same table in the same call (``None`` where absent): a membership check that costs
    no extra round trip. A shard missing, or shards showing different layouts, means a resize
    ran meanwhile: read again at the newest layout seen. Raises :class:`Missing` when shard 0
    does not exist (it is never dropped)."""
    names = list(counter.key(0))
    extra = [{name: key.get(name) for name in names} for key in extra_keys]
    for attempt in range(RELAYOUT_READS):
        if attempt > 1:
            yield from retry.pause(backoff, attempt - 1)
        shard_keys = [counter.key(k) for k in range(counter.shards)]
        found = yield from _batch_get(counter, [*shard_keys, *extra_keys], backoff)
        shards = [_at(found, key) for key in shard_keys]
        present = [item for item in shards if item is not None]
        if shards[0] is None:
            raise Missing(counter.base)
        layouts = {counter.layout_of(item) for item in present}
        newest = max(layouts)
        if len(present) == len(shards) and layouts == {Layout(counter.shards, newest.generation)}:
            return present, [_at(found, key) for key in extra]
        counter = counter.with_shards(newest.shards)
    raise errors.LostEveryRace(
        RELAYOUT_READS, f"resizes of {counter.base!r} kept moving the shards"
    )


def read_shards_protocol(
    counter: ShardedCounter, shards: Sequence[int], backoff: retry.Backoff = _BACKOFF
) -> _core.Steps[dict[int, dict[str, Any]]]:
    """The items of ``shards`` only (strongly consistent): shard -> item. Raises
    :class:`Missing` when shard 0 is asked for and does not exist, :class:`Moved` when another
    asked for is gone (a resize dropped it)."""
    found = yield from _batch_get(counter, [counter.key(k) for k in shards], backoff)
    items = {k: _at(found, counter.key(k)) for k in shards}
    if items.get(0, {}) is None:
        raise Missing(counter.base)
    if any(item is None for item in items.values()):
        raise Moved(counter.base)
    return {k: item for k, item in items.items() if item is not None}


@_contract.read
def _read_with(
    client: DynamoDBClient,
    counter: ShardedCounter,
    backoff: retry.Backoff = _BACKOFF,
    extra_keys: Sequence[dict[str, Any]] = (),
) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
    """:func:`read_with_protocol`, run (the deprecated ``sharded.read_with``)."""
    return _core.run(client, read_with_protocol(counter, backoff, extra_keys))


@_contract.read
def _read_shards(
    client: DynamoDBClient,
    counter: ShardedCounter,
    shards: Sequence[int],
    backoff: retry.Backoff = _BACKOFF,
) -> dict[int, dict[str, Any]]:
    """:func:`read_shards_protocol`, run (the deprecated ``sharded.read_shards``)."""
    return _core.run(client, read_shards_protocol(counter, shards, backoff))


for _public in (ShardedCounter, Layout, Exhausted, Full, Missing, Taken, split, shard_items):
    _public.__module__ = "turnstile_ddb.sharded"  # shown, pickled and documented there
