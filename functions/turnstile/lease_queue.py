"""Fair waiting for a lease: a FIFO ticket queue per resource, heartbeats, bounded waits.

:meth:`turnstile.lease.Leases.acquire_wait` waits by retrying: every waiter polls the lease item,
nobody is served in order, and a holder that dies keeps everybody out for its whole lease. This
module adds a queue in front of the same lease item, in the same table (no new infrastructure):
ZooKeeper's lock recipe (sequential tickets, each waiter watches only its predecessor) built from
conditional writes, with heartbeats instead of sessions.

Hand-written because no maintained Python library offers a fenced, fair lease on DynamoDB (the
DynamoDB lock client is Java, unfair, and unfenced; see docs/patterns/leases.md).

**Items** (all in the lease table, partition key ``resource``):

=========================  ========================================================================
lease item ``<resource>``  :mod:`turnstile.lease`'s item, plus ``tickets`` (the last ticket handed
                           out) and ``head`` (the lowest ticket not yet served or passed over)
waiter row                 key ``<resource>#q#<ticket>``: ``owner``, ``ticket``, ``queueOf`` (the
                           resource) and ``expiresAt``: the waiter's heartbeat expiry, epoch ms
=========================  ========================================================================

Resource names containing ``#q#`` are reserved (the service's names cannot contain ``#``).

**Take a ticket** (one atomic ADD; the answer also shows head, holder and fence, so no read)::

    UpdateItem <resource>
      UpdateExpression: ADD #tickets :one
                        SET #head = if_not_exists(#head, :one),
                            #fence = if_not_exists(#fence, :zero),
                            #expiresAt = if_not_exists(#expiresAt, :zero)
      ReturnValues: ALL_NEW           (ticket = tickets)

**Write the waiter row**: ``PutItem <resource>#q#<ticket>`` with ``expiresAt = now + L``
(unconditional: it may replace a placeholder, below). **Heartbeat** it every ``H``::

    UpdateItem <resource>#q#<ticket>  SET #expiresAt = :expiresAt
      ConditionExpression: #owner = :owner          (refused: the row was passed over and deleted)

**Wait.** Waiter ``t`` watches only its predecessor's row ``t - 1`` (a strongly consistent
GetItem), sleeping between looks in proportion to its place in the queue. When that row is gone
it reads the lease item: ``head > t`` means it was passed over; ``head = t`` means it is next and
now watches the holder; ``head < t`` means it walks down to the nearest live row in
``[head, t - 1]`` and watches that one instead. A row is *live* while ``expiresAt >= now``.

**Pass over dead waiters.** When every row in ``[head, t - 1]`` is dead, waiter ``t`` moves the
head past them in one transaction, decided by the rows' own expiry, not by the waiter alone::

    TransactWriteItems
      Delete <resource>#q#<k>  for each k in [head, t - 1]
        ConditionExpression: #expiresAt < :now
      Update <resource>  SET #head = :t
        ConditionExpression: #head = :head

A ticket whose row is missing (taken, row not yet written, or its waiter died in between) first
gets a placeholder, so it too is passed over only after ``L`` (never below the head: a ticket
served meanwhile leaves no row behind)::

    TransactWriteItems
      ConditionCheck <resource>  ConditionExpression: #head <= :k
      Put <resource>#q#<k>  owner "", expiresAt = now + L
        ConditionExpression: attribute_not_exists(#resource)

**Acquire** (waiter ``t`` is the head). The head does not read the holder: it tries to claim,
once at once and then every poll (or at the holder's expiry), and a refusal hands back the item as
it is. The fence comes from the lease item's own fence, as a plain :meth:`Leases.acquire` takes
it, so fences strictly increase across both kinds of acquisition and never go behind the item
they live on (a restored table continues from the restored item's fence)::

    UpdateItem <resource>
      UpdateExpression: SET #owner = :owner, #expiresAt = :expiresAt, #acquiredAt = :now,
                            #head = :next                                  (:next = t + 1)
                        REMOVE #releasedAt, #purgeAt
                        ADD #fence :one
      ConditionExpression: #head = :ticket AND #expiresAt < :now
      ReturnValues: ALL_OLD  (new fence = old fence + 1; ALL_OLD on a refusal too)

then removes its own row (``DeleteItem <resource>#q#<t>``, unconditional: the head condition made
ticket t this waiter's), which tells its successor to look at the head. A timeout of the claim is
settled by reading the item: head still t, it was not applied; this owner and head past t, it is
ours; otherwise the waiter queues again.

A waiter whose ticket shows it at the head of an empty queue with a free lease claims at once,
without writing its row (it writes the row only before it would wait).

The holder then renews with :meth:`Leases.renew` every ``H`` (:class:`Heartbeat` does it on a
thread), and :meth:`Leases.guard`, :meth:`Leases.transact` and :func:`lease.fenced_update` work
unchanged: the lease item looks exactly as after a plain acquisition. A holder that stops
heartbeating is taken over ``L`` after its last renewal (plus one poll of the head).

**Leave** (the deadline passed): the row becomes a tombstone the next waiter passes over at once::

    UpdateItem <resource>#q#<t>  SET #expiresAt = :zero
      ConditionExpression: #owner = :owner

A ticket call whose answer was lost is not resent (``ADD`` would take a second ticket); the waiter
takes a new ticket while its deadline allows, and the orphan, if it was taken, is passed over
after L like any ticket whose row never appeared. A waiter passed over takes a new ticket while
its deadline allows, first removing its own row in
case it wrote it late (``DeleteItem <resource>#q#<t>``, ``ConditionExpression: #owner = :owner``).

**Clocks.** ``now`` is the caller's clock (:attr:`Leases.clock`), compared by the database with
expiry times written by other clients' clocks, as in :mod:`turnstile.lease`. A skewed clock can
pass over a live waiter early or take a lease early; that costs fairness, never safety: the holder's
fence still strictly increases, and fenced writes refuse the older holder. Deadlines are measured
on the local monotonic clock and never depend on other clients.

**Plain acquisitions.** :meth:`Leases.acquire` does not queue: it takes a free lease even when
waiters are queued (they are served in order among themselves). Mix the two only if that is fine.

**Metrics** (pattern ``lease``): ``LeaseQueued`` per ticket, ``LeaseWait`` (ms) per queued wait,
``LeaseWaitGaveUp`` when a deadline passed, ``LeaseWaiterSkipped`` per dead waiter passed over,
``LeasePassedOver`` when this waiter was passed over itself (a lost claim), ``LeaseTakeover`` per
acquisition from a holder that had not released, ``LeaseLost`` when a heartbeat was refused.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from turnstile import codec, errors, lease, metrics, retry, transact

__all__ = [
    "Heartbeat",
    "LeaseQueue",
    "PassedOver",
    "QueueSettings",
    "WaitTimedOut",
    "waiter_key",
]

PATTERN = lease.PATTERN
SEPARATOR = "#q#"
MAX_SKIP = 50  # rows passed over per transaction (TransactWriteItems takes 100 items)

_NAMES = {
    "#resource": "resource",
    "#owner": "owner",
    "#fence": "fence",
    "#expiresAt": "expiresAt",
    "#acquiredAt": "acquiredAt",
    "#releasedAt": "releasedAt",
    "#purgeAt": "purgeAt",
    "#tickets": "tickets",
    "#head": "head",
}


def _names(*placeholders: str) -> dict[str, str]:
    return {name: _NAMES[name] for name in placeholders}


def waiter_key(resource: str, ticket: int) -> str:
    """The key of the waiter row of ``ticket`` in ``resource``'s queue."""
    return f"{resource}{SEPARATOR}{ticket}"


@dataclass(frozen=True)
class QueueSettings:
    """``heartbeat_ms`` (H): how often holders and waiters renew; ``expiry_ms`` (L): how long
    after its last renewal a silent holder or waiter is passed over; ``poll_ms``: how soon the
    head looks at a live holder again (then every 2, then 4 polls: an early release is noticed
    within four polls, an expiry at once); ``margin_ms``:
    how long before a Lambda invocation ends waits and heartbeats stop.

    Defaults measured in ``bench/leases.py`` (docs/patterns/leases.md): L = 3 H tolerates two
    late or lost heartbeats, and a dead holder is taken over within L + H + one poll (1.5 s p99
    measured). On DynamoDB Local shared at load average 40-50 on two cores a write's p99 reached
    H itself (0.54 s), and 2 holders in 1000 lost their lease to a late heartbeat (the fence
    refused nothing they had written): where writes are that slow, raise H and L together.
    """

    heartbeat_ms: int = 500
    expiry_ms: int = 1500
    poll_ms: int = 50
    margin_ms: int = 1000

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_ms < self.expiry_ms:
            raise ValueError("need 0 < heartbeat_ms < expiry_ms")
        if self.poll_ms <= 0 or self.margin_ms < 0:
            raise ValueError("poll_ms must be positive and margin_ms not negative")


class PassedOver(errors.Retryable):
    """This waiter's heartbeat was found expired and the queue moved past its ticket."""

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
        expires_at: int,
        fence: int,
        *,
        position: int,
        attempts: int,
    ) -> None:
        super().__init__(resource, owner, expires_at, fence, attempts)
        self.position = position


@dataclass
class _Wait:
    """One waiter's state while it waits (one ticket)."""

    resource: str
    owner: str
    ticket: int
    beat_at: float  # monotonic: when the next heartbeat is due (inf: no row written yet)
    head: int
    started: float
    head_at_start: int
    item: dict[str, Any] = field(default_factory=dict)  # the lease item as last seen
    calls: int = 0
    row: bool = False  # its waiter row is written
    fence_at_start: int = 0  # the lease's fence when the ticket was taken (for the pace)
    polls: int = 0  # claim attempts as the head

    @property
    def key(self) -> str:
        return waiter_key(self.resource, self.ticket)

    @property
    def position(self) -> int:
        return max(0, self.ticket - self.head)


@dataclass
class LeaseQueue:
    """FIFO waiting on :class:`turnstile.lease.Leases` (same client, table, clock and backoff)."""

    leases: lease.Leases
    settings: QueueSettings = field(default_factory=QueueSettings)
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    on_ticket: Callable[[str, str, int], None] | None = None  # (resource, owner, ticket) hook

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
        queue and raises :class:`WaitTimedOut`. The lease lasts ``ttl_ms`` (default ``L``): renew
        it every ``H`` (:class:`Heartbeat`). A waiter passed over (its heartbeat came too late)
        takes a new ticket while time is left. ``Lease.attempts`` counts the DynamoDB calls spent.
        """
        deadline = self.deadline(wait_ms, remaining_ms)
        duration = ttl_ms if ttl_ms is not None else self.settings.expiry_ms
        started = self.monotonic()
        calls = 0
        try:
            while True:
                try:
                    wait = self._enqueue(resource, owner, started)
                except errors.OutcomeUnknown:
                    # The ticket may have been taken with no row: its successor gives it a
                    # placeholder and passes it over after L. Take another while time is left.
                    if self.monotonic() >= deadline:
                        raise
                    continue
                try:
                    held = self._wait(wait, deadline, duration, remaining_ms)
                except PassedOver:
                    calls += wait.calls
                    metrics.count("LeasePassedOver", pattern=PATTERN)
                    self._discard(wait)
                    if self.monotonic() >= deadline:
                        raise self._timed_out(wait, calls) from None
                    continue
                except WaitTimedOut as timed_out:
                    timed_out.attempts += calls
                    raise
                metrics.timing("LeaseWait", (self.monotonic() - started) * 1000, pattern=PATTERN)
                return replace(held, attempts=calls + wait.calls)
        except WaitTimedOut:
            metrics.timing("LeaseWait", (self.monotonic() - started) * 1000, pattern=PATTERN)
            metrics.count("LeaseWaitGaveUp", pattern=PATTERN)
            raise

    def _enqueue(self, resource: str, owner: str, started: float) -> _Wait:
        response = retry.call(
            lambda: self._client.update_item(
                TableName=self._table,
                Key=codec.encode_item({"resource": resource}),
                UpdateExpression=(
                    "ADD #tickets :one SET #head = if_not_exists(#head, :one), "
                    "#fence = if_not_exists(#fence, :zero), "
                    "#expiresAt = if_not_exists(#expiresAt, :zero)"
                ),
                ExpressionAttributeNames=_names("#tickets", "#head", "#fence", "#expiresAt"),
                ExpressionAttributeValues=codec.values(one=1, zero=0),
                ReturnValues="ALL_NEW",
            ),
            backoff=self.leases.backoff,
            idempotent=False,  # a resend takes a second ticket
            pattern=PATTERN,
        )
        item = codec.decode_item(response["Attributes"]) or {}
        ticket = int(item["tickets"])
        metrics.count("LeaseQueued", pattern=PATTERN)
        if self.on_ticket is not None:
            self.on_ticket(resource, owner, ticket)
        head = int(item.get("head", 1))
        wait = _Wait(resource, owner, ticket, float("inf"), head, started, head, item, calls=1)
        wait.fence_at_start = int(item.get("fence", 0))
        if not (head == ticket and int(item.get("expiresAt", 0)) < self.leases.now_ms()):
            self._write_row(wait)  # else it claims at once, and writes its row only if that fails
        return wait

    def _write_row(self, wait: _Wait) -> None:
        wait.calls += 1
        retry.call(
            lambda: self._client.put_item(
                TableName=self._table,
                Item=codec.encode_item(
                    {
                        "resource": wait.key,
                        "queueOf": wait.resource,
                        "ticket": wait.ticket,
                        "owner": wait.owner,
                        "expiresAt": self.leases.now_ms() + self.settings.expiry_ms,
                    }
                ),
            ),
            backoff=self.leases.backoff,
            idempotent=True,
            pattern=PATTERN,
        )
        wait.beat_at = self.monotonic() + self.settings.heartbeat_ms / 1000
        wait.row = True

    def _wait(
        self,
        wait: _Wait,
        deadline: float,
        duration: int,
        remaining_ms: Callable[[], int] | None,
    ) -> lease.Lease:
        watching: int | None = wait.ticket - 1 if wait.position > 0 else None
        fresh = True  # wait.item was just read (the ticket's answer)
        first = True  # even a spent deadline (wait_ms 0, a slow ticket call) gets one look
        while True:
            now = self.monotonic()
            if now >= deadline and not first:
                self._leave(wait)
                raise self._timed_out(wait, wait.calls)
            first = False
            if now >= wait.beat_at:
                self._heartbeat(wait)
            if watching is not None:
                row = self._get(wait, waiter_key(wait.resource, watching))
                if self._live(row):
                    self._nap(wait, deadline, self._expected_turn(wait))
                    continue
                # The predecessor is gone (served, left, or dead): where is the queue now?
                fresh = False
            if not fresh:
                wait.item = self._get(wait, wait.resource) or {}
                wait.head = int(wait.item.get("head", 1))
            fresh = False
            if wait.head > wait.ticket:
                raise PassedOver(wait.resource, wait.ticket)
            if wait.head < wait.ticket:
                watching = self._nearest_live(wait)
                continue
            watching = None
            holder_until = int(wait.item.get("expiresAt", 0))
            if holder_until >= self.leases.now_ms():
                # Next in line and the holder is live: try again at its expiry, or after one poll.
                until_expiry = (holder_until - self.leases.now_ms() + 1) / 1000
                self._nap(wait, deadline, min(self._head_poll(wait), until_expiry))
            # The claim is the look: refused, it hands back the lease item as it is now.
            held = self._claim(wait, duration, remaining_ms)
            if held is not None:
                return held
            fresh = True

    def _expected_turn(self, wait: _Wait) -> float:
        """Seconds to sleep before looking at the predecessor again: half the places ahead of it
        times the observed time per acquisition (fences handed out since this ticket), at least
        two polls, at most one heartbeat period."""
        poll = self.settings.poll_ms / 1000
        elapsed = self.monotonic() - wait.started
        served = int(wait.item.get("fence", 0)) - wait.fence_at_start
        per_turn = elapsed / served if served > 0 else 4 * poll
        ahead = max(1, wait.position - 1)
        return min(self.settings.heartbeat_ms / 1000, max(2 * poll, ahead * per_turn * 0.5))

    def _head_poll(self, wait: _Wait) -> float:
        """The head's pause between claim attempts: one poll, doubling to four (each refused
        attempt costs the database a write, and a long hold needs no fast polling)."""
        wait.polls += 1
        return self.settings.poll_ms / 1000 * min(4, 2 ** (wait.polls - 1))

    def _nap(self, wait: _Wait, deadline: float, seconds: float) -> None:
        if not wait.row:
            self._write_row(wait)  # about to wait: successors must see it alive
        now = self.monotonic()
        self.sleep(max(0.0, min(seconds, deadline - now, wait.beat_at - now)))

    def _live(self, row: dict[str, Any] | None) -> bool:
        return row is not None and int(row.get("expiresAt", 0)) >= self.leases.now_ms()

    def _nearest_live(self, wait: _Wait) -> int | None:
        """The nearest live row below ``wait.ticket`` (then watch it); if none, pass the dead
        ones over (or give missing ones a placeholder) and return None (look at the item again)."""
        low = wait.head
        rows: dict[int, dict[str, Any] | None] = {}
        for ticket in range(wait.ticket - 1, low - 1, -1):
            row = self._get(wait, waiter_key(wait.resource, ticket))
            if self._live(row):
                return ticket
            rows[ticket] = row
        missing = [ticket for ticket, row in rows.items() if row is None]
        if missing:
            for ticket in missing:
                self._placeholder(wait, ticket)
            return max(missing)
        self._skip(wait, sorted(rows)[:MAX_SKIP])
        return None

    def _placeholder(self, wait: _Wait, ticket: int) -> None:
        wait.calls += 1
        items = [
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": codec.encode_item({"resource": wait.resource}),
                    "ConditionExpression": "#head <= :ticket",
                    "ExpressionAttributeNames": _names("#head"),
                    "ExpressionAttributeValues": codec.values(ticket=ticket),
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": codec.encode_item(
                        {
                            "resource": waiter_key(wait.resource, ticket),
                            "queueOf": wait.resource,
                            "ticket": ticket,
                            "owner": "",
                            "expiresAt": self.leases.now_ms() + self.settings.expiry_ms,
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(#resource)",
                    "ExpressionAttributeNames": _names("#resource"),
                }
            },
        ]
        # Refused: its waiter wrote it meanwhile, or the ticket was served: fine either way.
        with contextlib.suppress(transact.Cancelled):
            transact.transact_write(
                self._client, items, backoff=self.leases.backoff, pattern=PATTERN
            )

    def _skip(self, wait: _Wait, tickets: list[int]) -> None:
        now = self.leases.now_ms()
        items: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": codec.encode_item({"resource": waiter_key(wait.resource, ticket)}),
                    "ConditionExpression": "#expiresAt < :now",
                    "ExpressionAttributeNames": _names("#expiresAt"),
                    "ExpressionAttributeValues": codec.values(now=now),
                }
            }
            for ticket in tickets
        ]
        items.append(
            {
                "Update": {
                    "TableName": self._table,
                    "Key": codec.encode_item({"resource": wait.resource}),
                    "UpdateExpression": "SET #head = :next",
                    "ConditionExpression": "#head = :head",
                    "ExpressionAttributeNames": _names("#head"),
                    "ExpressionAttributeValues": codec.values(
                        next=tickets[-1] + 1, head=tickets[0]
                    ),
                }
            }
        )
        wait.calls += 1
        try:
            transact.transact_write(
                self._client, items, backoff=self.leases.backoff, pattern=PATTERN
            )
        except transact.Cancelled:
            return  # a row came back to life, or someone else moved the head: look again
        metrics.count("LeaseWaiterSkipped", pattern=PATTERN, value=len(tickets))

    def _claim(
        self, wait: _Wait, duration: int, remaining_ms: Callable[[], int] | None
    ) -> lease.Lease | None:
        """Take the lease as the head if it is free; None (``wait.item`` refreshed) if not."""
        now = self.leases.now_ms()
        expires_at = now + self.leases._ttl_ms(duration, remaining_ms)
        wait.calls += 1
        metrics.count("LeaseAttempt", pattern=PATTERN)
        try:
            response = retry.call(
                lambda: self._client.update_item(
                    TableName=self._table,
                    Key=codec.encode_item({"resource": wait.resource}),
                    UpdateExpression=(
                        "SET #owner = :owner, #expiresAt = :expiresAt, #acquiredAt = :now, "
                        "#head = :next REMOVE #releasedAt, #purgeAt ADD #fence :one"
                    ),
                    ConditionExpression="#head = :ticket AND #expiresAt < :now",
                    ExpressionAttributeNames=_names(
                        "#owner",
                        "#expiresAt",
                        "#acquiredAt",
                        "#fence",
                        "#head",
                        "#releasedAt",
                        "#purgeAt",
                    ),
                    ExpressionAttributeValues=codec.values(
                        owner=wait.owner,
                        expiresAt=expires_at,
                        now=now,
                        next=wait.ticket + 1,
                        ticket=wait.ticket,
                        one=1,
                    ),
                    ReturnValues="ALL_OLD",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
                backoff=self.leases.backoff,
                idempotent=False,  # ADD: a resend could take a second fence
                pattern=PATTERN,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            metrics.count("LeaseBusy", pattern=PATTERN)
            wait.item = codec.old_item(exc) or {}
            wait.head = int(wait.item.get("head", 1))
            return None
        except errors.OutcomeUnknown:
            # Settled by a read: still the head, it was not applied (look again); this owner
            # past the head, it was (ours); past the head but someone else's, it was applied and
            # then lost, or this waiter was passed over: queue again.
            wait.item = self._get(wait, wait.resource) or {}
            wait.head = int(wait.item.get("head", 1))
            if wait.head == wait.ticket:
                return None
            if str(wait.item.get("owner", "")) != wait.owner or wait.head < wait.ticket:
                raise PassedOver(wait.resource, wait.ticket) from None
            self._remove_row(wait)
            fence = int(wait.item.get("fence", 0))
            return self._held(wait, {}, fence, expires_at, now)
        seen = codec.decode_item(response.get("Attributes")) or {}
        self._remove_row(wait)
        return self._held(wait, seen, int(seen.get("fence", 0)) + 1, expires_at, now)

    def _remove_row(self, wait: _Wait) -> None:
        """The served waiter's row goes (its successor, watching it, then looks at the head)."""
        wait.calls += 1
        with contextlib.suppress(ClientError, BotoCoreError, errors.TurnstileError):
            retry.call(
                lambda: self._client.delete_item(
                    TableName=self._table, Key=codec.encode_item({"resource": wait.key})
                ),
                backoff=self.leases.backoff,
                idempotent=True,
                pattern=PATTERN,
            )

    def _held(
        self, wait: _Wait, seen: dict[str, Any], fence: int, expires_at: int, now: int
    ) -> lease.Lease:
        if "owner" in seen and "releasedAt" not in seen and int(seen.get("expiresAt", 0)) > 0:
            metrics.count("LeaseTakeover", pattern=PATTERN)  # the holder never released
        return lease.Lease(
            wait.resource, wait.owner, fence, expires_at, now, previous=seen, ticket=wait.ticket
        )

    def _heartbeat(self, wait: _Wait) -> None:
        wait.calls += 1
        try:
            retry.call(
                lambda: self._client.update_item(
                    TableName=self._table,
                    Key=codec.encode_item({"resource": wait.key}),
                    UpdateExpression="SET #expiresAt = :expiresAt",
                    ConditionExpression="#owner = :owner",
                    ExpressionAttributeNames=_names("#expiresAt", "#owner"),
                    ExpressionAttributeValues=codec.values(
                        expiresAt=self.leases.now_ms() + self.settings.expiry_ms,
                        owner=wait.owner,
                    ),
                ),
                backoff=self.leases.backoff,
                idempotent=True,
                pattern=PATTERN,
            )
        except ClientError as exc:
            if retry.condition_failed(exc):
                metrics.count("LeaseLost", pattern=PATTERN)
                raise PassedOver(wait.resource, wait.ticket) from exc
            raise
        wait.beat_at = self.monotonic() + self.settings.heartbeat_ms / 1000

    def _leave(self, wait: _Wait) -> None:
        """Turn the row into a tombstone: the next waiter passes it over without waiting."""
        wait.calls += 1
        with contextlib.suppress(ClientError, BotoCoreError, errors.TurnstileError):
            retry.call(
                lambda: self._client.update_item(
                    TableName=self._table,
                    Key=codec.encode_item({"resource": wait.key}),
                    UpdateExpression="SET #expiresAt = :zero",
                    ConditionExpression="#owner = :owner",
                    ExpressionAttributeNames=_names("#expiresAt", "#owner"),
                    ExpressionAttributeValues=codec.values(zero=0, owner=wait.owner),
                ),
                backoff=self.leases.backoff,
                idempotent=True,
                pattern=PATTERN,
            )

    def _discard(self, wait: _Wait) -> None:
        """A passed-over waiter removes its own row if it is still there (written late)::

        DeleteItem <resource>#q#<t>  ConditionExpression: #owner = :owner
        """
        with contextlib.suppress(ClientError, BotoCoreError, errors.TurnstileError):
            retry.call(
                lambda: self._client.delete_item(
                    TableName=self._table,
                    Key=codec.encode_item({"resource": wait.key}),
                    ConditionExpression="#owner = :owner",
                    ExpressionAttributeNames=_names("#owner"),
                    ExpressionAttributeValues=codec.values(owner=wait.owner),
                ),
                backoff=self.leases.backoff,
                idempotent=True,
                pattern=PATTERN,
            )

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

    def _get(self, wait: _Wait, key: str) -> dict[str, Any] | None:
        wait.calls += 1
        response = retry.call(
            lambda: self._client.get_item(
                TableName=self._table,
                Key=codec.encode_item({"resource": key}),
                ConsistentRead=True,
            ),
            backoff=self.leases.backoff,
            idempotent=True,
            pattern=PATTERN,
        )
        return codec.decode_item(response.get("Item"))

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
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_ms / 1000):
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
                continue  # throttled or unanswered: the next beat tries again
