"""Time-limited lease locks with fencing tokens, and a FOR UPDATE-style critical section.

One item per resource in a lease table whose partition key is ``resource``:

===============  ==================================================================================
``owner``        who holds, or last held, the lease
``fence``        grows by one with every successful acquisition; a release never resets it
``expiresAt``    the lease's expiry (``expires_at_ms``): epoch milliseconds by the acquirer's clock,
                 ``0`` once released; the only time that decides who owns the lease
``acquiredAt``   epoch milliseconds by the acquirer's clock (history and diagnostics only)
``releasedAt``   set by a release of a live lease, removed by the next acquisition
``acquisition``  an id unique to the acquisition that wrote the item (random, new on every
                 acquisition): what tells a write in doubt (its reply lost) that it was the one
                 applied, where the owner cannot (one owner may acquire many times at once)
===============  ==================================================================================

Lease items are kept, never deleted: the item is what carries the fence, and fences must
strictly increase forever. A TTL purge of an idle item would restart the fence at 1;
one small item per resource is the price. The table's TTL attribute (``ttl_attribute``,
``reapAt``: epoch *seconds*, cleanup only, never ownership) is one no lease item has ever been
written with: only the queue's tombstone rows carry it, and every acquisition removes it besides,
so TTL can never take a lease item and its fence.
Expiry is decided by the conditions below, never by whether an item is still there (TTL deletes
late, and an expired-but-present item still fails ``attribute_not_exists``).

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
queued it raises :class:`Held` (``waiting`` says how many waiters hold a ticket) even for a free
lease.
A queue whose waiters are all gone does not block it for ever: when the queue itself would have
passed its head over (the lease free for L, the head silent: see :mod:`turnstile_ddb.lease_queue`,
*Liveness*) already I ago, and nobody queued for 2 I, every live waiter would have come for the
lease or passed the head over since (each looks at least every I - H), so a second write under
that condition (``STALE_QUEUE``) clears the queue (``SET #head = #tickets + :one``) and takes
the lease. A queue whose every waiter left (each ticket from the head on is in ``left``) is
cleared at once, in the same kind of write, under
``#expiresAt < :now AND #head = :head AND #tickets = :tickets AND contains(#left, :left0) ...``
(each such ticket named). A refusal for a free lease with waiters still queued is
:class:`Queued` (how many, and the queue's own pace), not :class:`Held`.
L and I are the waiters' own: each waiter writes them on the item with its ticket
(``queueExpiryMs``, ``queueIdleMs``; :meth:`turnstile_ddb.lease_queue.QueueSettings.of`), so a
plain caller never judges a queue by settings of its own.
Both kinds of acquisition make the same write (private to the two modules), so fences strictly
increase across them.

**Stored names.** The names above are the defaults; a table whose items use others gives them as
``Leases(attributes=LeaseAttributes(...))`` (the queue uses the same). Every expression keeps its
placeholders (``#expiresAt``, ...); only what they name changes. Items handed back
(``Lease.previous``, ``LeaseLost.current``, what :class:`Held` reads) use the default names.

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
  taking it, writes nothing either: a condition on owner and fence alone would accept both.

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
``ttl_ms`` arguments are that duration (``expiresAt`` = now + ``ttl_ms``, capped as said): the
lease's own lifetime, unrelated to the table's TTL attribute.

**Metrics** (pattern ``lease``): ``LeaseAttempt`` per acquire call, ``LeaseBusy`` per attempt
that found a live holder or a queue, ``LeaseQueueCleared`` per queue cleared (stale, or
every waiter left),
``LeaseWait`` (ms) per waiting acquisition, acquired or not, ``LeaseWaitGaveUp`` when the wait
ran out, ``LeaseLost`` for a renew or release refused, ``LeaseReleaseRepeated`` for a release
of a lease already released or run out (no write), ``FencedWriteRefused`` for a protected
write refused for its stale fence (either form).

**Fence lifetime.** The fence increases forever: the item is never deleted (see above), so
items guarded by :func:`fenced_update` never meet a restarted fence. (``REMOVE #purgeAt`` clears
the TTL attribute that versions before 0.3.0 wrote; the table's TTL is on another attribute,
``reapAt``, so no item of theirs can be purged before an acquisition clears it either.)
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _checks, _contract, _core, codec, errors, metrics, retry, transact
from turnstile_ddb import _lease_item as _item
from turnstile_ddb._lease_item import LeaseAttributes, NoTimeLeft, StaleFence
from turnstile_ddb.deprecation import TurnstileDeprecationWarning, deprecated, renamed

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "METRICS",
    "SAFETY_MARGIN_MS",
    "Held",
    "Lease",
    "LeaseAttributes",
    "LeaseLost",
    "Leases",
    "NoTimeLeft",
    "Queued",
    "StaleFence",
    "fenced_update",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = (
    "LeaseAttempt",
    "LeaseBusy",
    "LeaseWait",
    "LeaseWaitGaveUp",
    "LeaseLost",
    "LeaseReleaseRepeated",
    "FencedWriteRefused",
    "LeaseQueueCleared",
)

PATTERN = _item.PATTERN
# The assumed bound on clock skew between clients (see "Clocks" above); the one default.
SAFETY_MARGIN_MS = 500


# Names that were public only so that lease_queue could use them: private to both now, and
# listed beside them (turnstile_ddb._lease_item). They keep answering, with a warning, until 2.0.0.
__getattr__ = renamed(__name__, _item.OLD_LEASE_NAMES)


def _renamed_attribute(old: str, new: str) -> None:
    warnings.warn(
        f"turnstile_ddb.lease.{old} is deprecated since turnstile-ddb 1.0.0 and will be removed "
        f"in 2.0.0; use {new} instead",
        TurnstileDeprecationWarning,
        stacklevel=3,
    )


@dataclass(frozen=True, init=False)
class Lease:
    """A lease this caller holds. ``fence`` is the token every protected write must carry.

    ``expires_at_ms`` is the lease's expiry (epoch ms by the acquirer's clock, the item's
    ``expiresAt``), which decides ownership; it has nothing to do with the table's TTL attribute.
    ``attempts`` is the number of DynamoDB calls the acquisition made (each acquire,
    queue call, look, claim, beat or pass-over; a call resent by the retry policy counts once).
    """

    resource: str
    owner: str
    fence: int
    expires_at_ms: int  # epoch ms, by the acquirer's clock: the item's expiresAt
    acquired_at: int  # epoch ms, by the acquirer's clock
    attempts: int = 1  # DynamoDB calls the acquisition made
    previous: dict[str, Any] | None = None  # the lease item as this acquisition found it
    ticket: int | None = None  # its FIFO number in the queue (turnstile_ddb.lease_queue)

    def __init__(
        self,
        resource: str,
        owner: str,
        fence: int,
        expires_at_ms: int | None = None,
        acquired_at: int = 0,
        attempts: int = 1,
        previous: dict[str, Any] | None = None,
        ticket: int | None = None,
        *,
        expires_at: int | None = None,  # the old name of expires_at_ms (deprecated)
    ) -> None:
        if expires_at is not None:
            _renamed_attribute("Lease(expires_at=...)", "Lease(expires_at_ms=...)")
            expires_at_ms = expires_at if expires_at_ms is None else expires_at_ms
        if expires_at_ms is None:
            raise TypeError("Lease() needs expires_at_ms")
        for name, value in (
            ("resource", resource), ("owner", owner), ("fence", fence),
            ("expires_at_ms", expires_at_ms), ("acquired_at", acquired_at),
            ("attempts", attempts), ("previous", previous), ("ticket", ticket),
        ):  # fmt: skip
            object.__setattr__(self, name, value)

    @property
    def expires_at(self) -> int:
        """The old name of :attr:`expires_at_ms` (deprecated)."""
        _renamed_attribute("Lease.expires_at", "Lease.expires_at_ms")
        return self.expires_at_ms


class Held(errors.Retryable):
    """Someone else holds the lease (read from the failed condition's ALL_OLD image).

    ``expires_at_ms``: the holder's expiry (epoch ms); ``attempts``: the DynamoDB calls this
    acquisition made before giving up (as :attr:`Lease.attempts`)."""

    def __init__(
        self, resource: str, owner: str, expires_at_ms: int, fence: int, attempts: int = 1
    ):
        super().__init__(f"{resource!r} is held by {owner!r} until {expires_at_ms}")
        self.waiting = 0  # waiters queued (turnstile_ddb.lease_queue) when it was refused
        self.resource = resource
        self.owner = owner
        self.expires_at_ms = expires_at_ms
        self.fence = fence
        self.attempts = attempts

    @property
    def expires_at(self) -> int:
        """The old name of :attr:`expires_at_ms` (deprecated)."""
        _renamed_attribute("Held.expires_at", "Held.expires_at_ms")
        return self.expires_at_ms

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


class Queued(Held):
    """The lease is free, but waiters of :mod:`turnstile_ddb.lease_queue` are queued for it: a
    plain acquisition does not jump them. ``waiting``: how many are still queued (those that
    left are not counted); ``retry_after_ms``: how long the queue should take to serve them, by
    the turn the item records, never longer than until a plain acquisition may clear it as
    stale if they are gone. ``owner``, ``expires_at_ms`` and ``fence`` are the last holder's."""

    def __init__(
        self,
        resource: str,
        owner: str,
        expires_at_ms: int,
        fence: int,
        attempts: int = 1,
        *,
        waiting: int,
        retry_after_ms: int,
    ) -> None:
        super().__init__(resource, owner, expires_at_ms, fence, attempts)
        self.args = (f"{resource!r} is free, but {waiting} waiter(s) are queued for it",)
        self.waiting = waiting
        self.retry_after_ms = retry_after_ms


def _refused(resource: str, item: Mapping[str, Any] | None, now: int, attempts: int = 1) -> Held:
    """Why a plain acquisition was refused, as the refusal's item shows: a live holder
    (:class:`Held`), or a free lease with waiters queued (:class:`Queued`)."""
    held = Held.from_item(resource, item, attempts)
    queued = _item.waiting(item or {})
    if held.expires_at_ms >= now or not queued:
        return held
    return Queued(
        resource, held.owner, held.expires_at_ms, held.fence, attempts,
        waiting=len(queued), retry_after_ms=_item.queue_wait_ms(item or {}, now),
    )  # fmt: skip


class LeaseLost(errors.Refused):
    """The lease named (owner, fence) is no longer the current one: it was taken over (or never
    existed). ``current`` is the lease item as the database saw it (None: no item)."""

    def __init__(self, resource: str, current: dict[str, Any] | None):
        super().__init__(f"lease on {resource!r} is no longer held")
        self.resource = resource
        self.current = current


@dataclass
class Leases:
    """Lease operations on one lease table. ``clock`` returns epoch seconds (inject it in tests).

    ``key_attr`` is the table's partition key (``turnstile_ddb.cdk.LeaseTable``'s default);
    ``attributes`` the names its lease items' attributes are stored under (the defaults are
    what every earlier version wrote)."""

    client: DynamoDBClient
    table: str
    backoff: retry.Backoff = field(default_factory=retry.Backoff)
    clock: Callable[[], float] = time.time
    safety_margin_ms: int = SAFETY_MARGIN_MS
    key_attr: str = "resource"
    attributes: LeaseAttributes = field(default_factory=LeaseAttributes)

    def __post_init__(self) -> None:
        """Refuse a key attribute that is also one of the lease item's attributes."""
        stored = [(f"attributes.{name}", value) for name, value in self.attributes.named()]
        _checks.distinct_names("Leases", [("key_attr", self.key_attr), *stored])
        _checks.at_least("Leases", "safety_margin_ms", self.safety_margin_ms, 0)

    def wire_key(self, resource: str) -> dict[str, Any]:
        """The lease item's key for ``resource`` in DynamoDB's typed form (``{"S": ...}``), in
        the table's own key attribute."""
        return codec.encode_item({self.key_attr: resource})

    @deprecated(since="1.0.0", removed_in="2.0.0", use="Leases.wire_key")
    def key(self, resource: str) -> dict[str, Any]:
        """The typed key: :meth:`wire_key` under its old name (``key()`` means plain values)."""
        return self.wire_key(resource)

    def names(self, *placeholders: str) -> dict[str, str]:
        """ExpressionAttributeNames for the lease item's placeholders (``#expiresAt``, ...), in
        this table's stored names (``#resource``: its key attribute)."""
        return _item.expression_names(self.attributes, placeholders, self.key_attr)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def time_left_ms(self, lease: Lease) -> int:
        """How long the holder may still act, keeping the clock-skew margin (can be negative)."""
        return lease.expires_at_ms - self.safety_margin_ms - self.now_ms()

    def _duration_ms(self, ttl_ms: int, remaining_ms: Callable[[], int] | None) -> int:
        return _item.duration_ms(ttl_ms, remaining_ms, self.safety_margin_ms)

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
        """One attempt: a lease of ``ttl_ms`` (its duration: ``expiresAt`` = now + ``ttl_ms``).
        Raises :class:`Held` when a live lease exists or waiters are queued.

        Not retried after a timeout (``ADD`` is not idempotent): that surfaces as
        :class:`turnstile_ddb.retry.OutcomeUnknown`, and a lease taken that way simply expires.
        """
        return _core.run(self.client, acquire_protocol(self, resource, owner, ttl_ms, remaining_ms))

    @staticmethod
    def _taken(
        resource: str, write: _item.Acquisition, previous: dict[str, Any] | None, attempts: int
    ) -> Lease:
        fence = int((previous or {}).get("fence", 0)) + 1
        return Lease(
            resource, write.owner, fence, write.expires_at_ms, write.now_ms,
            attempts=attempts, previous=previous,
        )  # fmt: skip

    def _old(self, exc: BaseException) -> dict[str, Any] | None:
        """The ALL_OLD item of a refusal, with the default names."""
        return _item.logical(self.attributes, codec.old_item(exc))

    @deprecated(since="1.0.0", removed_in="2.0.0", use="Leases.acquire or LeaseQueue.acquire")
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
        """The raw acquisition write (see ``acquire`` above), public only so that the queue could
        make it; both now share a private one."""
        write = _item.Acquisition(
            owner, expires_at, now, condition, also_set, also_remove, extra_values or {},
            acquisition or _item.new_acquisition(),
        )  # fmt: skip
        return _core.run(self.client, _item.take_protocol(self, resource, write))

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

        Between attempts it sleeps a full-jitter exponential delay from ``waits`` (its ``sleep``
        is the one used: inject it in tests), but never longer than until the holder's
        ``expiresAt`` (plus a little jitter): an expired holder is taken over promptly and an
        early release is noticed by the next poll. Only the acquire call is repeated; nothing the
        caller does is. Raises :class:`Held` at the end; ``attempts`` (on the lease or on
        :class:`Held`) counts the DynamoDB calls of every attempt.
        """
        attempt = _core.Invoke(
            lambda: self.acquire(resource, owner, ttl_ms, remaining_ms=remaining_ms)
        )
        return _core.run(
            self.client, acquire_wait_protocol(self, attempt, wait_ms, waits, remaining_ms)
        )

    # -- renew, release --------------------------------------------------------------------------

    @_contract.write
    def renew(
        self, lease: Lease, ttl_ms: int, *, remaining_ms: Callable[[], int] | None = None
    ) -> Lease:
        """Extend ``lease`` to now + ``ttl_ms``; :class:`LeaseLost` if it is no longer this
        lease."""
        return _core.run(self.client, renew_protocol(self, lease, ttl_ms, remaining_ms))

    @_contract.write
    def release(self, lease: Lease) -> None:
        """Expire ``lease`` now (the item stays, so the fence keeps counting); :class:`LeaseLost`
        if a successor holds it. Safe to repeat.

        Only a live lease is written: one already released, or run out with nobody taking it,
        is answered as released without a write (metric ``LeaseReleaseRepeated``), so a resent
        or late release never moves ``releasedAt``, the clock the queue passes a dead head by."""
        _core.run(self.client, release_protocol(self, lease))

    # -- fenced writes ---------------------------------------------------------------------------

    def guard(self, lease: Lease) -> dict[str, Any]:
        """A ``TransactWriteItems`` element that holds only while ``lease`` is the current one:
        this owner and fence, not released, not expired."""
        return self._guard(lease, self.now_ms())

    def _guard(self, lease: Lease, now: int) -> dict[str, Any]:
        return {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": self.wire_key(lease.resource),
                "ConditionExpression": (
                    "#owner = :owner AND #fence = :fence "
                    "AND attribute_not_exists(#releasedAt) AND #expiresAt > :now"
                ),
                "ExpressionAttributeNames": self.names(
                    "#owner", "#fence", "#releasedAt", "#expiresAt"
                ),
                "ExpressionAttributeValues": codec.values(
                    owner=lease.owner, fence=lease.fence, now=now
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
        _core.run(self.client, transact_protocol(self, lease, items, token))

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
        the lock (an emulated SELECT ... FOR UPDATE inside a retried transaction repeats
        everything before its lock, side effects included). The body must
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
            with contextlib.suppress(*_RELEASE_NOT_RAISED):
                self.release(lease)


# What a release on leaving ``hold`` does not raise (the lease then ends at expiresAt).
_RELEASE_NOT_RAISED = (
    LeaseLost, retry.RetriesExhausted, retry.OutcomeUnknown, errors.TurnstileError,
)  # fmt: skip


# -- the protocols (turnstile_ddb._core), driven by Leases here and by turnstile_ddb.aio.lease ----
# The clock (Leases.clock) is read through the driver (a Now effect), as Backoff.clock is: the
# protocol reads it at exactly the points the 1.x code did. ``remaining_ms`` (the invocation's
# remaining time) is called directly: it is the caller's pure read of its own context.


def now_protocol(leases: Leases) -> _core.Steps[int]:
    """:meth:`Leases.now_ms`, the clock read through the driver."""
    now: float = yield _core.Now(leases.clock)
    return int(now * 1000)


def acquire_protocol(
    leases: Leases, resource: str, owner: str, ttl_ms: int, remaining_ms: Callable[[], int] | None
) -> _core.Steps[Lease]:
    """:meth:`Leases.acquire`'s protocol, for both front doors."""
    now = yield from now_protocol(leases)
    write = _item.Acquisition(
        owner, now + leases._duration_ms(ttl_ms, remaining_ms), now, _item.FREE_AND_NO_QUEUE
    )
    metrics.count("LeaseAttempt", pattern=PATTERN)
    try:
        previous = yield from _item.take_protocol(leases, resource, write)
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        metrics.count("LeaseBusy", pattern=PATTERN)
        previous = yield from _clear_stale_queue(leases, resource, write, leases._old(exc) or {})
        return leases._taken(resource, write, previous, attempts=2)
    return leases._taken(resource, write, previous, attempts=1)


def _clear_stale_queue(
    leases: Leases, resource: str, write: _item.Acquisition, item: dict[str, Any]
) -> _core.Steps[dict[str, Any] | None]:
    """Refused: take the lease past a queue whose waiters are gone (a restore, dead waiters:
    the queue itself would have passed its head over I ago, and nobody queued since), with
    the queue cleared in the same write; :class:`Held` (from the refusal) otherwise."""
    now = write.now_ms
    stale, idle = _item.stale_queue_times(now, *_item.queue_times(item))
    left = _item.left_queue(item) if int(item.get("expiresAt", 0)) < now else None
    if left is not None:
        condition, values = left  # every waiter left: nobody is queued
    elif _item.stale_queue(item, now, stale, idle):
        condition = _item.STALE_QUEUE
        values = codec.values(head=int(item.get("head", 1)), stale=stale, idle=idle)
    else:
        raise _refused(resource, item, now)
    clear = replace(
        write,
        condition=condition,
        also_set=", #head = #tickets + :one",
        also_remove=", #left",
        values=values,
    )
    try:
        previous = yield from _item.take_protocol(leases, resource, clear)
    except ClientError as again:
        if not retry.condition_failed(again):
            raise
        raise _refused(resource, leases._old(again), now, attempts=2) from again
    metrics.count("LeaseQueueCleared", pattern=PATTERN)
    return previous


def acquire_wait_protocol(
    leases: Leases,
    try_once: _core.Invoke,
    wait_ms: int,
    waits: retry.Backoff,
    remaining_ms: Callable[[], int] | None,
) -> _core.Steps[Lease]:
    """:meth:`Leases.acquire_wait`'s protocol: each try is ``try_once`` (the front door's own
    ``acquire``, as 1.x called it), its sleeps ``Sleep`` effects (``waits.sleep``)."""
    start = yield from now_protocol(leases)
    deadline = start + wait_ms
    if remaining_ms is not None:
        deadline = min(deadline, start + remaining_ms() - 2 * leases.safety_margin_ms)
    attempt = calls = 0
    while True:
        attempt += 1
        try:
            lease: Lease = yield try_once
        except Held as held:
            calls += held.attempts
            now = yield from now_protocol(leases)
            if now >= deadline:
                held.attempts = calls
                metrics.timing("LeaseWait", now - start, pattern=PATTERN)
                metrics.count("LeaseWaitGaveUp", pattern=PATTERN)
                raise
            until_expiry_ms = max(0, held.expires_at_ms - now)
            delay_ms = min(
                waits.delay(attempt) * 1000,
                until_expiry_ms + waits.rand() * waits.base * 1000,
                deadline - now,
            )
            yield _core.Sleep(delay_ms / 1000, waits.sleep)
            continue
        metrics.timing("LeaseWait", (yield from now_protocol(leases)) - start, pattern=PATTERN)
        return replace(lease, attempts=calls + lease.attempts)


def renew_protocol(
    leases: Leases, lease: Lease, ttl_ms: int, remaining_ms: Callable[[], int] | None
) -> _core.Steps[Lease]:
    """:meth:`Leases.renew`'s protocol."""
    expires_at_ms = (yield from now_protocol(leases)) + leases._duration_ms(ttl_ms, remaining_ms)
    yield from _owned_update(
        leases,
        lease,
        "SET #expiresAt = :expiresAt",
        "#owner = :owner AND #fence = :fence AND attribute_not_exists(#releasedAt)",
        codec.values(expiresAt=expires_at_ms),
    )
    return replace(lease, expires_at_ms=expires_at_ms)


def release_protocol(leases: Leases, lease: Lease) -> _core.Steps[None]:
    """:meth:`Leases.release`'s protocol."""
    now = yield from now_protocol(leases)
    yield from _owned_update(
        leases,
        lease,
        "SET #expiresAt = :zero, #releasedAt = :now",
        "#owner = :owner AND #fence = :fence "
        "AND attribute_not_exists(#releasedAt) AND #expiresAt >= :now",
        codec.values(zero=0, now=now),
        already=lambda item: (
            int(item.get("fence", -1)) == lease.fence and item.get("owner") == lease.owner
        ),
    )


def _owned_update(
    leases: Leases,
    lease: Lease,
    update: str,
    condition: str,
    values: dict[str, Any],
    already: Callable[[dict[str, Any]], bool] | None = None,
) -> _core.Steps[None]:
    """The update of ``lease``'s own item; refused, :class:`LeaseLost`, unless ``already``
    says the item as it is (its ALL_OLD image) is the update's outcome already."""
    params = {
        "TableName": leases.table,
        "Key": leases.wire_key(lease.resource),
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": leases.names("#owner", "#fence", "#expiresAt", "#releasedAt"),
        "ExpressionAttributeValues": {
            **values,
            **codec.values(owner=lease.owner, fence=lease.fence),
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    try:
        yield from retry.retrying(
            _core.Call("update_item", params),
            backoff=leases.backoff,
            idempotent=True,  # same values, same condition: a resend changes nothing more
            pattern=PATTERN,
        )
    except ClientError as exc:
        if retry.condition_failed(exc):
            current = leases._old(exc)
            if already is not None and current is not None and already(current):
                metrics.count("LeaseReleaseRepeated", pattern=PATTERN)
                return
            metrics.count("LeaseLost", pattern=PATTERN)
            raise LeaseLost(lease.resource, current) from exc
        raise


def transact_protocol(
    leases: Leases, lease: Lease, items: Sequence[dict[str, Any]], token: str | None
) -> _core.Steps[None]:
    """:meth:`Leases.transact`'s protocol: the guard's ``:now`` read through the driver."""
    guard = leases._guard(lease, (yield from now_protocol(leases)))
    try:
        yield from transact.transact_write_protocol(
            [guard, *items], backoff=leases.backoff, token=token, pattern=PATTERN
        )
    except transact.Cancelled as exc:
        if exc.failed_at(0):
            metrics.count("FencedWriteRefused", pattern=PATTERN)
            raise LeaseLost(
                lease.resource, _item.logical(leases.attributes, exc.reasons[0].item)
            ) from exc
        raise transact.Cancelled(exc.reasons[1:]) from exc


def fenced_update_protocol(
    *,
    table: str,
    key: Mapping[str, Any],
    fence: int,
    changes: Mapping[str, Any],
    backoff: retry.Backoff,
    fence_attr: str = "lastFence",
    extra: Mapping[str, Any] | None = None,
) -> _core.Steps[dict[str, Any]]:
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
    params = {
        "TableName": table,
        "Key": codec.encode_item(key),
        "UpdateExpression": "SET " + ", ".join(assignments),
        "ConditionExpression": "attribute_not_exists(#lastFence) OR #lastFence < :fence",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    try:
        response = yield from retry.retrying(
            _core.Call("update_item", params),
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


fenced_update = _contract.write(_core.driven(fenced_update_protocol))
