"""Fair waiting for a lease: a FIFO ticket queue per resource, paced waits, bounded waits.

:meth:`turnstile_ddb.lease.Leases.acquire_wait` waits by retrying: every waiter polls the lease
item,
nobody is served in order, and a holder that dies keeps everybody out for its whole lease. This
module adds a queue in front of the same lease item, in the same table (no new infrastructure):
tickets served strictly in order, like ZooKeeper's lock recipe, built from conditional writes.

Hand-written because no maintained Python library offers a fenced, fair lease on DynamoDB (the
DynamoDB lock client is Java, unfair, and unfenced; see docs/patterns/leases.md).

**Cost.** A waiter takes a ticket, sleeps until its turn, claims, and later releases: three calls
when it wakes on time. Nothing is written while it waits: no waiter row, no heartbeat. Every look
is a claim attempt whose refusal hands back the item as it is
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so a look costs one call and a look on time is
the acquisition itself.

**Fast path** (two calls: the grab and the release). A process that last saw a resource free with
nobody queued (:attr:`LeaseQueue.quiet`: its ticket found the lease free and itself at the head,
and no claim or grab of its own has met a queue since) first tries to take a ticket and be served
in one write, under the plain acquisition's condition, so it never jumps a queue; refused
(someone holds or queued since), it forgets the hint and queues as usual, one call dearer. A hint
only: the condition decides, and a wrong hint costs one refused write, never order or a fence::

    UpdateItem <resource>  (Leases.take, like a claim)
      UpdateExpression: SET #owner, #expiresAt, #acquiredAt, #acquisition as a claim,
                            #tickets = if_not_exists(#head, :one),        (ticket = old head)
                            #head = if_not_exists(#head, :one) + :one,
                            #lastHoldMs = <as a claim>
                        REMOVE #releasedAt, #purgeAt, #reapAt   ADD #fence :one
      ConditionExpression: (attribute_not_exists(#resource) OR #expiresAt < :now)
                           AND (attribute_not_exists(#tickets) OR #head > #tickets)

``head <= tickets + 1`` always holds (every write moves the head to at most one past a ticket
handed out), so an empty queue has ``head = tickets + 1``, and the grab's ticket is the next one,
above every ticket served before: FIFO order and the fence hold across both kinds.

**Pace.** Waiters sleep by how long holders *hold* (``holdMs``, from releases the item recorded),
never by how long waiters waited: a wait includes every oversleep before it, so pacing by it fed
on itself (measured: the lease sat free about 0.7 s between a 20 ms hold and the next claim). The
next in line sleeps until the holder's ``acquiredAt`` plus the hold, then polls; a waiter further
back sleeps the holder's rest plus its place in line times one turn, the hold plus two of its own
call latencies (at least one poll), or the serving rate it has seen if that is shorter.

**The lease item** (:mod:`turnstile_ddb.lease`'s, plus the queue's attributes):

=================  =================================================================================
``tickets``        the last ticket handed out
``head``           the lowest ticket not yet served or passed over (``head > tickets``: empty queue)
``queuedAt``       when the last ticket was taken (epoch ms, the waiter's clock)
``turnMs``         a running average of the time between acquisitions, written by each claim
``lastHoldMs``     the hold the last claim ended (its ``releasedAt - acquiredAt``; 0: none ended)
``holdMs``         a running average of ``lastHoldMs`` (one claim behind), written by each claim
``beatTicket``     the ticket that last said it was next in line, ``beatAt`` when (see *Liveness*)
``skippedAt``      when the head was last moved past a ticket nobody came for
``left``           a number set: tickets whose waiters left at their deadline
``queueExpiryMs``  L, and I (``queueIdleMs``), of the last ticket's waiter (:class:`QueueSettings`):
                   what a plain acquisition judges the queue by
=================  =================================================================================

A waiter that leaves also writes a tombstone row ``<resource>#q#<ticket>`` (``owner``,
``ticket``, ``queueOf``, ``expiresAt = 0``, and ``reapAt``, the table's TTL attribute, a day
ahead); the ticket's pass-over deletes it, and TTL cleans up one nobody came to pass over.
Resource names containing ``#q#`` are reserved (the service's names cannot contain ``#``).

**Take a ticket** (one atomic ADD; the answer shows head, holder, fence and pace: no read)::

    UpdateItem <resource>
      UpdateExpression: ADD #tickets :one
                        SET #head = if_not_exists(#head, :one),
                            #fence = if_not_exists(#fence, :zero),
                            #expiresAt = if_not_exists(#expiresAt, :zero), #queuedAt = :now,
                            #queueExpiryMs = L, #queueIdleMs = I      (this waiter's settings)
      ReturnValues: ALL_NEW           (ticket = tickets)

**Claim** (:meth:`turnstile_ddb.lease.Leases.take`, the same write a plain acquisition makes, so the
fence comes from the item's own fence and strictly increases across both kinds and never goes
behind the item it lives on: a restored table continues from the restored item's fence)::

    UpdateItem <resource>
      UpdateExpression: SET #owner = :owner, #expiresAt = :expiresAt, #acquiredAt = :now,
                            #acquisition = :acquisition,
                            #head = :next, #turnMs = :turn, #holdMs = :hold, (:next = t + 1)
                            #lastHoldMs = if_not_exists(#releasedAt, :now)
                                          - if_not_exists(#acquiredAt, :now)
                        REMOVE #releasedAt, #purgeAt
                        ADD #fence :one
      ConditionExpression: #head = :ticket AND #expiresAt < :now
      ReturnValues: ALL_OLD  (new fence = old fence + 1; ALL_OLD on a refusal too: the look)

A plain :meth:`Leases.acquire` adds ``#head > #tickets`` (nobody queued) to its condition, so it
never jumps the queue; it takes a free lease past a queue only when the queue's own pass-over
rule (*Liveness*, next; with the L and I the tickets wrote) held for its head already I ago and
nobody queued for 2 I (its waiters are gone, as after a restore: a live one would have acted
since), and then clears it (``SET #head = #tickets + :one``, metric ``LeaseQueueCleared``).

**Liveness** (passing over a waiter that does not come). Waiter ``t`` may pass over the head
``k < t`` when the lease has been free for L (no release, expiry or pass-over since ``:stale`` =
now - L) and the head is silent: if ``k`` said it was next (a beat, below), its last beat is L
old; otherwise it has been the head for I (``idle_ms``, default 4 L: no claim or pass-over since
``:idle`` = now - I, and ``t`` itself queued I ago, after ``k``)::

    UpdateItem <resource>  SET #head = :next, #skippedAt = :now       (:next = k + 1)
      ConditionExpression: #head = :head AND #expiresAt < :now
        AND #expiresAt < :stale AND (attribute_not_exists(#releasedAt) OR #releasedAt < :stale)
        AND (attribute_not_exists(#skippedAt) OR #skippedAt < :stale)
        AND ((#beatTicket = :head AND #beatAt < :stale)
             OR ((attribute_not_exists(#beatTicket) OR #beatTicket <> :head)
                 AND (attribute_not_exists(#acquiredAt) OR #acquiredAt < :idle)
                 AND (attribute_not_exists(#skippedAt) OR #skippedAt < :idle)))

(right behind ``k``, the claim itself carries this condition and takes the lease in the same
write). A live waiter is never passed over: further back it sleeps at most I - H at a time, so it
looks within I of becoming the head; once it sees it is next at a live holder it sleeps at most
L - H, so it claims within L of the lease coming free, and, from H after it first saw that on,
it **beats** every H::

    UpdateItem <resource>  SET #beatTicket = :ticket, #beatAt = :now
      ConditionExpression: #head = :ticket       ReturnValues: ALL_NEW (also the look)

The first beat waits H because most holds are shorter: beating at once cost a write per
acquisition wherever the next in line looked while the holder held. Until it beats it is in the
I regime, which is safe for a live waiter (it comes within L - H of the release, long before I),
and costs only a dead one: a waiter that dies in its first H as next in line holds the queue up
until it has been the head for I (and the lease free for L), not L after its last beat.

A holder that stops heartbeating (:class:`Heartbeat` renews every H) is taken over L after its
last renewal plus one poll: the next waiter, beating, sleeps until the holder's expiry at most.

**Leave** (the deadline passed), one transaction, so whoever looks next passes it over at once::

    TransactWriteItems
      Put <resource>#q#<t>  expiresAt = 0                               (the tombstone)
      Update <resource>  ADD #left :t   ConditionExpression: #head <= :t

    pass-over: TransactWriteItems
      Delete <resource>#q#<k>  for each left k in [head, front)
      Update <resource>  SET #head = :front, #skippedAt = :now  DELETE #left :passed
        ConditionExpression: #head = :head

A queue call whose answer was lost is not resent (``ADD`` would take a second ticket); the waiter
takes a new ticket while its deadline allows, and the orphan, if it was taken, is passed over
after I like any silent waiter. A waiter that finds the head past its ticket (passed over), or the
ticket counter behind its ticket (a restore took it back, so the number may be handed out again),
takes a new ticket while its deadline allows.

A claim or grab whose answer was lost is settled by one consistent read: every acquisition writes
an id of its own on the item (``acquisition``, a new random id per write), so
the item shows this write's id only if it was applied and nobody has acquired since. The owner
cannot tell: one owner (a user, over HTTP) may be queued many times at once, and a successor with
the same owner would hand this waiter its own fence.

**Clocks.** ``now`` is the caller's clock (:attr:`Leases.clock`), compared by the database with
times written by other clients' clocks, as in :mod:`turnstile_ddb.lease`. A skewed clock can pass
over
a live waiter early or take a lease early; that costs fairness, never safety: the holder's fence
still strictly increases, and fenced writes refuse the older holder. Deadlines are measured on the
local monotonic clock and never depend on other clients.

**Metrics** (pattern ``lease``): ``LeaseQueued`` per ticket, ``LeaseWait`` (ms) per queued wait,
``LeaseWaitGaveUp`` when a deadline passed, ``LeaseWaiterSkipped`` per ticket passed over (silent
or left), ``LeaseSkipRefused`` per pass-over write (from further back than right behind the head)
that the condition refused, ``LeasePassedOver`` when this waiter was passed over itself or its
ticket taken back, ``LeaseTakeover`` per acquisition from a holder that had not released,
``LeaseAttempt`` and ``LeaseBusy`` per claim or grab (the fast path) and per refused one,
``LeaseLeaveFailed`` per leave that could not be written (throttled, unanswered: the ticket is
then passed over after I), ``LeaseHeartbeatFailed`` per :class:`Heartbeat` renewal that failed
(the next beat tries again; a renewal refused is ``LeaseLost``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from turnstile_ddb import _contract, _core, lease
from turnstile_ddb import _queue_waiting as _waiting
from turnstile_ddb import _queue_writes as _writes
from turnstile_ddb._lease_item import QueueSettings
from turnstile_ddb._queue_writes import MAX_QUIET as MAX_QUIET  # where they always were
from turnstile_ddb._queue_writes import MAX_SKIP as MAX_SKIP
from turnstile_ddb._queue_writes import PATTERN as PATTERN
from turnstile_ddb._queue_writes import SEPARATOR as SEPARATOR
from turnstile_ddb._queue_writes import TOMBSTONE_REAP_S as TOMBSTONE_REAP_S
from turnstile_ddb._queue_writes import PassedOver, WaitTimedOut, _Wait, waiter_key

__all__ = [
    "METRICS",
    "Heartbeat",
    "LeaseQueue",
    "PassedOver",
    "QueueSettings",
    "WaitTimedOut",
    "waiter_key",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = (
    "LeaseAttempt",
    "LeaseBusy",
    "LeaseWait",
    "LeaseWaitGaveUp",
    "LeaseQueued",
    "LeaseWaiterSkipped",
    "LeaseSkipRefused",
    "LeasePassedOver",
    "LeaseTakeover",
    "LeaseLeaveFailed",
    "LeaseHeartbeatFailed",
)
# Where they are counted: the queue's protocols (tests/unit/test_metric_declarations.py reads them).
_PROTOCOL_MODULES = (_waiting, _writes)


@dataclass
class LeaseQueue:
    """FIFO waiting on :class:`turnstile_ddb.lease.Leases` (same client, table, stored names,
    clock and backoff). ``sleep`` and ``monotonic`` are the waiter's naps and deadline clock:
    inject them (with ``Leases.clock``) to run waits on virtual time."""

    leases: lease.Leases
    settings: QueueSettings = field(default_factory=QueueSettings)
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    on_ticket: Callable[[str, str, int], None] | None = None  # (resource, owner, ticket) hook
    # Resources this process last saw free with nobody queued (see *Fast path*): a hint only,
    # the condition decides.
    quiet: set[str] = field(default_factory=set)

    def deadline(self, wait_ms: int, remaining_ms: Callable[[], int] | None = None) -> float:
        """The monotonic time a wait of ``wait_ms`` must end by (inside Lambda: the invocation's
        remaining time minus ``margin_ms``, whichever comes first)."""
        return _core.run(None, _waiting.deadline_protocol(self, wait_ms, remaining_ms))

    @_contract.write
    def acquire(
        self,
        resource: str,
        owner: str,
        *,
        wait_ms: int,
        ttl_ms: int | None = None,
        remaining_ms: Callable[[], int] | None = None,
    ) -> lease.Lease:
        """Queue for ``resource`` and return the lease when served, in ticket order.

        Waits at most ``wait_ms`` (and never past ``remaining_ms() - margin_ms``); then leaves the
        queue and raises :class:`WaitTimedOut`. The lease lasts ``ttl_ms`` (its duration; default
        ``L``): renew it every ``H`` (:class:`Heartbeat`); given ``remaining_ms`` it is also cut
        to end before the invocation does, which suits a lease the invocation holds itself: for a
        lease handed to someone outside it (an HTTP client), bound ``wait_ms`` by the remaining
        time instead and leave ``remaining_ms`` out, so the lease lasts ``ttl_ms``. A waiter
        passed over (it did not come for its turn within L) takes a new ticket while time is left.
        ``Lease.attempts`` (and ``WaitTimedOut.attempts``) counts the DynamoDB calls spent.
        """
        steps = _waiting.acquire_protocol(self, resource, owner, wait_ms, ttl_ms, remaining_ms)
        return _core.run(self.leases.client, steps)

    def _enqueue(self, resource: str, owner: str) -> _Wait:
        """Take a ticket and nothing more (tests leave a waiter behind with it)."""
        return _core.run(self.leases.client, _waiting._enqueue(self, resource, owner))

    def _leave(self, wait: _Wait) -> None:
        """Leave the queue with ``wait``'s ticket (tests make a waiter give up with it)."""
        _core.run(self.leases.client, _writes._leave(self, wait))

    # -- holding -----------------------------------------------------------------------------

    def heartbeat(
        self, held: lease.Lease, *, remaining_ms: Callable[[], int] | None = None
    ) -> Heartbeat:
        """``with queue.heartbeat(lease) as beat:`` renew ``lease`` every H on a thread."""
        return Heartbeat(
            self.leases,
            held,
            period_ms=self.settings.heartbeat_ms,
            ttl_ms=self.settings.expiry_ms,
            remaining_ms=remaining_ms,
            margin_ms=self.settings.margin_ms,
        )

    @contextmanager
    def hold(
        self,
        resource: str,
        owner: str,
        *,
        wait_ms: int,
        ttl_ms: int | None = None,
        remaining_ms: Callable[[], int] | None = None,
    ) -> Iterator[Heartbeat]:
        """``with queue.hold(...) as beat:`` queue for ``resource`` (:meth:`acquire`), hold it
        while the body runs with :meth:`heartbeat` renewing it (``beat.lease`` is the latest
        lease, ``beat.lost`` is set if it was taken over), and release it on leaving, also on an
        exception. A release that fails is not raised (the lease ends at its ``expiresAt``)."""
        held = self.acquire(
            resource, owner, wait_ms=wait_ms, ttl_ms=ttl_ms, remaining_ms=remaining_ms
        )
        beat = self.heartbeat(held, remaining_ms=remaining_ms)
        try:
            with beat:
                yield beat
        finally:
            with contextlib.suppress(*lease._RELEASE_NOT_RAISED):
                self.leases.release(beat.lease)


class Heartbeat:
    """Renews a lease every ``period_ms`` on a daemon thread for the duration of a ``with`` block.

    Lambda-safe: given ``remaining_ms`` (the context's ``get_remaining_time_in_millis``), it stops
    renewing once less than ``margin_ms`` is left, and never extends the lease past that point, so
    a frozen or finished invocation leaves a lease that expires by itself. :attr:`lease` is the
    latest renewed lease; :attr:`lost` is set when a renewal is refused (taken over: stop writing,
    the fence would refuse you anyway). The thread is joined on exit.

    ``sleep`` and ``start`` run the renewals on someone else's time (a simulator's virtual time, a
    test's fake clock): given ``sleep``, the loop naps with it between renewals and looks whether
    it was stopped after each nap (so leaving the block may wait up to one period), instead of
    waiting on a :class:`threading.Event` with a real timeout; given ``start``, the loop is handed
    to it instead of a new thread, and the function it returns is called on exit to wait for the
    loop's end.
    """

    def __init__(
        self,
        leases: lease.Leases,
        held: lease.Lease,
        *,
        period_ms: int,
        ttl_ms: int,
        remaining_ms: Callable[[], int] | None = None,
        margin_ms: int = 1000,
        sleep: Callable[[float], None] | None = None,
        start: Callable[[Callable[[], None]], Callable[[], None]] | None = None,
    ) -> None:
        self.leases = leases
        self.lease = held
        self.period_ms = period_ms
        self.ttl_ms = ttl_ms
        self.remaining_ms = remaining_ms
        self.margin_ms = margin_ms
        self.lost = threading.Event()
        self.renewals = 0
        self._stop = threading.Event()
        self._sleep = sleep
        self._start = start
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
        self._join: Callable[[], None] = self._thread.join

    def __enter__(self) -> Heartbeat:
        if self._start is None:
            self._thread.start()
        else:
            self._join = self._start(self._run)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._join()

    def _stopped_after(self, seconds: float) -> bool:
        """Wait ``seconds`` (or until stopped, on the default event); whether it was stopped."""
        if self._sleep is None:
            return self._stop.wait(seconds)
        self._sleep(seconds)
        return self._stop.is_set()

    def _renewed(self, ttl_ms: int) -> lease.Lease:
        return self.leases.renew(self.lease, ttl_ms)

    def _set_lost(self) -> None:
        self.lost.set()

    def _run(self) -> None:
        _core.run(None, _waiting.heartbeat_protocol(self))
