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

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from turnstile_ddb import _contract, codec, errors, lease, metrics, retry, transact
from turnstile_ddb import _lease_item as _item
from turnstile_ddb._lease_item import QueueSettings

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

PATTERN = _item.PATTERN
SEPARATOR = "#q#"
TOMBSTONE_REAP_S = 86_400  # a tombstone's TTL: a day, far past any wait
MAX_SKIP = 50
MAX_QUIET = 1024  # resources a process remembers as quiet (an arbitrary one is forgotten past it)


# The claim records the hold it ends (its release minus its acquisition, from the item's own
# values: the claimer never saw the release) as ``lastHoldMs``; a takeover records the time since
# the acquisition, which :meth:`LeaseQueue._hold_sample` discards as longer than L.
LAST_HOLD = "if_not_exists(#releasedAt, :now) - if_not_exists(#acquiredAt, :now)"
# What a claim sets besides the acquisition: the head past its ticket, and the pace it records.
CLAIM_SET = f", #head = :next, #turnMs = :turn, #holdMs = :hold, #lastHoldMs = {LAST_HOLD}"


def waiter_key(resource: str, ticket: int) -> str:
    """The key of the waiter row of ``ticket`` in ``resource``'s queue."""
    return f"{resource}{SEPARATOR}{ticket}"


class PassedOver(errors.Retryable):
    """The queue moved past this waiter's ticket (it did not come for its turn in time), or a
    restore took the ticket back."""

    def __init__(self, resource: str, ticket: int) -> None:
        super().__init__(f"ticket {ticket} of {resource!r} was passed over")
        self.resource = resource
        self.ticket = ticket


class WaitTimedOut(lease.Held):
    """The deadline passed before this waiter's turn; it left the queue. ``position`` is how many
    tickets were still ahead of it (0: it was next, the holder was still live)."""

    def __init__(
        self,
        resource: str,
        owner: str,
        expires_at_ms: int,
        fence: int,
        *,
        position: int,
        attempts: int,
    ) -> None:
        super().__init__(resource, owner, expires_at_ms, fence, attempts)
        self.position = position


@dataclass
class _Wait:
    """One waiter's state while it waits on one ticket."""

    resource: str
    owner: str
    ticket: int
    queued_at: float  # monotonic: when it queued (took its ticket)
    item: dict[str, Any]  # the lease item as last seen
    calls: int = 0
    polls: int = 0  # looks as the head at a live holder past its expected release
    first_head: int = 0  # the head when the ticket was taken (for the serving rate)
    beat_due: float | None = None  # monotonic: when it next says it is next (None: not next yet)
    latency: float = 0.0  # seconds: how long its last queue or claim call took

    @property
    def key(self) -> str:
        return waiter_key(self.resource, self.ticket)

    @property
    def head(self) -> int:
        return int(self.item.get("head", 1))

    @property
    def left(self) -> set[int]:
        return {int(ticket) for ticket in self.item.get("left", ())}

    @property
    def front(self) -> int:
        """The first ticket from the head on that has not left (this ticket at most)."""
        front, left = self.head, self.left
        while front < self.ticket and front in left:
            front += 1
        return front

    @property
    def position(self) -> int:
        """Tickets still ahead of this one that have not left (0: next in line)."""
        left = self.left
        return sum(1 for k in range(self.head, self.ticket) if k not in left)


@dataclass
class _Request:
    """One call of :meth:`LeaseQueue.acquire`: what it asked for, and the DynamoDB calls it has
    spent on tickets given up (passed over, lost) and on the fast path."""

    resource: str
    owner: str
    deadline: float  # monotonic
    duration_ms: int  # the lease's duration (expiresAt = now + this, capped by remaining_ms)
    remaining_ms: Callable[[], int] | None
    started: float  # monotonic
    calls: int = 0


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

    @property
    def _client(self) -> Any:
        return self.leases.client

    @property
    def _table(self) -> str:
        return self.leases.table

    def deadline(self, wait_ms: int, remaining_ms: Callable[[], int] | None = None) -> float:
        """The monotonic time a wait of ``wait_ms`` must end by (inside Lambda: the invocation's
        remaining time minus ``margin_ms``, whichever comes first)."""
        budget = wait_ms
        if remaining_ms is not None:
            budget = min(budget, remaining_ms() - self.settings.margin_ms)
        return self.monotonic() + max(0, budget) / 1000

    # -- acquire ---------------------------------------------------------------------------------

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
        request = _Request(
            resource,
            owner,
            deadline=self.deadline(wait_ms, remaining_ms),
            duration_ms=ttl_ms if ttl_ms is not None else self.settings.expiry_ms,
            remaining_ms=remaining_ms,
            started=self.monotonic(),
        )
        try:
            held = self._fast_path(request) or self._queue(request)
        except WaitTimedOut:
            self._waited(request)
            metrics.count("LeaseWaitGaveUp", pattern=PATTERN)
            raise
        self._waited(request)
        return held

    def _waited(self, request: _Request) -> None:
        metrics.timing("LeaseWait", (self.monotonic() - request.started) * 1000, pattern=PATTERN)

    def _fast_path(self, request: _Request) -> lease.Lease | None:
        """A resource last seen quiet: one write that takes a ticket and is served at once (see
        *Fast path*); None (the call counted) if refused."""
        if request.resource not in self.quiet:
            return None
        request.calls += 1
        held = self._grab(request)
        return None if held is None else replace(held, attempts=request.calls)

    def _queue(self, request: _Request) -> lease.Lease:
        """Take a ticket and wait on it; passed over, or the ticket call lost, queue again while
        the deadline allows."""
        while True:
            wait = self._ticket(request)
            if wait is None:
                continue
            try:
                held = self._wait(wait, request)
            except PassedOver:
                request.calls += wait.calls
                metrics.count("LeasePassedOver", pattern=PATTERN)
                if self.monotonic() >= request.deadline:
                    raise self._timed_out(wait, request.calls) from None
                continue
            except WaitTimedOut as timed_out:
                timed_out.attempts += request.calls
                raise
            return replace(held, attempts=request.calls + wait.calls)

    def _ticket(self, request: _Request) -> _Wait | None:
        """A new ticket; None when the call's answer was lost and time is left to take another
        (the ticket may have been taken: nobody comes for it, so it is passed over after I like
        a dead waiter's)."""
        try:
            return self._enqueue(request.resource, request.owner)
        except errors.OutcomeUnknown:
            request.calls += 1
            if self.monotonic() >= request.deadline:
                raise
            return None

    def _enqueue(self, resource: str, owner: str) -> _Wait:
        asked = self.monotonic()
        response = retry.call(
            lambda: self._client.update_item(
                TableName=self._table,
                Key=self.leases.wire_key(resource),
                UpdateExpression=(
                    "ADD #tickets :one SET #head = if_not_exists(#head, :one), "
                    "#fence = if_not_exists(#fence, :zero), "
                    "#expiresAt = if_not_exists(#expiresAt, :zero), #queuedAt = :now, "
                    "#expiryMs = :expiry, #idleMs = :idle"
                ),
                ExpressionAttributeNames=self.leases.names(
                    "#tickets", "#head", "#fence", "#expiresAt", "#queuedAt", "#expiryMs", "#idleMs"
                ),
                ExpressionAttributeValues=codec.values(
                    one=1,
                    zero=0,
                    now=self.leases.now_ms(),
                    expiry=self.settings.expiry_ms,
                    idle=self.settings.idle_ms,
                ),
                ReturnValues="ALL_NEW",
            ),
            backoff=self.leases.backoff,
            idempotent=False,  # a resend takes a second ticket
            pattern=PATTERN,
        )
        item = self._new(response)
        ticket = int(item["tickets"])
        metrics.count("LeaseQueued", pattern=PATTERN)
        if self.on_ticket is not None:
            self.on_ticket(resource, owner, ticket)
        wait = _Wait(resource, owner, ticket, self.monotonic(), item, calls=1)
        wait.latency = wait.queued_at - asked
        if ticket == wait.head and int(item.get("expiresAt", 0)) < self.leases.now_ms():
            if len(self.quiet) >= MAX_QUIET:
                self.quiet.pop()
            self.quiet.add(resource)  # free with nobody ahead: next time, grab it directly
        wait.first_head = wait.head
        return wait

    def _wait(self, wait: _Wait, request: _Request) -> lease.Lease:
        """Wait on ``wait``'s ticket until served (see *Liveness* and *Pace*), or leave at the
        deadline (:class:`WaitTimedOut`); :class:`PassedOver` if the queue moved past it."""
        deadline = request.deadline
        first = True  # even a spent deadline (wait_ms 0, a slow queue call) gets one look
        while True:
            if self.monotonic() >= deadline and not first:
                self._leave(wait)
                raise self._timed_out(wait, wait.calls)
            first = False
            if wait.head > wait.ticket or int(wait.item.get("tickets", 0)) < wait.ticket:
                # Passed over; or the counter is behind this ticket (a restored table), so the
                # ticket may be handed out again: queue again either way.
                raise PassedOver(wait.resource, wait.ticket)
            now = self.leases.now_ms()
            free = int(wait.item.get("expiresAt", 0)) < now
            front = wait.front
            if front > wait.head:
                self._pass_left(wait, front)  # tombstones ahead: passed over at once
                continue
            if front == wait.ticket:
                # Next in line (after any who left). Free: claim now. Held: nap until the
                # holder's expected release (or its expiry), then claim: the claim is the look.
                if not free and wait.beat_due is None:
                    # First seen next at a live holder: a hold shorter than H ends before any
                    # beat is due, and without one it is passed over only after I (safe: it
                    # naps at most L - H, so it comes for a free lease well within I).
                    wait.beat_due = self.monotonic() + self.settings.heartbeat_ms / 1000
                elif not free and self.monotonic() >= (wait.beat_due or 0.0):
                    self._beat(wait)  # it says it is next: from now on passed over after L
                    continue
                if not free:
                    self._nap(wait, deadline, self._until_release(wait, now))
                held = self._claim(wait, request)
                if held is not None:
                    return held
                continue
            if free and self._stale(wait, now):
                held = self._skip(wait, request)
                if held is not None:
                    return held
                continue
            self._nap(wait, deadline, self._until_turn(wait, now, free))
            held = self._claim(wait, request)
            if held is not None:
                return held

    # -- timing ----------------------------------------------------------------------------------

    def _turn_s(self, wait: _Wait) -> float:
        """Seconds per acquisition: the serving rate since this ticket was taken, else the one
        the last claims recorded on the item (``turnMs``), else four polls."""
        served = wait.head - wait.first_head
        if served >= 2:
            return (self.monotonic() - wait.queued_at) / served
        if "turnMs" in wait.item:
            return int(wait.item["turnMs"]) / 1000
        return 4 * self.settings.poll_ms / 1000

    def _until_release(self, wait: _Wait, now: int) -> float:
        """The head's pause at a live holder: until its expected release (acquiredAt plus one
        turn), then one poll, doubling to four; never past the holder's expiry."""
        hold = self._hold_ms(wait.item)
        turn = self._turn_s(wait) * 1000 if hold is None else hold
        expected = int(wait.item.get("acquiredAt", now)) + turn - now
        if expected <= 0:
            wait.polls += 1
            expected = self.settings.poll_ms * min(4, 2 ** (wait.polls - 1))
        until_expiry = int(wait.item.get("expiresAt", 0)) - now + 1
        return max(0.0, min(expected, until_expiry)) / 1000

    def _until_turn(self, wait: _Wait, now: int, free: bool) -> float:
        """A waiter further back sleeps its place in line times the time per acquisition (plus
        one poll, so it comes rather just after its turn than just before)."""
        turn = self._turn_s(wait)
        hold = self._hold_ms(wait.item)
        if hold is not None:
            turn = min(turn, hold / 1000 + max(2 * wait.latency, self.settings.poll_ms / 1000))
        holder = 0.0
        if not free:
            holder = max(0.0, (int(wait.item.get("acquiredAt", now)) - now) / 1000 + turn)
        return holder + wait.position * turn + self.settings.poll_ms / 1000

    def _nap(self, wait: _Wait, deadline: float, seconds: float) -> None:
        """Sleep, but never past the deadline, nor (next in line) for L - H, nor (further back)
        for I - H: a live waiter is never taken for dead (see *Liveness*)."""
        grace = self.settings.expiry_ms if wait.front == wait.ticket else self.settings.idle_ms
        cap = (grace - self.settings.heartbeat_ms) / 1000
        now = self.monotonic()
        self.sleep(max(0.0, min(seconds, cap, deadline - now)))

    def _stale(self, wait: _Wait, now: int) -> bool:
        """The head has not come for the free lease for L; and if it said it was next, its last
        beat is L old, else it has been the head for I (the last claim or pass-over moved it
        there, or it queued before this waiter, which queued I ago)."""
        settings = self.settings
        item = wait.item
        free = max(int(item.get(name, 0)) for name in ("expiresAt", "releasedAt", "skippedAt"))
        if free >= now - settings.expiry_ms:
            return False
        if int(item.get("beatTicket", 0)) == wait.head:
            return int(item.get("beatAt", 0)) < now - settings.expiry_ms
        if (self.monotonic() - wait.queued_at) * 1000 <= settings.idle_ms:
            return False
        head = max(int(item.get(name, 0)) for name in ("acquiredAt", "skippedAt"))
        return head < now - settings.idle_ms

    # -- writes ----------------------------------------------------------------------------------

    def _claim(self, wait: _Wait, request: _Request) -> lease.Lease | None:
        """Take the lease as the head if it is free; None (``wait.item`` refreshed) if not."""
        condition = "#head = :ticket AND #expiresAt < :now"
        return self._take(wait, request, condition, codec.values(ticket=wait.ticket))

    def _skip(self, wait: _Wait, request: _Request) -> lease.Lease | None:
        """Pass over a head that did not come for its turn in L: right behind it, take the lease
        in the same write; further back, only move the head on (and restart its clock)."""
        head = wait.head
        now = self.leases.now_ms()
        stale = codec.values(
            head=head, stale=now - self.settings.expiry_ms, idle=now - self.settings.idle_ms
        )
        condition = (
            f"#head = :head AND #expiresAt < :now AND {_item.STALE_HEAD} AND {_item.SILENT_HEAD}"
        )
        if head + 1 == wait.ticket:
            held = self._take(wait, request, condition, stale)
            if held is not None:
                metrics.count("LeaseWaiterSkipped", pattern=PATTERN)
            return held
        wait.calls += 1
        try:
            response = retry.call(
                lambda: self._client.update_item(
                    TableName=self._table,
                    Key=self.leases.wire_key(wait.resource),
                    UpdateExpression="SET #head = :next, #skippedAt = :now",
                    ConditionExpression=condition,
                    ExpressionAttributeNames=self.leases.names(
                        "#head",
                        "#expiresAt",
                        "#releasedAt",
                        "#skippedAt",
                        "#acquiredAt",
                        "#beatTicket",
                        "#beatAt",
                    ),
                    ExpressionAttributeValues={
                        **stale,
                        **codec.values(next=head + 1, now=self.leases.now_ms()),
                    },
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
                backoff=self.leases.backoff,
                idempotent=True,  # the head condition: a resend changes nothing more
                pattern=PATTERN,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            # the head came for its turn or beat, or another waiter moved it first
            metrics.count("LeaseSkipRefused", pattern=PATTERN)
            wait.item = self._old(exc) or {}
            return None
        wait.item = self._new(response)
        metrics.count("LeaseWaiterSkipped", pattern=PATTERN)
        return None

    def _take(
        self,
        wait: _Wait,
        request: _Request,
        condition: str,
        values: dict[str, Any] | None = None,
    ) -> lease.Lease | None:
        """The acquisition write with this ticket's head move (head = ticket + 1) and turn record;
        None (``wait.item`` refreshed from the refusal's ALL_OLD) if refused."""
        now = self.leases.now_ms()
        own = codec.values(
            next=wait.ticket + 1,
            turn=self._recorded_turn(wait, now),
            hold=self._recorded_hold(wait),
        )
        write = _item.Acquisition(
            wait.owner,
            now + self._duration_ms(request),
            now,
            condition,
            also_set=CLAIM_SET,
            values={**own, **(values or {})},
        )
        wait.calls += 1
        metrics.count("LeaseAttempt", pattern=PATTERN)
        asked = self.monotonic()
        try:
            seen = _item.take(self.leases, wait.resource, write)
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            wait.latency = self.monotonic() - asked
            metrics.count("LeaseBusy", pattern=PATTERN)
            wait.item = self._old(exc) or {}
            return None
        except errors.OutcomeUnknown:
            return self._settle_claim(wait, write)
        seen = seen or {}
        if int(seen.get("tickets", 0)) > wait.ticket:
            self.quiet.discard(wait.resource)  # someone queued behind it
        return self._held(wait, seen, int(seen.get("fence", 0)) + 1, write)

    def _settle_claim(self, wait: _Wait, write: _item.Acquisition) -> lease.Lease | None:
        """A claim whose answer was lost, settled by a read: the item records this write's
        acquisition id: ours (nobody acquired since; the owner alone would not tell, one owner
        may queue many times at once). Still before this ticket: not applied, look again (None).
        Otherwise :class:`PassedOver`: queue again."""
        wait.item = self._get(wait)
        if wait.item.get("acquisition") == write.id:
            return self._held(wait, {}, int(wait.item.get("fence", 0)), write)
        if wait.head <= wait.ticket:
            return None
        raise PassedOver(wait.resource, wait.ticket) from None

    def _grab(self, request: _Request) -> lease.Lease | None:
        """The fast path (see *Fast path*): a ticket served at once, in one write, if the lease
        is free and nobody is queued; None (the resource no longer taken for quiet) if not."""
        now = self.leases.now_ms()
        write = _item.Acquisition(
            request.owner,
            now + self._duration_ms(request),
            now,
            _item.FREE_AND_NO_QUEUE,
            also_set=(
                ", #tickets = if_not_exists(#head, :one), "
                f"#head = if_not_exists(#head, :one) + :one, #lastHoldMs = {LAST_HOLD}"
            ),
        )
        metrics.count("LeaseAttempt", pattern=PATTERN)
        try:
            seen = _item.take(self.leases, request.resource, write)
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            metrics.count("LeaseBusy", pattern=PATTERN)
            self.quiet.discard(request.resource)
            return None
        except errors.OutcomeUnknown:
            self.quiet.discard(request.resource)
            return self._settle_grab(request, write)
        seen = seen or {}
        fence, ticket = int(seen.get("fence", 0)) + 1, int(seen.get("head", 1))
        return self._served(request, seen, fence, ticket, write)

    def _settle_grab(self, request: _Request, write: _item.Acquisition) -> lease.Lease | None:
        """A grab whose answer was lost, settled by a read: the item records this write's
        acquisition id: ours; else None (queue as usual)."""
        looking = _Wait(request.resource, request.owner, 0, self.monotonic(), {})
        item = self._get(looking)
        request.calls += looking.calls
        if item.get("acquisition") != write.id:
            return None
        return self._served(request, {}, int(item["fence"]), int(item["tickets"]), write)

    def _served(
        self,
        request: _Request,
        seen: dict[str, Any],
        fence: int,
        ticket: int,
        write: _item.Acquisition,
    ) -> lease.Lease:
        """The lease a grab took, as ``ticket`` (reported to ``on_ticket`` like any ticket)."""
        if self.on_ticket is not None:
            self.on_ticket(request.resource, request.owner, ticket)
        wait = _Wait(request.resource, request.owner, ticket, self.monotonic(), seen)
        return self._held(wait, seen, fence, write)

    def _duration_ms(self, request: _Request) -> int:
        return _item.duration_ms(
            request.duration_ms, request.remaining_ms, self.leases.safety_margin_ms
        )

    def _old(self, exc: BaseException) -> dict[str, Any] | None:
        """The ALL_OLD item of a refusal, with the default names."""
        return _item.logical(self.leases.attributes, codec.old_item(exc))

    def _new(self, response: Mapping[str, Any]) -> dict[str, Any]:
        """The ALL_NEW item of an update, with the default names."""
        return _item.logical(self.leases.attributes, codec.new_item(response)) or {}

    def _recorded_turn(self, wait: _Wait, now: int) -> int:
        """The turn length to record (``turnMs``): this waiter's own measure, the time it waited
        over the acquisitions it waited for (the holder it found, and each ticket ahead),
        averaged 1:3 with the recorded one, so the next waiters' first nap has a good guess."""
        waited = (self.monotonic() - wait.queued_at) * 1000
        sample = int(waited / max(1, wait.ticket - wait.first_head + 1))
        recorded = int(wait.item.get("turnMs", sample))
        return max(1, (sample + 3 * recorded) // 4)

    def _hold_sample(self, item: dict[str, Any]) -> int | None:
        """The last hold the item recorded (``lastHoldMs``), if it was a released hold (ms)."""
        if "lastHoldMs" not in item:
            return None
        sample = int(item["lastHoldMs"])
        return sample if 0 < sample < self.settings.expiry_ms else None  # 0: no hold before

    def _hold_ms(self, item: dict[str, Any]) -> int | None:
        """How long a holder holds, as the item says: ``holdMs`` (a running average, a claim
        behind) with the last hold (``lastHoldMs``) averaged in; None before any release."""
        sample = self._hold_sample(item)
        recorded = int(item.get("holdMs", 0)) or None  # 0: none recorded yet
        if sample is None or recorded is None:
            return sample if recorded is None else recorded
        return (sample + 3 * recorded) // 4

    def _recorded_hold(self, wait: _Wait) -> int:
        """The running average hold to record (``holdMs``); 0 before any release."""
        hold = self._hold_ms(wait.item)
        return 0 if hold is None else hold

    def _beat(self, wait: _Wait) -> None:
        """Next in line at a live holder: say so (from now on it is passed over L after its
        last beat, not I), and look at the item in the same call::

            UpdateItem <resource>  SET #beatTicket = :ticket, #beatAt = :now
              ConditionExpression: #head = :ticket
              ReturnValues: ALL_NEW (ALL_OLD on a refusal: the head moved on)
        """
        wait.calls += 1
        try:
            response = retry.call(
                lambda: self._client.update_item(
                    TableName=self._table,
                    Key=self.leases.wire_key(wait.resource),
                    UpdateExpression="SET #beatTicket = :ticket, #beatAt = :now",
                    ConditionExpression="#head = :ticket",
                    ExpressionAttributeNames=self.leases.names("#beatTicket", "#beatAt", "#head"),
                    ExpressionAttributeValues=codec.values(
                        ticket=wait.ticket, now=self.leases.now_ms()
                    ),
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
                backoff=self.leases.backoff,
                idempotent=True,
                pattern=PATTERN,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            wait.item = self._old(exc) or {}
            return
        wait.item = self._new(response)
        wait.beat_due = self.monotonic() + self.settings.heartbeat_ms / 1000

    def _pass_left(self, wait: _Wait, front: int) -> None:
        """Move the head past tickets whose waiters left (their tombstone rows go with it)."""
        passed = list(range(wait.head, front))
        items: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": self.leases.wire_key(waiter_key(wait.resource, ticket)),
                }
            }
            for ticket in passed[:MAX_SKIP]
        ]
        passed = passed[:MAX_SKIP]
        items.append(
            {
                "Update": {
                    "TableName": self._table,
                    "Key": self.leases.wire_key(wait.resource),
                    "UpdateExpression": "SET #head = :next, #skippedAt = :now DELETE #left :passed",
                    "ConditionExpression": "#head = :head",
                    "ExpressionAttributeNames": self.leases.names("#head", "#skippedAt", "#left"),
                    "ExpressionAttributeValues": codec.values(
                        next=passed[-1] + 1,
                        head=passed[0],
                        now=self.leases.now_ms(),
                        passed=set(passed),
                    ),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        )
        wait.calls += 1
        try:
            transact.transact_write(
                self._client, items, backoff=self.leases.backoff, pattern=PATTERN
            )
        except transact.Cancelled as exc:
            wait.item = _item.logical(self.leases.attributes, exc.reasons[-1].item) or self._get(
                wait
            )  # someone moved the head: look
            return
        metrics.count("LeaseWaiterSkipped", pattern=PATTERN, value=len(passed))
        wait.item = {
            **wait.item,
            "head": passed[-1] + 1,
            "left": wait.left - set(passed),
            "skippedAt": self.leases.now_ms(),
        }

    def _held(
        self, wait: _Wait, seen: dict[str, Any], fence: int, write: _item.Acquisition
    ) -> lease.Lease:
        if "owner" in seen and "releasedAt" not in seen and int(seen.get("expiresAt", 0)) > 0:
            metrics.count("LeaseTakeover", pattern=PATTERN)  # the holder never released
        return lease.Lease(
            wait.resource,
            wait.owner,
            fence,
            write.expires_at_ms,
            write.now_ms,
            previous=seen,
            ticket=wait.ticket,
        )

    def _leave(self, wait: _Wait) -> None:
        """The deadline passed: write a tombstone row and note the ticket in the item's ``left``
        set, in one transaction, so whoever looks next passes it over at once."""
        wait.calls += 1
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": codec.encode_item(
                        {
                            self.leases.key_attr: wait.key,
                            **_item.stored(
                                self.leases.attributes,
                                queue_of=wait.resource,
                                ticket=wait.ticket,
                                owner=wait.owner,
                                expires_at_ms=0,
                                # TTL's cleanup of a tombstone nobody passes over (epoch seconds)
                                ttl_attribute=int(self.leases.clock()) + TOMBSTONE_REAP_S,
                            ),
                        }
                    ),
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": self.leases.wire_key(wait.resource),
                    "UpdateExpression": "ADD #left :mine",
                    "ConditionExpression": "#head <= :ticket",
                    "ExpressionAttributeNames": self.leases.names("#left", "#head"),
                    "ExpressionAttributeValues": codec.values(
                        mine={wait.ticket}, ticket=wait.ticket
                    ),
                }
            },
        ]
        try:
            transact.transact_write(
                self._client, items, backoff=self.leases.backoff, pattern=PATTERN
            )
        except transact.Cancelled as exc:
            if not exc.failed_at(1):
                metrics.count("LeaseLeaveFailed", pattern=PATTERN)
            # Refused: the head is past this ticket already (it was passed over): nothing to leave.
        except (ClientError, BotoCoreError, errors.TurnstileError):
            # Not written: the ticket is passed over after I, like a silent waiter's.
            metrics.count("LeaseLeaveFailed", pattern=PATTERN)

    def _timed_out(self, wait: _Wait, attempts: int) -> WaitTimedOut:
        item = wait.item
        return WaitTimedOut(
            wait.resource,
            str(item.get("owner", "")),
            int(item.get("expiresAt", 0)),
            int(item.get("fence", 0)),
            position=wait.position,
            attempts=attempts,
        )

    def _get(self, wait: _Wait) -> dict[str, Any]:
        wait.calls += 1
        response = retry.call(
            lambda: self._client.get_item(
                TableName=self._table,
                Key=self.leases.wire_key(wait.resource),
                ConsistentRead=True,
            ),
            backoff=self.leases.backoff,
            idempotent=True,
            pattern=PATTERN,
        )
        return _item.logical(self.leases.attributes, codec.decode_item(response.get("Item"))) or {}

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

    def _run(self) -> None:
        while not self._stopped_after(self.period_ms / 1000):
            ttl = self.ttl_ms
            if self.remaining_ms is not None:
                left = self.remaining_ms() - self.margin_ms
                if left <= self.period_ms:
                    return  # the invocation ends soon: let the lease run out by itself
                ttl = min(ttl, left)
            try:
                self.lease = self.leases.renew(self.lease, ttl)
                self.renewals += 1
            except lease.LeaseLost:
                self.lost.set()
                return
            except (errors.TurnstileError, ClientError, BotoCoreError):
                metrics.count("LeaseHeartbeatFailed", pattern=PATTERN)
                continue  # throttled or unanswered: the next beat tries again
