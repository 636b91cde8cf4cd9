"""The lease queue's writes and the waiter's state, as protocols (:mod:`turnstile_ddb._core`):
claim, pass over, grab (the fast path), beat, leave, and the reads that settle a lost answer,
for :mod:`turnstile_ddb._queue_waiting`, which waits between them.

Private: every request, condition and rule is documented in :mod:`turnstile_ddb.lease_queue`.
Here no request is sent, no clock read and no nap taken: each is an effect (``Call``, ``Now``,
``Sleep``) the front door's driver performs, at exactly the points the queue always made them.
A queue request carrying ``:now`` reads the clock again on every resend (``retry.retrying``
given a function), as the request built inside ``retry.call``'s operation always did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from turnstile_ddb import _core, codec, errors, lease, metrics, retry, transact
from turnstile_ddb import _lease_item as _item
from turnstile_ddb._lease_item import QueueSettings

PATTERN = _item.PATTERN
SEPARATOR = "#q#"
TOMBSTONE_REAP_S = 86_400  # a tombstone's TTL: a day, far past any wait
MAX_SKIP = 50
MAX_QUIET = 1024  # resources a process remembers as quiet (an arbitrary one is forgotten past it)

# The claim records the hold it ends (its release minus its acquisition, from the item's own
# values: the claimer never saw the release) as ``lastHoldMs``; a takeover records the time since
# the acquisition, which :func:`_hold_sample` discards as longer than L.
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


# Public (shown, pickled, documented) as turnstile_ddb.lease_queue's; defined beside the
# protocols that raise them.
PassedOver.__module__ = WaitTimedOut.__module__ = "turnstile_ddb.lease_queue"


class Queue(Protocol):
    """What the protocols read of a queue (either front door's ``LeaseQueue``, the synchronous
    one's fields): the lease table's settings, the queue's, its naps, its deadline clock, its
    ticket hook and the resources it last saw quiet (a set the protocols update)."""

    @property
    def leases(self) -> lease.Leases: ...
    @property
    def settings(self) -> QueueSettings: ...
    @property
    def sleep(self) -> Callable[[float], Any]: ...
    @property
    def monotonic(self) -> Callable[[], float]: ...
    @property
    def on_ticket(self) -> Callable[[str, str, int], None] | None: ...
    @property
    def quiet(self) -> set[str]: ...


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
    """One call of ``LeaseQueue.acquire``: what it asked for, and the DynamoDB calls it has
    spent on tickets given up (passed over, lost) and on the fast path."""

    resource: str
    owner: str
    deadline: float  # monotonic
    duration_ms: int  # the lease's duration (expiresAt = now + this, capped by remaining_ms)
    remaining_ms: Callable[[], int] | None
    started: float  # monotonic
    calls: int = 0


# -- reading the clocks, through the driver --------------------------------------------------------


def _monotonic(queue: Queue) -> _core.Steps[float]:
    now: float = yield _core.Now(queue.monotonic)
    return now


def _now_ms(queue: Queue) -> _core.Steps[int]:
    return (yield from lease.now_protocol(queue.leases))


def _recorded_turn(queue: Queue, wait: _Wait) -> _core.Steps[int]:
    """The turn length to record (``turnMs``): this waiter's own measure, the time it waited
    over the acquisitions it waited for (the holder it found, and each ticket ahead),
    averaged 1:3 with the recorded one, so the next waiters' first nap has a good guess."""
    waited = ((yield from _monotonic(queue)) - wait.queued_at) * 1000
    sample = int(waited / max(1, wait.ticket - wait.first_head + 1))
    recorded = int(wait.item.get("turnMs", sample))
    return max(1, (sample + 3 * recorded) // 4)


def _hold_sample(queue: Queue, item: dict[str, Any]) -> int | None:
    """The last hold the item recorded (``lastHoldMs``), if it was a released hold (ms)."""
    if "lastHoldMs" not in item:
        return None
    sample = int(item["lastHoldMs"])
    return sample if 0 < sample < queue.settings.expiry_ms else None  # 0: no hold before


def _hold_ms(queue: Queue, item: dict[str, Any]) -> int | None:
    """How long a holder holds, as the item says: ``holdMs`` (a running average, a claim
    behind) with the last hold (``lastHoldMs``) averaged in; None before any release."""
    sample = _hold_sample(queue, item)
    recorded = int(item.get("holdMs", 0)) or None  # 0: none recorded yet
    if sample is None or recorded is None:
        return sample if recorded is None else recorded
    return (sample + 3 * recorded) // 4


# -- writes ----------------------------------------------------------------------------------------


def _claim(queue: Queue, wait: _Wait, request: _Request) -> _core.Steps[lease.Lease | None]:
    """Take the lease as the head if it is free; None (``wait.item`` refreshed) if not."""
    condition = "#head = :ticket AND #expiresAt < :now"
    return (yield from _take(queue, wait, request, condition, codec.values(ticket=wait.ticket)))


def _skip(queue: Queue, wait: _Wait, request: _Request) -> _core.Steps[lease.Lease | None]:
    """Pass over a head that did not come for its turn in L: right behind it, take the lease
    in the same write; further back, only move the head on (and restart its clock)."""
    settings = queue.settings
    head = wait.head
    now = yield from _now_ms(queue)
    stale = codec.values(head=head, stale=now - settings.expiry_ms, idle=now - settings.idle_ms)
    condition = (
        f"#head = :head AND #expiresAt < :now AND {_item.STALE_HEAD} AND {_item.SILENT_HEAD}"
    )
    if head + 1 == wait.ticket:
        held = yield from _take(queue, wait, request, condition, stale)
        if held is not None:
            metrics.count("LeaseWaiterSkipped", pattern=PATTERN)
        return held
    update = "SET #head = :next, #skippedAt = :now"
    values = {**stale, **codec.values(next=head + 1)}
    if (yield from _update_head(queue, wait, update, condition, values)):
        metrics.count("LeaseWaiterSkipped", pattern=PATTERN)
    else:  # the head came for its turn or beat, or another waiter moved it first
        metrics.count("LeaseSkipRefused", pattern=PATTERN)
    return None


def _update_head(
    queue: Queue, wait: _Wait, update: str, condition: str, values: dict[str, Any]
) -> _core.Steps[bool]:
    """``update`` on the lease item under ``condition`` (on its head: a resend changes nothing
    more), ``:now`` read anew for each send; ``wait.item`` becomes the item as it is after it
    (ALL_NEW) or as it refused it (ALL_OLD). Whether it was applied."""
    leases = queue.leases
    wait.calls += 1

    def attempt() -> _core.Steps[Any]:
        return (yield from _core.send(
            "update_item",
            TableName=leases.table,
            Key=leases.wire_key(wait.resource),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=leases.names(*_item.used(update, condition)),
            ExpressionAttributeValues={**values, **codec.values(now=(yield from _now_ms(queue)))},
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ))  # fmt: skip

    try:
        response = yield from retry.retrying(
            attempt, backoff=leases.backoff, idempotent=True, pattern=PATTERN
        )
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        wait.item = queue.leases._old(exc) or {}
        return False
    wait.item = _new(queue, response)
    return True


def _take(
    queue: Queue,
    wait: _Wait,
    request: _Request,
    condition: str,
    values: dict[str, Any] | None = None,
) -> _core.Steps[lease.Lease | None]:
    """The acquisition write with this ticket's head move (head = ticket + 1) and turn record;
    None (``wait.item`` refreshed from the refusal's ALL_OLD) if refused."""
    now = yield from _now_ms(queue)
    own = codec.values(
        next=wait.ticket + 1,
        turn=(yield from _recorded_turn(queue, wait)),
        hold=_recorded_hold(queue, wait),
    )
    write = _item.Acquisition(
        wait.owner,
        now + _duration_ms(queue, request),
        now,
        condition,
        also_set=CLAIM_SET,
        values={**own, **(values or {})},
    )
    wait.calls += 1
    metrics.count("LeaseAttempt", pattern=PATTERN)
    asked = yield from _monotonic(queue)
    try:
        seen = yield from _item.take_protocol(queue.leases, wait.resource, write)
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        wait.latency = (yield from _monotonic(queue)) - asked
        metrics.count("LeaseBusy", pattern=PATTERN)
        wait.item = queue.leases._old(exc) or {}
        return None
    except errors.OutcomeUnknown:
        return (yield from _settle_claim(queue, wait, write))
    seen = seen or {}
    if int(seen.get("tickets", 0)) > wait.ticket:
        queue.quiet.discard(wait.resource)  # someone queued behind it
    return _held(wait, seen, int(seen.get("fence", 0)) + 1, write)


def _settle_claim(
    queue: Queue, wait: _Wait, write: _item.Acquisition
) -> _core.Steps[lease.Lease | None]:
    """A claim whose answer was lost, settled by a read: the item records this write's
    acquisition id: ours (nobody acquired since; the owner alone would not tell, one owner
    may queue many times at once). Still before this ticket: not applied, look again (None).
    Otherwise :class:`PassedOver`: queue again."""
    wait.item = yield from _get(queue, wait)
    if wait.item.get("acquisition") == write.id:
        return _held(wait, {}, int(wait.item.get("fence", 0)), write)
    if wait.head <= wait.ticket:
        return None
    raise PassedOver(wait.resource, wait.ticket) from None


def _grab(queue: Queue, request: _Request) -> _core.Steps[lease.Lease | None]:
    """The fast path (see *Fast path*): a ticket served at once, in one write, if the lease
    is free and nobody is queued; None (the resource no longer taken for quiet) if not."""
    now = yield from _now_ms(queue)
    write = _item.Acquisition(
        request.owner,
        now + _duration_ms(queue, request),
        now,
        _item.FREE_AND_NO_QUEUE,
        also_set=(
            ", #tickets = if_not_exists(#head, :one), "
            f"#head = if_not_exists(#head, :one) + :one, #lastHoldMs = {LAST_HOLD}"
        ),
    )
    metrics.count("LeaseAttempt", pattern=PATTERN)
    try:
        seen = yield from _item.take_protocol(queue.leases, request.resource, write)
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        metrics.count("LeaseBusy", pattern=PATTERN)
        queue.quiet.discard(request.resource)
        return None
    except errors.OutcomeUnknown:
        queue.quiet.discard(request.resource)
        return (yield from _settle_grab(queue, request, write))
    seen = seen or {}
    fence, ticket = int(seen.get("fence", 0)) + 1, int(seen.get("head", 1))
    return (yield from _served(queue, request, seen, fence, ticket, write))


def _settle_grab(
    queue: Queue, request: _Request, write: _item.Acquisition
) -> _core.Steps[lease.Lease | None]:
    """A grab whose answer was lost, settled by a read: the item records this write's
    acquisition id: ours; else None (queue as usual)."""
    looking = _Wait(request.resource, request.owner, 0, (yield from _monotonic(queue)), {})
    item = yield from _get(queue, looking)
    request.calls += looking.calls
    if item.get("acquisition") != write.id:
        return None
    served = _served(queue, request, {}, int(item["fence"]), int(item["tickets"]), write)
    return (yield from served)


def _served(
    queue: Queue,
    request: _Request,
    seen: dict[str, Any],
    fence: int,
    ticket: int,
    write: _item.Acquisition,
) -> _core.Steps[lease.Lease]:
    """The lease a grab took, as ``ticket`` (reported to ``on_ticket`` like any ticket)."""
    if queue.on_ticket is not None:
        queue.on_ticket(request.resource, request.owner, ticket)
    wait = _Wait(request.resource, request.owner, ticket, (yield from _monotonic(queue)), seen)
    return _held(wait, seen, fence, write)


def _duration_ms(queue: Queue, request: _Request) -> int:
    return _item.duration_ms(
        request.duration_ms, request.remaining_ms, queue.leases.safety_margin_ms
    )


def _new(queue: Queue, response: Mapping[str, Any]) -> dict[str, Any]:
    """The ALL_NEW item of an update, with the default names."""
    return _item.logical(queue.leases.attributes, codec.new_item(response)) or {}


def _recorded_hold(queue: Queue, wait: _Wait) -> int:
    """The running average hold to record (``holdMs``); 0 before any release."""
    hold = _hold_ms(queue, wait.item)
    return 0 if hold is None else hold


def _beat(queue: Queue, wait: _Wait) -> _core.Steps[None]:
    """Next in line at a live holder: say so (from now on it is passed over L after its
    last beat, not I), and look at the item in the same call::

        UpdateItem <resource>  SET #beatTicket = :ticket, #beatAt = :now
          ConditionExpression: #head = :ticket
          ReturnValues: ALL_NEW (ALL_OLD on a refusal: the head moved on)
    """
    update, condition = "SET #beatTicket = :ticket, #beatAt = :now", "#head = :ticket"
    if (yield from _update_head(queue, wait, update, condition, codec.values(ticket=wait.ticket))):
        wait.beat_due = (yield from _monotonic(queue)) + queue.settings.heartbeat_ms / 1000


def _pass_left(queue: Queue, wait: _Wait, front: int) -> _core.Steps[None]:
    """Move the head past tickets whose waiters left (their tombstone rows go with it)."""
    leases = queue.leases
    passed = list(range(wait.head, front))[:MAX_SKIP]
    rows = [leases.wire_key(waiter_key(wait.resource, ticket)) for ticket in passed]
    items: list[dict[str, Any]] = [
        {"Delete": {"TableName": leases.table, "Key": row}} for row in rows
    ]
    values = codec.values(
        next=passed[-1] + 1, head=passed[0], now=(yield from _now_ms(queue)), passed=set(passed)
    )
    items.append(
        {
            "Update": {
                "TableName": leases.table,
                "Key": leases.wire_key(wait.resource),
                "UpdateExpression": "SET #head = :next, #skippedAt = :now DELETE #left :passed",
                "ConditionExpression": "#head = :head",
                "ExpressionAttributeNames": leases.names("#head", "#skippedAt", "#left"),
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
    )
    wait.calls += 1
    try:
        yield from transact.transact_write_protocol(items, backoff=leases.backoff, pattern=PATTERN)
    except transact.Cancelled as exc:
        seen = _item.logical(leases.attributes, exc.reasons[-1].item)
        wait.item = seen or (yield from _get(queue, wait))  # someone moved the head: look
        return
    metrics.count("LeaseWaiterSkipped", pattern=PATTERN, value=len(passed))
    wait.item = {
        **wait.item,
        "head": passed[-1] + 1,
        "left": wait.left - set(passed),
        "skippedAt": (yield from _now_ms(queue)),
    }


def _held(wait: _Wait, seen: dict[str, Any], fence: int, write: _item.Acquisition) -> lease.Lease:
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


def _leave(queue: Queue, wait: _Wait) -> _core.Steps[None]:
    """The deadline passed: write a tombstone row and note the ticket in the item's ``left``
    set, in one transaction, so whoever looks next passes it over at once."""
    leases = queue.leases
    wait.calls += 1
    # TTL's cleanup of a tombstone nobody passes over (epoch seconds)
    reap_at = int((yield _core.Now(leases.clock))) + TOMBSTONE_REAP_S
    tombstone = _item.stored(
        leases.attributes,
        queue_of=wait.resource,
        ticket=wait.ticket,
        owner=wait.owner,
        expires_at_ms=0,
        ttl_attribute=reap_at,
    )
    items: list[dict[str, Any]] = [
        {
            "Put": {
                "TableName": leases.table,
                "Item": codec.encode_item({leases.key_attr: wait.key, **tombstone}),
            }
        },
        {
            "Update": {
                "TableName": leases.table,
                "Key": leases.wire_key(wait.resource),
                "UpdateExpression": "ADD #left :mine",
                "ConditionExpression": "#head <= :ticket",
                "ExpressionAttributeNames": leases.names("#left", "#head"),
                "ExpressionAttributeValues": codec.values(mine={wait.ticket}, ticket=wait.ticket),
            }
        },
    ]
    try:
        yield from transact.transact_write_protocol(items, backoff=leases.backoff, pattern=PATTERN)
    except transact.Cancelled as exc:
        if not exc.failed_at(1):
            metrics.count("LeaseLeaveFailed", pattern=PATTERN)
        # Refused: the head is past this ticket already (it was passed over): nothing to leave.
    except (ClientError, BotoCoreError, errors.TurnstileError):
        # Not written: the ticket is passed over after I, like a silent waiter's.
        metrics.count("LeaseLeaveFailed", pattern=PATTERN)


def _timed_out(wait: _Wait, attempts: int) -> WaitTimedOut:
    item = wait.item
    return WaitTimedOut(
        wait.resource,
        str(item.get("owner", "")),
        int(item.get("expiresAt", 0)),
        int(item.get("fence", 0)),
        position=wait.position,
        attempts=attempts,
    )


def _get(queue: Queue, wait: _Wait) -> _core.Steps[dict[str, Any]]:
    leases = queue.leases
    wait.calls += 1
    params = {
        "TableName": leases.table,
        "Key": leases.wire_key(wait.resource),
        "ConsistentRead": True,
    }
    response = yield from retry.retrying(
        _core.Call("get_item", params), backoff=leases.backoff, idempotent=True, pattern=PATTERN
    )
    return _item.logical(leases.attributes, codec.decode_item(response.get("Item"))) or {}
