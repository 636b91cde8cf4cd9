"""Lease locks with fencing tokens (seed 003), and a FOR UPDATE-style critical section (seed 004).

One item per resource in a lease table whose partition key is ``resource``:

===============  ==================================================================================
``owner``        who holds, or last held, the lease
``fence``        grows by one with every successful acquisition; a release never resets it
``expiresAt``    epoch milliseconds by the acquirer's clock; ``0`` once released
``acquiredAt``   epoch milliseconds by the acquirer's clock (history and diagnostics only)
``releasedAt``   set by a release of a live lease, removed by the next acquisition
``acquisition``  an id unique to the acquisition that wrote the item (random, new on every
                 acquisition): what tells a write in doubt (its reply lost) that it was the one
                 applied, where the owner cannot (one owner may acquire many times at once)
===============  ==================================================================================

Lease items are kept, never deleted: the item is what carries the fence, and fences must
strictly increase forever. A TTL purge of an idle item used to restart the fence at 1 (issue 13.7);
one small item per resource is the price. The table's TTL attribute (:data:`REAP_ATTRIBUTE`,
``reapAt``) is one no lease item has ever been written with: only the queue's tombstone rows carry
it, and every acquisition removes it besides, so TTL can never take a lease item and its fence.
Expiry is decided by the conditions below, never by whether an item is still there (seed 003
found an expired-but-present item still fails ``attribute_not_exists``).

**acquire** (one call, no read first)::

    UpdateItem
      UpdateExpression:    SET #owner = :owner, #expiresAt = :expiresAt, #acquiredAt = :now,
                               #acquisition = :acquisition       (a new random id)
                           REMOVE #releasedAt, #purgeAt, #reapAt
                           ADD #fence :one
      ConditionExpression: (attribute_not_exists(#resource) OR #expiresAt < :now)
                           AND (attribute_not_exists(#tickets) OR #head > #tickets)
      ReturnValues: ALL_OLD  (new fence = old fence + 1, and a record of the handover)
      ReturnValuesOnConditionCheckFailure: ALL_OLD  (who holds it, until when: no second read)

**Queue.** The second half of the condition keeps a plain acquisition from jumping the FIFO
queue of :mod:`turnstile_ddb.lease_queue` (``tickets``/``head`` on the same item): while anyone is
queued it raises :class:`Held` (``waiting`` says how many tickets are out) even for a free lease.
A queue whose waiters are all gone does not block it for ever: when the queue itself would have
passed its head over (the lease free for L, the head silent: see :mod:`turnstile_ddb.lease_queue`,
*Liveness*) already I ago, and nobody queued for 2 I, every live waiter would have come for the
lease or passed the head over since (each looks at least every I - H), so a second write under
that condition (:data:`STALE_QUEUE`) clears the queue (``SET #head = #tickets + :one``) and takes
the lease. L and I are the waiters' own: each ticket writes them on the item (``queueExpiryMs``,
``queueIdleMs``; :meth:`QueueSettings.of`), so a plain caller never judges a queue by settings of
its own.
Both kinds of acquisition make the same write (:meth:`Leases.take`), so fences strictly increase
across them.

**renew** and **release** name the exact lease, owner *and* fence, so a late or paused holder can
never extend or free a successor's lease (a successor always has a higher fence)::

    renew:    SET #expiresAt = :expiresAt
              ConditionExpression: #owner = :owner AND #fence = :fence
                                   AND attribute_not_exists(#releasedAt)
    release:  SET #expiresAt = :zero, #releasedAt = :now
              ConditionExpression: #owner = :owner AND #fence = :fence
                                   AND attribute_not_exists(#releasedAt) AND #expiresAt >= :now

Release is idempotent: refused with this owner and fence still on the item (ALL_OLD), the lease
was released already or ran out with nobody taking it, and the release is answered as done
without a write (``LeaseReleaseRepeated``). A resend or a late release therefore never moves
``releasedAt``, which the queue reads as the moment the lease came free. Renewing a lease that
expired but that nobody took is allowed: the fence is unchanged, so nobody else held it in between.

**Fenced writes.** A holder can be paused (GC, a slow network, a frozen Lambda) past its expiry
while a successor acquires. Mutual exclusion by time alone then fails, so every protected write
must carry the fence and be refused when it is stale. Two ways, both here:

* :meth:`Leases.guard` / :meth:`Leases.transact`: a ``ConditionCheck`` on the lease item inside the
  same ``TransactWriteItems`` as the protected writes::

      ConditionCheck on the lease item
        ConditionExpression: #owner = :owner AND #fence = :fence
                             AND attribute_not_exists(#releasedAt) AND #expiresAt > :now
        ReturnValuesOnConditionCheckFailure: ALL_OLD

  A holder that released its lease, or whose lease expired (by its own clock) without anyone
  taking it, writes nothing either (issue 13.7): owner and fence alone accepted both.

* :func:`fenced_update`: the protected item remembers the last fence it accepted::

      UpdateItem  SET <changes>, #lastFence = :fence
        ConditionExpression: attribute_not_exists(#lastFence) OR #lastFence < :fence

  Strictly lower: one accepted write per fence per item (combine changes into one write).

**Clocks.** The acquire condition compares the stored ``expiresAt`` (the previous holder's clock)
with ``:now`` (the acquirer's clock). Assumption: any two clients' clocks differ by less than
``safety_margin_ms``. The holder treats its lease as over ``safety_margin_ms`` before ``expiresAt``
(:meth:`Leases.time_left_ms`), so under the assumption no two holders *work* at once. If the
assumption breaks (a client's clock runs ahead and it takes a lease early), two holders can overlap
in time, but only the newest fence can write: the fenced writes above refuse the older one. The
decisions themselves are made by the database comparing fences, never by a clock.

**Lambda.** Given the invocation's remaining time (``remaining_ms``), an acquisition is capped so
the lease ends ``safety_margin_ms`` before the invocation does, unless it is renewed.

**Metrics** (pattern ``lease``): ``LeaseAttempt`` per acquire call, ``LeaseBusy`` per attempt
that found a live holder or a queue, ``LeaseQueueCleared`` per stale queue cleared,
``LeaseWait`` (ms) per waiting acquisition, acquired or not, ``LeaseWaitGaveUp`` when the wait
ran out, ``LeaseLost`` for a renew or release refused, ``LeaseReleaseRepeated`` for a release
of a lease already released or run out (no write), ``FencedWriteRefused`` for a protected
write refused for its stale fence (either form).

**Fence lifetime.** The fence increases forever: the item is never deleted (see above), so
items guarded by :func:`fenced_update` never meet a restarted fence. (``REMOVE #purgeAt`` clears
the TTL attribute that versions before issue 13 wrote; the table's TTL is on another attribute,
``reapAt``, so no item of theirs can be purged before an acquisition clears it either.)
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _contract, codec, errors, metrics, retry, transact

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "FREE_AND_NO_QUEUE",
    "QUEUE_EXPIRY_MS",
    "REAP_ATTRIBUTE",
    "SAFETY_MARGIN_MS",
    "SILENT_HEAD",
    "STALE_HEAD",
    "STALE_QUEUE",
    "Held",
    "Lease",
    "LeaseLost",
    "Leases",
    "NoTimeLeft",
    "QueueSettings",
    "StaleFence",
    "attribute_names",
    "fenced_update",
    "new_acquisition",
]

PATTERN = "lease"
# The lease table's TTL attribute (epoch seconds): carried only by rows that are not lease items
# (the queue's tombstones); never written on a lease item, and removed by every acquisition.
REAP_ATTRIBUTE = "reapAt"
# The assumed bound on clock skew between clients (see "Clocks" above); the one default.
SAFETY_MARGIN_MS = 500

_NAMES = {
    "#resource": "resource",
    "#owner": "owner",
    "#fence": "fence",
    "#expiresAt": "expiresAt",
    "#acquiredAt": "acquiredAt",
    "#releasedAt": "releasedAt",
    "#acquisition": "acquisition",
    "#purgeAt": "purgeAt",
    "#reapAt": "reapAt",
    # the FIFO queue in front of the item (turnstile_ddb.lease_queue)
    "#tickets": "tickets",
    "#head": "head",
    "#skippedAt": "skippedAt",
    "#queuedAt": "queuedAt",
    "#left": "left",
    "#turnMs": "turnMs",
    "#holdMs": "holdMs",
    "#lastHoldMs": "lastHoldMs",
    "#beatTicket": "beatTicket",
    "#beatAt": "beatAt",
    "#expiryMs": "queueExpiryMs",
    "#idleMs": "queueIdleMs",
}

# The default of QueueSettings.expiry_ms (L); a queue's own L is the one its tickets wrote.
QUEUE_EXPIRY_MS = 1500

# The queue's head has not come for a free lease for L (``:stale`` = now - L): nobody released,
# expired, or moved the head since.
STALE_HEAD = (
    "#expiresAt < :stale AND (attribute_not_exists(#releasedAt) OR #releasedAt < :stale) "
    "AND (attribute_not_exists(#skippedAt) OR #skippedAt < :stale)"
)


# A plain acquisition: free, and nobody queued (head past the last ticket).
FREE_AND_NO_QUEUE = (
    "(attribute_not_exists(#resource) OR #expiresAt < :now) "
    "AND (attribute_not_exists(#tickets) OR #head > #tickets)"
)
# ... and the head, if it said it was next (a beat), beat last L ago; if it did not, it has
# been the head for I (``:idle`` = now - I): no claim or pass-over since.
SILENT_HEAD = (
    "((#beatTicket = :head AND #beatAt < :stale) OR "
    "((attribute_not_exists(#beatTicket) OR #beatTicket <> :head) "
    "AND (attribute_not_exists(#acquiredAt) OR #acquiredAt < :idle) "
    "AND (attribute_not_exists(#skippedAt) OR #skippedAt < :idle)))"
)  # rows passed over per transaction (TransactWriteItems takes 100 items)


# ... or free with a queue whose head the queue itself would pass over, and would have for I
# already (``:stale`` = now - I - L, ``:idle`` = now - 2 I, ``:head`` the head as read): every
# live waiter looks at least every I - H, so one would have come for the lease or passed the head
# over since. The queue is then cleared. L and I are the waiters' own (see QueueSettings.of).
STALE_QUEUE = (
    f"#expiresAt < :now AND #head = :head AND #head <= #tickets AND {STALE_HEAD} "
    f"AND {SILENT_HEAD} AND (attribute_not_exists(#queuedAt) OR #queuedAt < :idle)"
)


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
        expiry = int(item.get("queueExpiryMs", 0)) or cls.expiry_ms
        idle = max(int(item.get("queueIdleMs", 0)), expiry)
        return cls(heartbeat_ms=min(cls.heartbeat_ms, expiry - 1), expiry_ms=expiry, idle_ms=idle)

    def stale_queue_times(self, now: int) -> tuple[int, int]:
        """``:stale`` and ``:idle`` of :data:`STALE_QUEUE` at ``now``: the queue's own pass-over
        rule (``SILENT_HEAD``) as it stood I ago (every live waiter looks within I - H)."""
        since = now - self.idle_ms
        return since - self.expiry_ms, since - self.idle_ms


def new_acquisition() -> str:
    """A new acquisition id (random, 128 bits): written by every acquisition on the lease item."""
    return uuid.uuid4().hex


def attribute_names(*placeholders: str) -> dict[str, str]:
    """ExpressionAttributeNames for the lease item's placeholders (shared with the queue)."""
    return {name: _NAMES[name] for name in placeholders}


@dataclass(frozen=True)
class Lease:
    """A lease this caller holds. ``fence`` is the token every protected write must carry."""

    resource: str
    owner: str
    fence: int
    expires_at: int  # epoch ms, by the acquirer's clock
    acquired_at: int
    attempts: int = 1  # acquire calls it took (waiting acquisitions)
    previous: dict[str, Any] | None = None  # the lease item as this acquisition found it
    ticket: int | None = None  # the queue ticket it was served on (turnstile_ddb.lease_queue)


class Held(errors.Retryable):
    """Someone else holds the lease (read from the failed condition's ALL_OLD image)."""

    def __init__(self, resource: str, owner: str, expires_at: int, fence: int, attempts: int = 1):
        super().__init__(f"{resource!r} is held by {owner!r} until {expires_at}")
        self.waiting = 0  # tickets queued (turnstile_ddb.lease_queue) when it was refused
        self.resource = resource
        self.owner = owner
        self.expires_at = expires_at
        self.fence = fence
        self.attempts = attempts

    @classmethod
    def from_item(cls, resource: str, item: Mapping[str, Any] | None, attempts: int = 1) -> Held:
        """The holder as a lease item shows it (an ALL_OLD image, a read; None: no item)."""
        holder = item or {}
        held = cls(
            resource,
            str(holder.get("owner", "")),
            int(holder.get("expiresAt", 0)),
            int(holder.get("fence", 0)),
            attempts,
        )
        held.waiting = max(0, int(holder.get("tickets", 0)) - int(holder.get("head", 1)) + 1)
        return held


class LeaseLost(errors.Refused):
    """The lease named (owner, fence) is no longer the current one: it was taken over (or never
    existed). ``current`` is the lease item as the database saw it (None: no item)."""

    def __init__(self, resource: str, current: dict[str, Any] | None):
        super().__init__(f"lease on {resource!r} is no longer held")
        self.resource = resource
        self.current = current


class StaleFence(errors.Refused):
    """A fenced write was refused: the item already accepted this fence or a newer one."""

    def __init__(self, fence: int, current: dict[str, Any] | None):
        super().__init__(f"fence {fence} is stale")
        self.fence = fence
        self.current = current


class NoTimeLeft(errors.Retryable):
    """The invocation ends before a lease could be worth taking (remaining time <= margin)."""


@dataclass
class Leases:
    """Lease operations on one lease table. ``clock`` returns epoch seconds (inject it in tests)."""

    client: DynamoDBClient
    table: str
    backoff: retry.Backoff = field(default_factory=retry.Backoff)
    clock: Callable[[], float] = time.time
    safety_margin_ms: int = SAFETY_MARGIN_MS
    key_attr: str = "resource"  # the table's partition key (turnstile_ddb.cdk.LeaseTable's default)

    def key(self, resource: str) -> dict[str, Any]:
        """The lease item's key for ``resource``, in the table's own key attribute."""
        return codec.encode_item({self.key_attr: resource})

    def names(self, *placeholders: str) -> dict[str, str]:
        """:func:`attribute_names`, with ``#resource`` naming this table's key attribute."""
        names = attribute_names(*placeholders)
        if "#resource" in names:
            names["#resource"] = self.key_attr
        return names

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def time_left_ms(self, lease: Lease) -> int:
        """How long the holder may still act, keeping the clock-skew margin (can be negative)."""
        return lease.expires_at - self.safety_margin_ms - self.now_ms()

    def _ttl_ms(self, ttl_ms: int, remaining_ms: Callable[[], int] | None) -> int:
        if ttl_ms <= 0:
            raise ValueError("a lease needs a positive duration")
        if remaining_ms is None:
            return ttl_ms
        allowed = remaining_ms() - self.safety_margin_ms
        if allowed <= 0:
            raise NoTimeLeft(f"only {remaining_ms()} ms left in this invocation")
        return min(ttl_ms, allowed)

    # -- acquire ---------------------------------------------------------------------------------

    @_contract.write
    def acquire(
        self,
        resource: str,
        owner: str,
        ttl_ms: int,
        *,
        remaining_ms: Callable[[], int] | None = None,
    ) -> Lease:
        """One attempt. Raises :class:`Held` when a live lease exists or waiters are queued.

        Not retried after a timeout (``ADD`` is not idempotent): that surfaces as
        :class:`turnstile_ddb.retry.OutcomeUnknown`, and a lease taken that way simply expires.
        """
        duration = self._ttl_ms(ttl_ms, remaining_ms)
        now = self.now_ms()
        expires_at = now + duration
        metrics.count("LeaseAttempt", pattern=PATTERN)
        try:
            previous = self.take(resource, owner, expires_at, now, FREE_AND_NO_QUEUE)
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            metrics.count("LeaseBusy", pattern=PATTERN)
            item = codec.old_item(exc) or {}
            stale, idle = QueueSettings.of(item).stale_queue_times(now)
            if not self._stale_queue(item, now, stale, idle):
                raise Held.from_item(resource, item) from exc
            # Waiters are queued but the queue itself would have passed its head over I ago, and
            # nobody queued since: they are gone (a restore, dead waiters). Clear it and take it.
            try:
                previous = self.take(
                    resource,
                    owner,
                    expires_at,
                    now,
                    STALE_QUEUE,
                    also_set=", #head = #tickets + :one",
                    also_remove=", #left",
                    extra_values=codec.values(
                        head=int(item.get("head", 1)), stale=stale, idle=idle
                    ),
                )
            except ClientError as again:
                if not retry.condition_failed(again):
                    raise
                raise Held.from_item(resource, codec.old_item(again)) from again
            metrics.count("LeaseQueueCleared", pattern=PATTERN)
        fence = int((previous or {}).get("fence", 0)) + 1
        return Lease(resource, owner, fence, expires_at, now, previous=previous)

    @staticmethod
    def _stale_queue(item: Mapping[str, Any], now: int, stale: int, idle: int) -> bool:
        """Free, waiters queued, and :data:`STALE_QUEUE` holds (it decides; this only saves a
        call that would fail)."""
        if not item or int(item.get("expiresAt", 0)) >= now:
            return False
        head = int(item.get("head", 1))
        if head > int(item.get("tickets", 0)):
            return False
        if any(
            int(item.get(name, 0)) >= stale for name in ("expiresAt", "releasedAt", "skippedAt")
        ):
            return False
        if int(item.get("queuedAt", 0)) >= idle:
            return False
        if int(item.get("beatTicket", 0)) == head:
            return int(item.get("beatAt", 0)) < stale
        return all(int(item.get(name, 0)) < idle for name in ("acquiredAt", "skippedAt"))

    @_contract.write
    def take(
        self,
        resource: str,
        owner: str,
        expires_at: int,
        now: int,
        condition: str,
        *,
        also_set: str = "",
        also_remove: str = "",
        extra_values: Mapping[str, Any] | None = None,
        acquisition: str | None = None,
    ) -> dict[str, Any] | None:
        """The one acquisition write, for every kind of acquisition (plain here, queued in
        :mod:`turnstile_ddb.lease_queue`)::

            UpdateItem <resource>
              SET #owner = :owner, #expiresAt = :expiresAt, #acquiredAt = :now,
                  #acquisition = :acquisition <also_set>
              REMOVE #releasedAt, #purgeAt, #reapAt <also_remove>
              ADD #fence :one
              ConditionExpression: <condition>
              ReturnValues: ALL_OLD, ReturnValuesOnConditionCheckFailure: ALL_OLD

        ``acquisition`` (default: a new random id) is written on the item, so a caller whose reply
        was lost can read whether this write was the one applied (:func:`new_acquisition`).
        Returns the item as it was (new fence = its fence + 1); a refusal is the ClientError.
        """
        acquisition = acquisition or new_acquisition()
        update = (
            "SET #owner = :owner, #expiresAt = :expiresAt, #acquiredAt = :now, "
            f"#acquisition = :acquisition{also_set} "
            f"REMOVE #releasedAt, #purgeAt, #reapAt{also_remove} ADD #fence :one"
        )
        used = [name for name in _NAMES if name in update or name in condition]
        response = retry.call(
            lambda: self.client.update_item(
                TableName=self.table,
                Key=self.key(resource),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=self.names(*used),
                ExpressionAttributeValues={
                    **codec.values(
                        owner=owner,
                        expiresAt=expires_at,
                        now=now,
                        one=1,
                        acquisition=acquisition,
                    ),
                    **(extra_values or {}),
                },
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ),
            backoff=self.backoff,
            idempotent=False,
            pattern=PATTERN,
        )
        return codec.decode_item(response.get("Attributes"))

    @_contract.write
    def acquire_wait(
        self,
        resource: str,
        owner: str,
        ttl_ms: int,
        *,
        wait_ms: int,
        waits: retry.Backoff,
        remaining_ms: Callable[[], int] | None = None,
    ) -> Lease:
        """Acquire, waiting up to ``wait_ms`` (never past the invocation's end) for the holder.

        Between attempts it sleeps a full-jitter exponential delay from ``waits``, but never longer
        than until the holder's ``expiresAt`` (plus a little jitter): an expired holder is taken
        over promptly and an early release is noticed by the next poll. Only the acquire call is
        repeated; nothing the caller does is. Raises :class:`Held` (with ``attempts``) at the end.
        """
        start = self.now_ms()
        deadline = start + wait_ms
        if remaining_ms is not None:
            deadline = min(deadline, start + remaining_ms() - 2 * self.safety_margin_ms)
        attempt = 0
        while True:
            attempt += 1
            try:
                lease = self.acquire(resource, owner, ttl_ms, remaining_ms=remaining_ms)
            except Held as held:
                now = self.now_ms()
                if now >= deadline:
                    held.attempts = attempt
                    metrics.timing("LeaseWait", now - start, pattern=PATTERN)
                    metrics.count("LeaseWaitGaveUp", pattern=PATTERN)
                    raise
                until_expiry_ms = max(0, held.expires_at - now)
                delay_ms = min(
                    waits.delay(attempt) * 1000,
                    until_expiry_ms + waits.rand() * waits.base * 1000,
                    deadline - now,
                )
                waits.sleep(delay_ms / 1000)
                continue
            metrics.timing("LeaseWait", self.now_ms() - start, pattern=PATTERN)
            return replace(lease, attempts=attempt)

    # -- renew, release --------------------------------------------------------------------------

    @_contract.write
    def renew(
        self, lease: Lease, ttl_ms: int, *, remaining_ms: Callable[[], int] | None = None
    ) -> Lease:
        """Extend ``lease`` to now + ``ttl_ms``; :class:`LeaseLost` if it is no longer this
        lease."""
        expires_at = self.now_ms() + self._ttl_ms(ttl_ms, remaining_ms)
        self._owned_update(
            lease,
            "SET #expiresAt = :expiresAt",
            "#owner = :owner AND #fence = :fence AND attribute_not_exists(#releasedAt)",
            attribute_names("#owner", "#fence", "#expiresAt", "#releasedAt"),
            codec.values(expiresAt=expires_at),
        )
        return replace(lease, expires_at=expires_at)

    @_contract.write
    def release(self, lease: Lease) -> None:
        """Expire ``lease`` now (the item stays, so the fence keeps counting); :class:`LeaseLost`
        if a successor holds it. Safe to repeat.

        Only a live lease is written: one already released, or run out with nobody taking it,
        is answered as released without a write (metric ``LeaseReleaseRepeated``), so a resent
        or late release never moves ``releasedAt``, the clock the queue passes a dead head by."""
        now = self.now_ms()
        self._owned_update(
            lease,
            "SET #expiresAt = :zero, #releasedAt = :now",
            "#owner = :owner AND #fence = :fence "
            "AND attribute_not_exists(#releasedAt) AND #expiresAt >= :now",
            attribute_names("#owner", "#fence", "#expiresAt", "#releasedAt"),
            codec.values(zero=0, now=now),
            already=lambda item: (
                int(item.get("fence", -1)) == lease.fence and item.get("owner") == lease.owner
            ),
        )

    def _owned_update(
        self,
        lease: Lease,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
        already: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """The update of ``lease``'s own item; refused, :class:`LeaseLost`, unless ``already``
        says the item as it is (its ALL_OLD image) is the update's outcome already."""
        try:
            retry.call(
                lambda: self.client.update_item(
                    TableName=self.table,
                    Key=self.key(lease.resource),
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={
                        **values,
                        **codec.values(owner=lease.owner, fence=lease.fence),
                    },
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
                backoff=self.backoff,
                idempotent=True,  # same values, same condition: a resend changes nothing more
                pattern=PATTERN,
            )
        except ClientError as exc:
            if retry.condition_failed(exc):
                current = codec.old_item(exc)
                if already is not None and current is not None and already(current):
                    metrics.count("LeaseReleaseRepeated", pattern=PATTERN)
                    return
                metrics.count("LeaseLost", pattern=PATTERN)
                raise LeaseLost(lease.resource, current) from exc
            raise

    # -- fenced writes ---------------------------------------------------------------------------

    def guard(self, lease: Lease) -> dict[str, Any]:
        """A ``TransactWriteItems`` element that holds only while ``lease`` is the current one:
        this owner and fence, not released, not expired."""
        return {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": self.key(lease.resource),
                "ConditionExpression": (
                    "#owner = :owner AND #fence = :fence "
                    "AND attribute_not_exists(#releasedAt) AND #expiresAt > :now"
                ),
                "ExpressionAttributeNames": attribute_names(
                    "#owner", "#fence", "#releasedAt", "#expiresAt"
                ),
                "ExpressionAttributeValues": codec.values(
                    owner=lease.owner, fence=lease.fence, now=self.now_ms()
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    @_contract.write
    def transact(
        self, lease: Lease, items: Sequence[dict[str, Any]], *, token: str | None = None
    ) -> None:
        """Write ``items`` atomically, only if ``lease`` is still current; else :class:`LeaseLost`.

        Other cancellations (a condition of one of ``items``) are raised as
        :class:`turnstile_ddb.transact.Cancelled` with reasons aligned to ``items`` (guard removed).
        """
        try:
            transact.transact_write(
                self.client,
                [self.guard(lease), *items],
                backoff=self.backoff,
                token=token,
                pattern=PATTERN,
            )
        except transact.Cancelled as exc:
            if exc.failed_at(0):
                metrics.count("FencedWriteRefused", pattern=PATTERN)
                raise LeaseLost(lease.resource, exc.reasons[0].item) from exc
            raise transact.Cancelled(exc.reasons[1:]) from exc

    @contextmanager
    def hold(
        self,
        resource: str,
        owner: str,
        ttl_ms: int,
        *,
        wait_ms: int,
        waits: retry.Backoff,
        remaining_ms: Callable[[], int] | None = None,
    ) -> Iterator[Lease]:
        """``with leases.hold(...) as lease:`` the FOR UPDATE of a read-modify-write.

        The lease is taken before the body runs, so nothing in the body is ever repeated to get
        the lock (seed 004's retried transaction re-ran everything before its lock). The body must
        write through :meth:`transact` (or :func:`fenced_update`) with ``lease``. On exit, also on
        an exception, the lease is released. A release that fails is not raised: the body's outcome
        (perhaps a committed write) is what the caller must see, and the lease ends at expiresAt.
        """
        lease = self.acquire_wait(
            resource, owner, ttl_ms, wait_ms=wait_ms, waits=waits, remaining_ms=remaining_ms
        )
        try:
            yield lease
        finally:
            # Taken over already, or the database is away: either way it expires by itself.
            with contextlib.suppress(
                LeaseLost, retry.RetriesExhausted, retry.OutcomeUnknown, errors.TurnstileError
            ):
                self.release(lease)


@_contract.write
def fenced_update(
    client: DynamoDBClient,
    *,
    table: str,
    key: Mapping[str, Any],
    fence: int,
    changes: Mapping[str, Any],
    backoff: retry.Backoff,
    fence_attr: str = "lastFence",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """SET ``changes`` on the item at ``key`` only if it has not seen ``fence`` or a newer one.

    ``extra`` may add ``UpdateExpression`` clauses (``"list_append"`` and such) with their names
    and values: keys ``set`` (extra SET assignments), ``names``, ``values``. Returns the new item.
    Raises :class:`StaleFence` with the current item when the fence is refused.
    """
    names = {"#lastFence": fence_attr}
    values = codec.values(fence=fence)
    assignments = []
    for index, (name, value) in enumerate(changes.items()):
        names[f"#c{index}"] = name
        values[f":c{index}"] = codec.encode(value)
        assignments.append(f"#c{index} = :c{index}")
    if extra:
        assignments.extend(extra.get("set", ()))
        names.update(extra.get("names", {}))
        values.update(extra.get("values", {}))
    assignments.append("#lastFence = :fence")
    try:
        response = retry.call(
            lambda: client.update_item(
                TableName=table,
                Key=codec.encode_item(key),
                UpdateExpression="SET " + ", ".join(assignments),
                ConditionExpression="attribute_not_exists(#lastFence) OR #lastFence < :fence",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ),
            backoff=backoff,
            idempotent=False,  # a resend would meet its own fence and look stale
            pattern=PATTERN,
        )
    except ClientError as exc:
        if retry.condition_failed(exc):
            metrics.count("FencedWriteRefused", pattern=PATTERN)
            raise StaleFence(fence, codec.old_item(exc)) from exc
        raise
    return codec.new_item(response)
