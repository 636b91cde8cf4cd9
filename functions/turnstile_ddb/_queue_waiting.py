"""The lease queue's waiting, as protocols (:mod:`turnstile_ddb._core`): take a ticket, wait
on it (its naps paced as :mod:`turnstile_ddb.lease_queue` describes under *Pace* and
*Liveness*), and the heartbeat's renewal loop, written once for
:class:`turnstile_ddb.lease_queue.LeaseQueue` and :class:`turnstile_ddb.aio.lease_queue.LeaseQueue`
(the writes it makes between naps are :mod:`turnstile_ddb._queue_writes`'s).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from turnstile_ddb import _core, codec, errors, lease, metrics, retry
from turnstile_ddb._queue_writes import (
    MAX_QUIET,
    PATTERN,
    PassedOver,
    Queue,
    WaitTimedOut,
    _beat,
    _claim,
    _grab,
    _hold_ms,
    _leave,
    _monotonic,
    _new,
    _now_ms,
    _pass_left,
    _Request,
    _skip,
    _timed_out,
    _Wait,
)


def deadline_protocol(
    queue: Queue, wait_ms: int, remaining_ms: Callable[[], int] | None
) -> _core.Steps[float]:
    """``LeaseQueue.deadline``: the monotonic time a wait of ``wait_ms`` must end by."""
    budget = wait_ms
    if remaining_ms is not None:
        budget = min(budget, remaining_ms() - queue.settings.margin_ms)
    return (yield from _monotonic(queue)) + max(0, budget) / 1000


# -- acquire ---------------------------------------------------------------------------------------


def acquire_protocol(
    queue: Queue,
    resource: str,
    owner: str,
    wait_ms: int,
    ttl_ms: int | None,
    remaining_ms: Callable[[], int] | None,
) -> _core.Steps[lease.Lease]:
    """``LeaseQueue.acquire``'s protocol, for both front doors."""
    deadline = yield from deadline_protocol(queue, wait_ms, remaining_ms)
    request = _Request(
        resource,
        owner,
        deadline=deadline,
        duration_ms=ttl_ms if ttl_ms is not None else queue.settings.expiry_ms,
        remaining_ms=remaining_ms,
        started=(yield from _monotonic(queue)),
    )
    try:
        held = yield from _fast_path(queue, request)
        if held is None:
            held = yield from _queue(queue, request)
    except WaitTimedOut:
        yield from _waited(queue, request)
        metrics.count("LeaseWaitGaveUp", pattern=PATTERN)
        raise
    yield from _waited(queue, request)
    return held


def _waited(queue: Queue, request: _Request) -> _core.Steps[None]:
    waited = ((yield from _monotonic(queue)) - request.started) * 1000
    metrics.timing("LeaseWait", waited, pattern=PATTERN)


def _fast_path(queue: Queue, request: _Request) -> _core.Steps[lease.Lease | None]:
    """A resource last seen quiet: one write that takes a ticket and is served at once (see
    *Fast path*); None (the call counted) if refused."""
    if request.resource not in queue.quiet:
        return None
    request.calls += 1
    held = yield from _grab(queue, request)
    return None if held is None else replace(held, attempts=request.calls)


def _queue(queue: Queue, request: _Request) -> _core.Steps[lease.Lease]:
    """Take a ticket and wait on it; passed over, or the ticket call lost, queue again while
    the deadline allows."""
    while True:
        wait = yield from _ticket(queue, request)
        if wait is None:
            continue
        try:
            held = yield from _wait(queue, wait, request)
        except PassedOver:
            request.calls += wait.calls
            metrics.count("LeasePassedOver", pattern=PATTERN)
            if (yield from _monotonic(queue)) >= request.deadline:
                raise _timed_out(wait, request.calls) from None
            continue
        except WaitTimedOut as timed_out:
            timed_out.attempts += request.calls
            raise
        return replace(held, attempts=request.calls + wait.calls)


def _ticket(queue: Queue, request: _Request) -> _core.Steps[_Wait | None]:
    """A new ticket; None when the call's answer was lost and time is left to take another
    (the ticket may have been taken: nobody comes for it, so it is passed over after I like
    a dead waiter's)."""
    try:
        return (yield from _enqueue(queue, request.resource, request.owner))
    except errors.OutcomeUnknown:
        request.calls += 1
        if (yield from _monotonic(queue)) >= request.deadline:
            raise
        return None


def _enqueue(queue: Queue, resource: str, owner: str) -> _core.Steps[_Wait]:
    leases, settings = queue.leases, queue.settings
    asked = yield from _monotonic(queue)

    def attempt() -> _core.Steps[Any]:
        values = codec.values(
            one=1,
            zero=0,
            now=(yield from _now_ms(queue)),
            expiry=settings.expiry_ms,
            idle=settings.idle_ms,
        )
        return (yield from _core.send(
            "update_item",
            TableName=leases.table,
            Key=leases.wire_key(resource),
            UpdateExpression=(
                "ADD #tickets :one SET #head = if_not_exists(#head, :one), "
                "#fence = if_not_exists(#fence, :zero), "
                "#expiresAt = if_not_exists(#expiresAt, :zero), #queuedAt = :now, "
                "#expiryMs = :expiry, #idleMs = :idle"
            ),
            ExpressionAttributeNames=leases.names(
                "#tickets", "#head", "#fence", "#expiresAt", "#queuedAt", "#expiryMs", "#idleMs"
            ),
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        ))  # fmt: skip

    response = yield from retry.retrying(
        attempt,
        backoff=leases.backoff,
        idempotent=False,  # a resend takes a second ticket
        pattern=PATTERN,
    )
    item = _new(queue, response)
    ticket = int(item["tickets"])
    metrics.count("LeaseQueued", pattern=PATTERN)
    if queue.on_ticket is not None:
        queue.on_ticket(resource, owner, ticket)
    wait = _Wait(resource, owner, ticket, (yield from _monotonic(queue)), item, calls=1)
    wait.latency = wait.queued_at - asked
    if ticket == wait.head and int(item.get("expiresAt", 0)) < (yield from _now_ms(queue)):
        if len(queue.quiet) >= MAX_QUIET:
            queue.quiet.pop()
        queue.quiet.add(resource)  # free with nobody ahead: next time, grab it directly
    wait.first_head = wait.head
    return wait


def _wait(queue: Queue, wait: _Wait, request: _Request) -> _core.Steps[lease.Lease]:
    """Wait on ``wait``'s ticket until served (see *Liveness* and *Pace*), or leave at the
    deadline (:class:`WaitTimedOut`); :class:`PassedOver` if the queue moved past it."""
    settings = queue.settings
    deadline = request.deadline
    first = True  # even a spent deadline (wait_ms 0, a slow queue call) gets one look
    while True:
        if (yield from _monotonic(queue)) >= deadline and not first:
            yield from _leave(queue, wait)
            raise _timed_out(wait, wait.calls)
        first = False
        if wait.head > wait.ticket or int(wait.item.get("tickets", 0)) < wait.ticket:
            # Passed over; or the counter is behind this ticket (a restored table), so the
            # ticket may be handed out again: queue again either way.
            raise PassedOver(wait.resource, wait.ticket)
        now = yield from _now_ms(queue)
        free = int(wait.item.get("expiresAt", 0)) < now
        front = wait.front
        if front > wait.head:
            yield from _pass_left(queue, wait, front)  # tombstones ahead: passed over at once
            continue
        if front == wait.ticket:
            # Next in line (after any who left). Free: claim now. Held: nap until the
            # holder's expected release (or its expiry), then claim: the claim is the look.
            if not free and wait.beat_due is None:
                # First seen next at a live holder: a hold shorter than H ends before any
                # beat is due, and without one it is passed over only after I (safe: it
                # naps at most L - H, so it comes for a free lease well within I).
                wait.beat_due = (yield from _monotonic(queue)) + settings.heartbeat_ms / 1000
            elif not free and (yield from _monotonic(queue)) >= (wait.beat_due or 0.0):
                yield from _beat(queue, wait)  # it says it is next: from now on passed over after L
                continue
            if not free:
                yield from _nap(
                    queue, wait, deadline, (yield from _until_release(queue, wait, now))
                )
            held = yield from _claim(queue, wait, request)
            if held is not None:
                return held
            continue
        if free and (yield from _stale(queue, wait, now)):
            held = yield from _skip(queue, wait, request)
            if held is not None:
                return held
            continue
        yield from _nap(queue, wait, deadline, (yield from _until_turn(queue, wait, now, free)))
        held = yield from _claim(queue, wait, request)
        if held is not None:
            return held


# -- timing ----------------------------------------------------------------------------------------


def _turn_s(queue: Queue, wait: _Wait) -> _core.Steps[float]:
    """Seconds per acquisition: the serving rate since this ticket was taken, else the one
    the last claims recorded on the item (``turnMs``), else four polls."""
    served = wait.head - wait.first_head
    if served >= 2:
        return ((yield from _monotonic(queue)) - wait.queued_at) / served
    if "turnMs" in wait.item:
        return int(wait.item["turnMs"]) / 1000
    return 4 * queue.settings.poll_ms / 1000


def _until_release(queue: Queue, wait: _Wait, now: int) -> _core.Steps[float]:
    """The head's pause at a live holder: until its expected release (acquiredAt plus one
    turn), then one poll, doubling to four; never past the holder's expiry."""
    hold = _hold_ms(queue, wait.item)
    turn = (yield from _turn_s(queue, wait)) * 1000 if hold is None else hold
    expected = int(wait.item.get("acquiredAt", now)) + turn - now
    if expected <= 0:
        wait.polls += 1
        expected = queue.settings.poll_ms * min(4, 2 ** (wait.polls - 1))
    until_expiry = int(wait.item.get("expiresAt", 0)) - now + 1
    return max(0.0, min(expected, until_expiry)) / 1000


def _until_turn(queue: Queue, wait: _Wait, now: int, free: bool) -> _core.Steps[float]:
    """A waiter further back sleeps its place in line times the time per acquisition (plus
    one poll, so it comes rather just after its turn than just before)."""
    poll_s = queue.settings.poll_ms / 1000
    turn = yield from _turn_s(queue, wait)
    hold = _hold_ms(queue, wait.item)
    if hold is not None:
        turn = min(turn, hold / 1000 + max(2 * wait.latency, poll_s))
    holder = 0.0
    if not free:
        holder = max(0.0, (int(wait.item.get("acquiredAt", now)) - now) / 1000 + turn)
    return holder + wait.position * turn + poll_s


def _nap(queue: Queue, wait: _Wait, deadline: float, seconds: float) -> _core.Steps[None]:
    """Sleep, but never past the deadline, nor (next in line) for L - H, nor (further back)
    for I - H: a live waiter is never taken for dead (see *Liveness*)."""
    settings = queue.settings
    grace = settings.expiry_ms if wait.front == wait.ticket else settings.idle_ms
    cap = (grace - settings.heartbeat_ms) / 1000
    now = yield from _monotonic(queue)
    yield _core.Sleep(max(0.0, min(seconds, cap, deadline - now)), queue.sleep)


def _stale(queue: Queue, wait: _Wait, now: int) -> _core.Steps[bool]:
    """The head has not come for the free lease for L; and if it said it was next, its last
    beat is L old, else it has been the head for I (the last claim or pass-over moved it
    there, or it queued before this waiter, which queued I ago)."""
    settings = queue.settings
    item = wait.item
    free = max(int(item.get(name, 0)) for name in ("expiresAt", "releasedAt", "skippedAt"))
    if free >= now - settings.expiry_ms:
        return False
    if int(item.get("beatTicket", 0)) == wait.head:
        return int(item.get("beatAt", 0)) < now - settings.expiry_ms
    if ((yield from _monotonic(queue)) - wait.queued_at) * 1000 <= settings.idle_ms:
        return False
    head = max(int(item.get(name, 0)) for name in ("acquiredAt", "skippedAt"))
    return head < now - settings.idle_ms


# -- the heartbeat's loop --------------------------------------------------------------------------


class Beating(Protocol):
    """What :func:`heartbeat_protocol` reads and updates of a heartbeat (either front door's)."""

    lease: lease.Lease
    renewals: int
    period_ms: int
    ttl_ms: int
    remaining_ms: Callable[[], int] | None
    margin_ms: int

    def _stopped_after(self, seconds: float) -> Any:
        """Nap ``seconds``; whether the heartbeat was stopped meanwhile (or an awaitable of it)."""

    def _renewed(self, ttl_ms: int) -> Any:
        """Renew :attr:`lease` for ``ttl_ms``: the lease (or an awaitable of it)."""

    def _set_lost(self) -> None: ...


def heartbeat_protocol(beat: Beating) -> _core.Steps[None]:
    """The renewal loop: every period, renew (its TTL cut to end ``margin_ms`` before the
    invocation, whose end stops the loop); a renewal refused sets ``lost`` and stops it; one
    that failed counts ``LeaseHeartbeatFailed`` and the next period tries again."""
    while not (yield _core.Sleep(beat.period_ms / 1000, beat._stopped_after)):
        ttl = beat.ttl_ms
        if beat.remaining_ms is not None:
            left = beat.remaining_ms() - beat.margin_ms
            if left <= beat.period_ms:
                return  # the invocation ends soon: let the lease run out by itself
            ttl = min(ttl, left)
        try:
            beat.lease = yield _core.Invoke(functools.partial(beat._renewed, ttl))
            beat.renewals += 1
        except lease.LeaseLost:
            beat._set_lost()
            return
        except (errors.TurnstileError, ClientError, BotoCoreError):
            metrics.count("LeaseHeartbeatFailed", pattern=PATTERN)
            continue  # throttled or unanswered: the next beat tries again
