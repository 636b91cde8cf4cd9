"""Events and registrations: a capacity that concurrent sign-ups cannot overrun.

Table layout (one table, partition key ``eventId``, sort key ``sk``):

* the event item, ``sk = "EVENT"``: ``name``, ``capacity``, ``registered`` (how many hold a seat)
  and ``version`` (+1 on every change). It is the materialized lock: every registration and every
  cancellation changes it, so two of them can never both decide on the same stale count.
* one registration item per user, ``sk = "REG#<userId>"``: ``userId``, ``registeredAt`` and, when
  the registration came from an asynchronous request, ``requestId``.
* GSI ``byUser`` (partition ``userId``, sort ``eventId``, all attributes) lists a user's
  registrations without a scan. Only registration items have ``userId``, so the index is sparse.
  It is eventually consistent: a registration shows there shortly after it commits.

Registering is :func:`turnstile_ddb.capacity.join` (event update ``registered < capacity`` plus
registration put ``attribute_not_exists``, in one transaction); cancelling is
:func:`turnstile_ddb.capacity.leave`. The exact conditions are written out in that module.

Sharded events (``shards`` > 1 at creation, for sign-ups past one item's write limit): the event
item keeps ``name``, ``capacity``, ``shards`` and ``version`` but no ``registered``; the seats live
in ``shards`` counter items ``eventId = "<eventId>#<k>", sk = "SHARD"``, each a
:class:`turnstile_ddb.capacity.CapacityRow` over its share of the capacity, together a sharded
capacity of :mod:`turnstile_ddb.sharded`. A registration item moves to ``eventId =
"<eventId>#<h>"`` with ``h`` a fixed hash of the user id (so registrations are spread over N keys
too, and a user's registration has exactly one possible key: ``ALREADY_REGISTERED`` stays exact)
and records the counter shard it took (``shard``), which a cancellation gives back. A
registration (:func:`turnstile_ddb.sharded.join`) joins a random shard, fails over on ``Full`` to
the shards one ``BatchGetItem`` shows with room (the same call reads the user's registration
key), and is ``EVENT_FULL`` only when that read shows every shard full. The ``byUser`` index
shows ``eventId`` with the ``#<h>`` suffix, which :func:`_registration` strips (``#`` cannot
occur in ids).

Events whose shard count follows the load (``adaptive`` at creation): the same sharded capacity,
created with ``shards`` counter shards (1 unless asked), the event item marked ``adaptive``; after
each sharded sign-up and cancellation the service's resizer decides whether to grow or shrink the
counter shards (as for products, :mod:`service.domain.products`: a failed resize is counted and
logged and never fails the request). A resize moves room between counter shards, never members:
a registration keeps the key it was written under, because its hash is taken over a number fixed
at creation (``spread``: the event item's ``shards`` for an event created sharded,
:data:`ADAPTIVE_SPREAD` for an adaptive one), never over the current shard count; an adaptive
event's registrations are under keys of their own, ``<eventId>#r<h>``, so a sign-up writes its
counter shard's key once, not twice when its hash falls on that shard.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from service import config
from service.domain.errors import AlreadyExists, AlreadyRegistered, EventFull, NotFound
from service.domain.resizing import Resizes, after_request, is_sharded
from service.lru import LRU
from turnstile_ddb import capacity, codec, creation, retry, sharded, transact, versioned

EVENT_SK = "EVENT"
REGISTRATION_PREFIX = "REG#"


def registration_sk(user_id: str) -> str:
    return f"{REGISTRATION_PREFIX}{user_id}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _event(item: dict[str, Any]) -> dict[str, Any]:
    return {key: item[key] for key in ("eventId", "name", "capacity", "registered", "version")}


def _public(item: dict[str, Any]) -> dict[str, Any]:
    """A sharded event as the API answers it."""
    public = _event(item)
    if item["shards"] > 1:
        public["shards"] = item["shards"]
    if item.get("adaptive"):
        public["adaptive"] = True
    return public


def _registration(item: dict[str, Any]) -> dict[str, Any]:
    public = {key: item[key] for key in ("eventId", "userId", "registeredAt")}
    public["eventId"] = str(public["eventId"]).split("#", 1)[0]
    return public


SHARD_SK = "SHARD"
# Registration keys of an adaptive event: a user's registration is under one of this many keys,
# ``<eventId>#r<h>``, whatever the counter's shard count becomes, and never on a counter shard's
# key (``<eventId>#<k>``), which every sign-up writes already.
ADAPTIVE_SPREAD = 16
ADAPTIVE_PREFIX = "r"


@dataclass(frozen=True)
class Layout:
    """What ``Events.shard_counts`` keeps of a sharded event: its counter's shards at creation
    (the count a caller starts from) and its registrations' ``spread`` (fixed)."""

    shards: int
    spread: int
    prefix: str = ""  # registration keys: "<eventId>#<prefix><h>"

    @classmethod
    def of(cls, item: dict[str, Any]) -> Layout:
        """An event item's layout (:data:`ONE_ITEM` for an event that is one item)."""
        if not is_sharded(item):
            return ONE_ITEM
        shards = int(item["shards"])
        if item.get("adaptive"):
            return cls(shards, ADAPTIVE_SPREAD, ADAPTIVE_PREFIX)
        return cls(shards, shards)


ONE_ITEM = Layout(shards=0, spread=0)  # an event that is one item: no shards


def user_bucket(user_id: str, shards: int) -> int:
    """A fixed hash (not Python's per-process ``hash``) of the user id, modulo ``shards``."""
    return zlib.crc32(user_id.encode()) % shards


def already_registered(event_id: str, user_id: str) -> AlreadyRegistered:
    return AlreadyRegistered(f"user {user_id!r} is already registered for event {event_id!r}")


@dataclass
class Events:
    client: Any
    table: str
    backoff: retry.Backoff = field(default_factory=config.call_backoff)
    transactions: retry.Backoff = field(default_factory=config.registration_backoff)
    clock: Callable[[], str] = now_iso
    # learnt (never changes: see Layout); the most recently used only (a forgotten one is learnt
    # again)
    shard_counts: LRU[str, Layout] = field(default_factory=lambda: LRU(config.SHARD_COUNTS_KEPT))
    # What this process learnt of sharded events' shards (runtime.sharded_hints in Lambda).
    hints: sharded.Hints = field(default_factory=sharded.Hints)
    # The random choices of sharded sign-ups (which shard first, the failover order): inject a
    # seeded one for reproducible runs, as Products takes one.
    rand: random.Random = field(default_factory=random.Random)
    # Decides after each sharded sign-up or cancellation whether to resize the event's counter
    # shards (none: never).
    resizer: Resizes | None = None

    def _event_key(self, event_id: str) -> dict[str, Any]:
        return {"eventId": event_id, "sk": EVENT_SK}

    def counter(self, event_id: str) -> capacity.CapacityRow:
        return capacity.CapacityRow(
            table=self.table,
            key=self._event_key(event_id),
            count_attr="registered",
            limit_attr="capacity",
            version_attr="version",
        )

    def _member(self, event_id: str, user_id: str, **attributes: Any) -> capacity.Member:
        return capacity.Member(
            table=self.table,
            key={"eventId": event_id, "sk": registration_sk(user_id)},
            item={"userId": user_id, **attributes},
        )

    def shards_of(self, event_id: str, shards: int) -> sharded.ShardedCounter:
        return sharded.ShardedCounter(
            self.table,
            "eventId",
            event_id,
            shards,
            "registered",
            (("sk", SHARD_SK),),
            limit_attr="capacity",
        )

    def _sharded_member(
        self, event_id: str, layout: Layout, user_id: str, **attributes: Any
    ) -> capacity.Member:
        bucket = user_bucket(user_id, layout.spread)
        return capacity.Member(
            table=self.table,
            key={"eventId": f"{event_id}#{layout.prefix}{bucket}", "sk": registration_sk(user_id)},
            item={"userId": user_id, **attributes},
        )

    def create(
        self, event_id: str, name: str, capacity_: int, shards: int = 1, adaptive: bool = False
    ) -> dict[str, Any]:
        if shards > 1 or adaptive:
            return self._create_sharded(event_id, name, capacity_, shards, adaptive)
        item = {
            **self._event_key(event_id),
            "name": name,
            "capacity": capacity_,
            "registered": 0,
            "version": 1,
        }
        try:
            creation.create_if_absent(
                self.client, table=self.table, item=item, key_attr="eventId", backoff=self.backoff
            )
        except creation.AlreadyExists as exc:
            raise AlreadyExists(f"event {event_id!r} already exists") from exc
        self.shard_counts.put(event_id, ONE_ITEM)
        return _event(item)

    def _create_sharded(
        self, event_id: str, name: str, capacity_: int, shards: int, adaptive: bool
    ) -> dict[str, Any]:
        parent = {
            **self._event_key(event_id),
            "name": name,
            "capacity": capacity_,
            "shards": shards,
            "version": 1,
        }
        if adaptive:
            parent["adaptive"] = True
        counters = [
            {
                "eventId": f"{event_id}#{k}",
                "sk": SHARD_SK,
                "registered": 0,
                "capacity": share,
                "version": 1,
            }
            for k, share in enumerate(sharded.split(capacity_, shards))
        ]
        created = [parent, *counters]
        elements = [creation.put_new_op(self.table, item, "eventId") for item in created]
        try:
            transact.transact_write(self.client, elements, backoff=self.backoff)
        except transact.Cancelled as exc:
            raise AlreadyExists(f"event {event_id!r} already exists") from exc
        self.shard_counts.put(event_id, Layout.of(parent))
        return _public({**parent, "registered": 0})

    def _item(self, event_id: str) -> dict[str, Any]:
        item = versioned.read(self.client, self.table, self._event_key(event_id), self.backoff)
        if item is None:
            raise NotFound(f"no event {event_id!r}")
        return item

    def get(self, event_id: str) -> dict[str, Any]:
        item = self._item(event_id)
        layout = Layout.of(item)
        self.shard_counts.put(event_id, layout)
        if layout == ONE_ITEM:
            return _event(item)
        counts = sharded.read_all(
            self.client, self.shards_of(event_id, layout.shards), self.backoff
        )
        # the current layout's shards (a resize may have changed the count at creation)
        return _public({**item, "registered": sum(counts), "shards": len(counts)})

    def register(
        self,
        event_id: str,
        user_id: str,
        *,
        also: Sequence[dict[str, Any]] = (),
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Take a seat for ``user_id`` in one transaction. ``also`` adds the caller's own
        transaction elements; if one of them fails, :class:`turnstile_ddb.transact.Cancelled` is
        raised unchanged for the caller to read."""
        registered_at = self.clock()
        extra = {"registeredAt": registered_at}
        if request_id is not None:
            extra["requestId"] = request_id
        layout = self.shard_counts.get(event_id)
        if layout is not None and layout != ONE_ITEM:
            self._register_sharded(event_id, layout, user_id, extra, also)
            return {"eventId": event_id, "userId": user_id, "registeredAt": registered_at}
        try:
            capacity.join(
                self.client,
                self.counter(event_id),
                self._member(event_id, user_id, **extra),
                backoff=self.transactions,
                also=also,
            )
        except capacity.AlreadyMember as exc:
            raise already_registered(event_id, user_id) from exc
        except capacity.NoCounter as exc:
            raise NotFound(f"no event {event_id!r}") from exc
        except capacity.Full as exc:
            learnt = Layout.of(exc.counter)
            if learnt != ONE_ITEM:  # learnt: this event is sharded
                self.shard_counts.put(event_id, learnt)
                return self.register(event_id, user_id, also=also, request_id=request_id)
            raise EventFull(
                f"event {event_id!r} is full",
                capacity=exc.counter["capacity"],
                registered=exc.counter["registered"],
            ) from exc
        return {"eventId": event_id, "userId": user_id, "registeredAt": registered_at}

    def _register_sharded(
        self,
        event_id: str,
        layout: Layout,
        user_id: str,
        extra: dict[str, Any],
        also: Sequence[dict[str, Any]],
    ) -> None:
        """Join one shard of the event's sharded capacity (:func:`turnstile_ddb.sharded.join`:
        a random shard, then the shards one read shows with room; see the module docstring)."""
        counter = self.shards_of(event_id, layout.shards)
        try:
            self._join_sharded(counter, layout, user_id, extra, also)
        finally:
            after_request(self.resizer, counter, capacity=True)

    def _join_sharded(
        self,
        counter: sharded.ShardedCounter,
        layout: Layout,
        user_id: str,
        extra: dict[str, Any],
        also: Sequence[dict[str, Any]],
    ) -> None:
        event_id = counter.base
        try:
            sharded.join(
                self.client,
                counter,
                self._sharded_member(event_id, layout, user_id, **extra),
                sharded.TakeOptions(backoff=self.backoff, hints=self.hints, rand=self.rand),
                transactions=self.transactions,
                also=also,
            )
        except capacity.AlreadyMember as exc:
            raise already_registered(event_id, user_id) from exc
        except sharded.Missing as exc:
            raise NotFound(f"no event {event_id!r}") from exc
        except sharded.Full as exc:
            if exc.raced:
                raise EventFull(
                    f"event {event_id!r}: every shard with room was taken meanwhile; retry"
                ) from exc
            raise EventFull(
                f"event {event_id!r} is full", capacity=exc.limit, registered=exc.count
            ) from exc

    def unregister(self, event_id: str, user_id: str) -> None:
        """Give the seat back: the reverse transaction (registration gone, ``registered - 1``)."""
        layout = self.shard_counts.get(event_id)
        if layout is None:
            layout = Layout.of(self._item(event_id))
            self.shard_counts.put(event_id, layout)
        if layout != ONE_ITEM:
            self._unregister_sharded(event_id, layout, user_id)
            return
        try:
            capacity.leave(
                self.client,
                self.counter(event_id),
                self._member(event_id, user_id),
                backoff=self.transactions,
            )
        except capacity.NotMember as exc:
            raise NotFound(f"user {user_id!r} is not registered for event {event_id!r}") from exc
        except capacity.NoCounter as exc:
            raise NotFound(f"no event {event_id!r}") from exc

    def _unregister_sharded(self, event_id: str, layout: Layout, user_id: str) -> None:
        counter = self.shards_of(event_id, layout.shards)
        try:
            sharded.leave(
                self.client,
                counter,
                self._sharded_member(event_id, layout, user_id),
                sharded.TakeOptions(backoff=self.backoff, hints=self.hints, rand=self.rand),
                transactions=self.transactions,
            )
        except (capacity.NotMember, capacity.NoCounter) as exc:
            raise NotFound(f"user {user_id!r} is not registered for event {event_id!r}") from exc
        finally:
            after_request(self.resizer, counter, capacity=True)

    def registrations_of(self, user_id: str) -> list[dict[str, Any]]:
        """Every registration of ``user_id``, by event id (from the eventually consistent GSI)."""
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "IndexName": config.EVENTS_BY_USER_INDEX,
                "KeyConditionExpression": "userId = :user",
                "ExpressionAttributeValues": codec.values(user=user_id),
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            response = retry.call(
                lambda kwargs=kwargs: self.client.query(**kwargs),  # type: ignore[misc]
                backoff=self.backoff,
                idempotent=True,
            )
            items.extend(_registration(codec.decode_item(raw) or {}) for raw in response["Items"])
            start = response.get("LastEvaluatedKey")
            if not start:
                return items
