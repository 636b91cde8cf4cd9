"""The lease item's schema, shared by :mod:`turnstile_ddb.lease` and its queue.

Private: :mod:`turnstile_ddb.lease` and :mod:`turnstile_ddb.lease_queue` write and read the same
item (a plain acquisition and a queued claim make the very same write, so fences strictly increase
across both), so its attribute names, the condition fragments both issue, the lease-duration
computation and that one acquisition write live here, once, and neither module reaches into the
other's private members. What users configure (:class:`LeaseAttributes`) and catch
(:class:`NoTimeLeft`) is public as ``turnstile_ddb.lease.LeaseAttributes`` and
``turnstile_ddb.lease.NoTimeLeft``.

Two clocks on the item, never to be confused:

* ``expires_at_ms`` (stored ``expiresAt``): the lease's expiry, epoch **milliseconds** by the
  acquirer's clock. It alone decides ownership, through the acquire and guard conditions
  (:mod:`turnstile_ddb.lease`).
* ``ttl_attribute`` (stored ``reapAt``): the table's DynamoDB TTL attribute, epoch **seconds**. It
  only cleans up (the queue's tombstone rows); no lease item is ever written with it.

Every expression is written with fixed placeholders (``#expiresAt``, ``#head``, ...); the
attribute each placeholder names comes from the table's :class:`LeaseAttributes`, so a table with
other stored names runs the same expressions. Items the library hands back (``Lease.previous``,
``LeaseLost.current``) carry the default names whatever the table stores.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from turnstile_ddb import _checks, _core, codec, errors, retry

PATTERN = "lease"


@dataclass(frozen=True)
class LeaseAttributes:
    """The names a lease table stores its lease items' attributes under (the defaults are the
    names every earlier version wrote; give other names for a table laid out otherwise, as
    Powertools' persistence layers allow). The partition key is ``Leases.key_attr``.

    ``expires_at_ms`` is the lease's expiry (epoch ms), which decides ownership;
    ``ttl_attribute`` is the table's TTL attribute (epoch s), which only cleans up rows that are
    not lease items. The rest: see :mod:`turnstile_ddb.lease` and :mod:`turnstile_ddb.lease_queue`.
    """

    owner: str = "owner"
    fence: str = "fence"
    expires_at_ms: str = "expiresAt"
    acquired_at: str = "acquiredAt"
    released_at: str = "releasedAt"
    acquisition: str = "acquisition"
    ttl_attribute: str = "reapAt"
    legacy_purge_at: str = "purgeAt"  # an old TTL attribute; every acquisition removes it
    # the FIFO queue in front of the item (turnstile_ddb.lease_queue)
    tickets: str = "tickets"
    head: str = "head"
    skipped_at: str = "skippedAt"
    queued_at: str = "queuedAt"
    left: str = "left"
    turn_ms: str = "turnMs"
    hold_ms: str = "holdMs"
    last_hold_ms: str = "lastHoldMs"
    beat_ticket: str = "beatTicket"
    beat_at: str = "beatAt"
    queue_expiry_ms: str = "queueExpiryMs"
    queue_idle_ms: str = "queueIdleMs"
    # a tombstone row (a waiter that left): its resource and ticket
    queue_of: str = "queueOf"
    ticket: str = "ticket"
    _to_default: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _checks.distinct_names("LeaseAttributes", self.named())
        renamed = {
            getattr(self, f.name): f.default
            for f in fields(self)
            if f.init and getattr(self, f.name) != f.default
        }
        object.__setattr__(self, "_to_default", renamed)

    def named(self) -> list[tuple[str, str]]:
        """(field, stored name) for every attribute of a lease item."""
        return [(f.name, getattr(self, f.name)) for f in fields(self) if f.init]


DEFAULT_ATTRIBUTES = LeaseAttributes()


def expression_names(
    attributes: LeaseAttributes, placeholders: Iterable[str], key_attr: str
) -> dict[str, str]:
    """ExpressionAttributeNames for ``placeholders`` (``#resource`` names ``key_attr``)."""
    return {
        p: key_attr if p == "#resource" else getattr(attributes, _PLACEHOLDERS[p])
        for p in placeholders
    }


def logical(attributes: LeaseAttributes, item: dict[str, Any] | None) -> dict[str, Any] | None:
    """``item`` as read from the table, with the default names (what the code reads)."""
    if item is None or not attributes._to_default:
        return item
    return {attributes._to_default.get(name, name): value for name, value in item.items()}


def stored(attributes: LeaseAttributes, **item: Any) -> dict[str, Any]:
    """An item given by field name (``owner=...``), under the table's stored names."""
    return {getattr(attributes, name): value for name, value in item.items()}


# Each placeholder the expressions use, and the LeaseAttributes field it names.
_PLACEHOLDERS = {
    "#owner": "owner",
    "#fence": "fence",
    "#expiresAt": "expires_at_ms",
    "#acquiredAt": "acquired_at",
    "#releasedAt": "released_at",
    "#acquisition": "acquisition",
    "#purgeAt": "legacy_purge_at",
    "#reapAt": "ttl_attribute",
    "#tickets": "tickets",
    "#head": "head",
    "#skippedAt": "skipped_at",
    "#queuedAt": "queued_at",
    "#left": "left",
    "#turnMs": "turn_ms",
    "#holdMs": "hold_ms",
    "#lastHoldMs": "last_hold_ms",
    "#beatTicket": "beat_ticket",
    "#beatAt": "beat_at",
    "#expiryMs": "queue_expiry_ms",
    "#idleMs": "queue_idle_ms",
}
PLACEHOLDERS = ("#resource", *_PLACEHOLDERS)


def used(*expressions: str) -> list[str]:
    """The placeholders ``expressions`` use (DynamoDB refuses names an expression does not use)."""
    return [p for p in PLACEHOLDERS if any(p in expression for expression in expressions)]


# -- condition fragments ---------------------------------------------------------------------------

# The default of QueueSettings.expiry_ms (L); a queue's own L is the one its tickets wrote.
QUEUE_EXPIRY_MS = 1500

# A plain acquisition: free, and nobody queued (head past the last ticket).
FREE_AND_NO_QUEUE = (
    "(attribute_not_exists(#resource) OR #expiresAt < :now) "
    "AND (attribute_not_exists(#tickets) OR #head > #tickets)"
)

# The queue's head has not come for a free lease for L (``:stale`` = now - L): nobody released,
# expired, or moved the head since.
STALE_HEAD = (
    "#expiresAt < :stale AND (attribute_not_exists(#releasedAt) OR #releasedAt < :stale) "
    "AND (attribute_not_exists(#skippedAt) OR #skippedAt < :stale)"
)

# ... and the head, if it said it was next (a beat), beat last L ago; if it did not, it has
# been the head for I (``:idle`` = now - I): no claim or pass-over since.
SILENT_HEAD = (
    "((#beatTicket = :head AND #beatAt < :stale) OR "
    "((attribute_not_exists(#beatTicket) OR #beatTicket <> :head) "
    "AND (attribute_not_exists(#acquiredAt) OR #acquiredAt < :idle) "
    "AND (attribute_not_exists(#skippedAt) OR #skippedAt < :idle)))"
)

# ... or free with a queue whose head the queue itself would pass over, and would have for I
# already (``:stale`` = now - I - L, ``:idle`` = now - 2 I, ``:head`` the head as read): every
# live waiter looks at least every I - H, so one would have come for the lease or passed the head
# over since. The queue is then cleared. L and I are the waiters' own (queue_times).
STALE_QUEUE = (
    f"#expiresAt < :now AND #head = :head AND #head <= #tickets AND {STALE_HEAD} "
    f"AND {SILENT_HEAD} AND (attribute_not_exists(#queuedAt) OR #queuedAt < :idle)"
)


# A plain acquisition reads at most this many tickets as left (the condition names each one).
MAX_LEFT = 50


def waiting(item: Mapping[str, Any]) -> list[int]:
    """The tickets from the head on whose waiters have not left (``left``): who is queued."""
    left = {int(ticket) for ticket in item.get("left", ())}
    head, tickets = int(item.get("head", 1)), int(item.get("tickets", 0))
    return [ticket for ticket in range(head, tickets + 1) if ticket not in left]


def left_queue(item: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The condition (and its values) under which a free lease's queue, every ticket of which
    left, is cleared at once: the head and the last ticket as read, each ticket between them in
    ``left``; None if someone is queued (or more than :data:`MAX_LEFT` tickets are, to check)::

        #expiresAt < :now AND #head = :head AND #tickets = :tickets
          AND contains(#left, :left0) AND contains(#left, :left1) ...

    A ticket in ``left`` never comes back (its waiter raised :class:`WaitTimedOut` after its
    last claim), and ``#tickets = :tickets`` refuses the write if anyone queued since."""
    head, tickets = int(item.get("head", 1)), int(item.get("tickets", 0))
    if head > tickets or tickets - head + 1 > MAX_LEFT or waiting(item):
        return None
    span = range(head, tickets + 1)
    condition = "#expiresAt < :now AND #head = :head AND #tickets = :tickets" + "".join(
        f" AND contains(#left, :left{index})" for index in range(len(span))
    )
    left = {f"left{index}": ticket for index, ticket in enumerate(span)}
    return condition, codec.values(head=head, tickets=tickets, **left)


def queue_wait_ms(item: Mapping[str, Any], now: int) -> int:
    """How long a free lease's queue should still keep a plain acquisition out, as the item
    shows: one turn (``turnMs``, else ``holdMs``, else the queue's L) per waiter still queued,
    and never longer than until :data:`STALE_QUEUE` would let it clear the queue if they are
    all gone (at least 1 ms)."""
    expiry, idle = queue_times(item)
    turn = int(item.get("turnMs", 0)) or int(item.get("holdMs", 0)) or expiry

    def latest(*names: str) -> int:
        return max(int(item.get(name, 0)) for name in names)

    quiet = latest("expiresAt", "releasedAt", "skippedAt") + idle + expiry
    if int(item.get("beatTicket", 0)) == int(item.get("head", 1)):
        silent = latest("beatAt") + idle + expiry
    else:
        silent = latest("acquiredAt", "skippedAt") + 2 * idle
    clears = max(quiet, silent, latest("queuedAt") + 2 * idle) + 1 - now
    return max(1, min(len(waiting(item)) * turn, clears))


def queue_times(item: Mapping[str, Any]) -> tuple[int, int]:
    """L and I as the item records them (:meth:`QueueSettings.of`)."""
    expiry = int(item.get("queueExpiryMs", 0)) or QUEUE_EXPIRY_MS
    return expiry, max(int(item.get("queueIdleMs", 0)), expiry)


def stale_queue_times(now: int, expiry_ms: int, idle_ms: int) -> tuple[int, int]:
    """``:stale`` and ``:idle`` of :data:`STALE_QUEUE` (:meth:`QueueSettings.stale_queue_times`)."""
    since = now - idle_ms
    return since - expiry_ms, since - idle_ms


def stale_queue(item: Mapping[str, Any], now: int, stale: int, idle: int) -> bool:
    """Free, waiters queued, and ``STALE_QUEUE`` holds (it decides; this only saves a call
    that would fail)."""
    if not item or int(item.get("expiresAt", 0)) >= now:
        return False
    head = int(item.get("head", 1))
    if head > int(item.get("tickets", 0)):
        return False
    if any(int(item.get(name, 0)) >= stale for name in ("expiresAt", "releasedAt", "skippedAt")):
        return False
    if int(item.get("queuedAt", 0)) >= idle:
        return False
    if int(item.get("beatTicket", 0)) == head:
        return int(item.get("beatAt", 0)) < stale
    return all(int(item.get(name, 0)) < idle for name in ("acquiredAt", "skippedAt"))


# -- the lease's duration --------------------------------------------------------------------------


class NoTimeLeft(errors.Retryable):
    """The invocation ends before a lease could be worth taking (remaining time <= margin)."""


NoTimeLeft.__module__ = "turnstile_ddb.lease"  # public there; defined here for both modules


def duration_ms(
    requested_ms: int, remaining_ms: Callable[[], int] | None, safety_margin_ms: int
) -> int:
    """How long a lease asked for ``requested_ms`` lasts: that, cut (given the invocation's
    ``remaining_ms``) to end ``safety_margin_ms`` before the invocation does. This is the
    lease's own expiry (``expiresAt`` = now + this), never the table's TTL attribute."""
    if requested_ms <= 0:
        raise ValueError("a lease needs a positive duration")
    if remaining_ms is None:
        return requested_ms
    allowed = remaining_ms() - safety_margin_ms
    if allowed <= 0:
        raise NoTimeLeft(f"only {remaining_ms()} ms left in this invocation")
    return min(requested_ms, allowed)


# -- the one acquisition write ---------------------------------------------------------------------


def new_acquisition() -> str:
    """A new acquisition id (random, 128 bits): written by every acquisition on the lease item."""
    return uuid.uuid4().hex


class LeaseConfig(Protocol):
    """What the acquisition write's protocol needs of a lease table (no client: it sends
    nothing itself)."""

    table: str
    backoff: retry.Backoff
    attributes: LeaseAttributes

    def wire_key(self, resource: str) -> dict[str, Any]: ...

    def names(self, *placeholders: str) -> dict[str, str]: ...


@dataclass(frozen=True)
class Acquisition:
    """One acquisition write (:func:`take_protocol`): who takes the lease, until when, under which
    condition, and what else the same write records (the queue's head move, its pace).

    ``also_set`` / ``also_remove`` are extra clauses (each starting with ``", "``), ``values``
    their ExpressionAttributeValues; ``id`` is written on the item so a caller whose reply was
    lost can read whether this write was the one applied."""

    owner: str
    expires_at_ms: int
    now_ms: int
    condition: str
    also_set: str = ""
    also_remove: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=new_acquisition)

    @property
    def update(self) -> str:
        return (
            "SET #owner = :owner, #expiresAt = :expiresAt, #acquiredAt = :now, "
            f"#acquisition = :acquisition{self.also_set} "
            f"REMOVE #releasedAt, #purgeAt, #reapAt{self.also_remove} ADD #fence :one"
        )

    def expression_values(self) -> dict[str, Any]:
        own = codec.values(
            owner=self.owner, expiresAt=self.expires_at_ms, now=self.now_ms, one=1,
            acquisition=self.id,
        )  # fmt: skip
        return {**own, **self.values}


def take_protocol(
    leases: LeaseConfig, resource: str, write: Acquisition
) -> _core.Steps[dict[str, Any] | None]:
    """The one acquisition write, for every kind of acquisition (plain, queued, the fast path)::

        UpdateItem <resource>
          SET #owner = :owner, #expiresAt = :expiresAt, #acquiredAt = :now,
              #acquisition = :acquisition <also_set>
          REMOVE #releasedAt, #purgeAt, #reapAt <also_remove>
          ADD #fence :one
          ConditionExpression: <condition>
          ReturnValues: ALL_OLD, ReturnValuesOnConditionCheckFailure: ALL_OLD

    Returns the item as it was, with the default names (new fence = its fence + 1); a refusal is
    the ClientError. Not resent after a timeout (``ADD``): that is ``OutcomeUnknown``.
    """
    update = write.update
    params = {
        "TableName": leases.table,
        "Key": leases.wire_key(resource),
        "UpdateExpression": update,
        "ConditionExpression": write.condition,
        "ExpressionAttributeNames": leases.names(*used(update, write.condition)),
        "ExpressionAttributeValues": write.expression_values(),
        "ReturnValues": "ALL_OLD",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    response = yield from retry.retrying(
        _core.Call("update_item", params), backoff=leases.backoff, idempotent=False, pattern=PATTERN
    )
    return logical(leases.attributes, codec.decode_item(response.get("Attributes")))


@dataclass(frozen=True)
class QueueSettings:
    """``heartbeat_ms`` (H): how often holders renew and the waiter next in line beats;
    ``expiry_ms`` (L): how long after its last renewal a silent holder, or after its last beat a
    silent next-in-line waiter, is passed over; ``idle_ms`` (I, default 4 L): how long a waiter
    that never said it was next may leave its turn unclaimed (waiters further back write nothing
    and sleep up to I - H); ``poll_ms``: how soon the head looks at a holder past its expected
    release again (then every 2, then 4 polls; an expiry at once); ``margin_ms``: how long
    before a Lambda invocation ends waits and heartbeats stop.

    Defaults measured in ``bench/leases.py`` (docs/patterns/leases.md): L = 3 H tolerates two
    late or lost heartbeats, and a dead holder is taken over within L + H + one poll. Where
    writes are slow (a loaded machine), raise H and L together.
    """

    heartbeat_ms: int = 500
    expiry_ms: int = QUEUE_EXPIRY_MS
    poll_ms: int = 50
    margin_ms: int = 1000
    idle_ms: int = 0  # 0: four times expiry_ms

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_ms < self.expiry_ms:
            raise ValueError("need 0 < heartbeat_ms < expiry_ms")
        if self.poll_ms <= 0 or self.margin_ms < 0:
            raise ValueError("poll_ms must be positive and margin_ms not negative")
        if self.idle_ms == 0:
            object.__setattr__(self, "idle_ms", 4 * self.expiry_ms)
        if self.idle_ms < self.expiry_ms:
            raise ValueError("need idle_ms >= expiry_ms")

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> QueueSettings:
        """L and I as the queue's waiters wrote them on the lease item with their ticket
        (``queueExpiryMs``, ``queueIdleMs``; the defaults for an item written before they were
        recorded). A plain acquisition judges a queue by these, never by settings of its own."""
        expiry, idle = queue_times(item)
        return cls(heartbeat_ms=min(cls.heartbeat_ms, expiry - 1), expiry_ms=expiry, idle_ms=idle)

    def stale_queue_times(self, now: int) -> tuple[int, int]:
        """``:stale`` and ``:idle`` of the plain acquisition's stale-queue condition at ``now``:
        the queue's own pass-over rule as it stood I ago (every live waiter looks within I - H)."""
        return stale_queue_times(now, self.expiry_ms, self.idle_ms)


# Public (and shown, pickled, documented) as turnstile_ddb.lease_queue.QueueSettings.
QueueSettings.__module__ = "turnstile_ddb.lease_queue"


# -- the fenced write's refusal (turnstile_ddb.lease.fenced_update) ------------------------------


class StaleFence(errors.Refused):
    """A fenced write was refused: the item already accepted this fence or a newer one."""

    def __init__(self, fence: int, current: dict[str, Any] | None):
        super().__init__(f"fence {fence} is stale")
        self.fence = fence
        self.current = current


StaleFence.__module__ = "turnstile_ddb.lease"  # public there, as NoTimeLeft


# -- the item's internals under the names turnstile_ddb.lease once made public -------------------


def _attribute_names(*placeholders: str) -> dict[str, str]:
    """The default ExpressionAttributeNames for ``placeholders`` (what the old name returned)."""
    return expression_names(DEFAULT_ATTRIBUTES, placeholders, "resource")


_INTERNAL = "Leases(attributes=LeaseAttributes(...)) (the lease item's schema is private)"
# turnstile_ddb.lease's deprecation.renamed table: name -> (since, removed in, use, the value)
OLD_LEASE_NAMES: dict[str, tuple[str, str, str, Callable[[], object]]] = {
    "FREE_AND_NO_QUEUE": ("1.0.0", "2.0.0", _INTERNAL, lambda: FREE_AND_NO_QUEUE),
    "STALE_HEAD": ("1.0.0", "2.0.0", _INTERNAL, lambda: STALE_HEAD),
    "SILENT_HEAD": ("1.0.0", "2.0.0", _INTERNAL, lambda: SILENT_HEAD),
    "STALE_QUEUE": ("1.0.0", "2.0.0", _INTERNAL, lambda: STALE_QUEUE),
    "QUEUE_EXPIRY_MS": (
        "1.0.0", "2.0.0", "turnstile_ddb.lease_queue.QueueSettings().expiry_ms",
        lambda: QUEUE_EXPIRY_MS,
    ),
    "REAP_ATTRIBUTE": (
        "1.0.0", "2.0.0", "turnstile_ddb.lease.LeaseAttributes().ttl_attribute",
        lambda: DEFAULT_ATTRIBUTES.ttl_attribute,
    ),
    "QueueSettings": (
        "1.0.0", "2.0.0", "turnstile_ddb.lease_queue.QueueSettings", lambda: QueueSettings
    ),
    "attribute_names": ("1.0.0", "2.0.0", "Leases.names", lambda: _attribute_names),
    "new_acquisition": ("1.0.0", "2.0.0", _INTERNAL, lambda: new_acquisition),
}  # fmt: skip
