"""Client-held locks (``/locks/{resource}``): leases with fencing tokens over HTTP.

Table layout: the lease table of :mod:`turnstile_ddb.lease` (partition key ``resource``). Resources
named by HTTP clients match ``schema.ID_PATTERN``, which has no ``/``; leases the service takes for
itself (``wallet/...``) therefore cannot be touched through these routes. Nor can the waiter rows
of :mod:`turnstile_ddb.lease_queue` (``<resource>#q#<ticket>``): the pattern has no ``#`` either.

With ``waitMs`` an acquisition queues (:class:`turnstile_ddb.lease_queue.LeaseQueue`): served in
ticket order, waiting at most ``waitMs`` and never past the invocation's remaining time minus
``LOCK_WAIT_MARGIN_MS``. The invocation bounds only the wait: the lease granted lasts the
``ttlSeconds`` asked, as a plain acquisition's does. Then 201 with the fence and the ticket it
was served on, or 409 LOCKED with the holder and ``queuePosition`` (tickets still ahead; 0: next
in line). A plain acquisition of a free lock with waiters queued is 409 LOCKED with ``reason``
``QUEUED`` (``waiting``, and a Retry-After of the queue's own pace); a held one, ``HELD``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from service import config
from service.domain.errors import Locked, LockLost
from turnstile_ddb import lease, lease_queue


def leases(client: Any, table: str) -> lease.Leases:
    """The service's lease settings (the clock-skew margin: ``lease.SAFETY_MARGIN_MS``)."""
    return lease.Leases(client=client, table=table, backoff=config.call_backoff())


def queue(leases: lease.Leases) -> lease_queue.LeaseQueue:
    """The service's queue settings (H, L, poll) around ``leases``."""
    return lease_queue.LeaseQueue(
        leases,
        lease_queue.QueueSettings(
            heartbeat_ms=config.LOCK_QUEUE_HEARTBEAT_MS,
            expiry_ms=config.LOCK_QUEUE_EXPIRY_MS,
            poll_ms=config.LOCK_QUEUE_POLL_MS,
            margin_ms=config.LOCK_WAIT_MARGIN_MS,
        ),
    )


def duration_ms(ttl_seconds: float) -> int:
    """The lease's duration for ``ttlSeconds`` (its expiresAt = now + this): the lease's own
    lifetime, unrelated to the lease table's TTL attribute (cleanup only)."""
    return max(1, round(ttl_seconds * 1000))


def public(held: lease.Lease) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "resource": held.resource,
        "owner": held.owner,
        "fence": held.fence,
        "expiresAt": held.expires_at_ms,
    }
    if held.ticket is not None:
        answer["ticket"] = held.ticket  # the queue ticket it was served on (waitMs)
    return answer


def locked(exc: lease.Held, now_ms: int) -> Locked:
    """409 LOCKED with its ``reason``: ``HELD`` (the holder, its expiry, and Retry-After its
    remaining time) or ``QUEUED`` (a free lock that queued waiters are served first: how many,
    and Retry-After the time the queue should take to serve them)."""
    if isinstance(exc, lease.Queued):
        return Locked(
            f"{exc.resource!r} is free, but {exc.waiting} waiter(s) are queued for it",
            reason="QUEUED",
            waiting=exc.waiting,
            retryAfterSeconds=max(1, math.ceil(exc.retry_after_ms / 1000)),
        )
    wait_seconds = max(0, exc.expires_at_ms - now_ms) / 1000
    details: dict[str, Any] = {}
    if isinstance(exc, lease_queue.WaitTimedOut):
        details["queuePosition"] = exc.position
    return Locked(
        f"{exc.resource!r} is held by {exc.owner!r}",
        reason="HELD",
        owner=exc.owner,
        expiresAt=exc.expires_at_ms,
        retryAfterSeconds=max(1, math.ceil(wait_seconds)),
        **details,
    )


def lock_lost(exc: lease.LeaseLost, fence: int) -> LockLost:
    current = exc.current or {}
    details: dict[str, Any] = {}
    if current.get("fence") is not None:
        details["currentFence"] = current["fence"]
    return LockLost(
        f"the lease on {exc.resource!r} with fence {fence} is no longer held by this owner",
        **details,
    )


@dataclass
class Locks:
    leases: lease.Leases
    waiting: lease_queue.LeaseQueue | None = None  # default: queue(leases)

    def __post_init__(self) -> None:
        if self.waiting is None:
            self.waiting = queue(self.leases)

    def acquire(
        self,
        resource: str,
        owner: str,
        ttl_seconds: float,
        *,
        wait_ms: int | None = None,
        remaining_ms: Callable[[], int] | None = None,
    ) -> dict[str, Any]:
        """One attempt without ``wait_ms``; with it, a queued wait (see the module docstring)."""
        try:
            if wait_ms is None:
                return public(self.leases.acquire(resource, owner, duration_ms(ttl_seconds)))
            assert self.waiting is not None
            if remaining_ms is not None:
                # The invocation bounds the wait only: the lease is the client's, not this
                # function's, so it lasts the ttlSeconds asked (the queue would cap a lease
                # given remaining_ms to the invocation's end).
                margin = self.waiting.settings.margin_ms
                wait_ms = max(0, min(wait_ms, remaining_ms() - margin))
            held = self.waiting.acquire(
                resource, owner, wait_ms=wait_ms, ttl_ms=duration_ms(ttl_seconds)
            )
        except lease.Held as exc:
            raise locked(exc, self.leases.now_ms()) from exc
        return public(held)

    def renew(self, resource: str, owner: str, fence: int, ttl_seconds: float) -> dict[str, Any]:
        current = self._lease(resource, owner, fence)
        try:
            return public(self.leases.renew(current, duration_ms(ttl_seconds)))
        except lease.LeaseLost as exc:
            raise lock_lost(exc, fence) from exc

    def release(self, resource: str, owner: str, fence: int) -> None:
        try:
            self.leases.release(self._lease(resource, owner, fence))
        except lease.LeaseLost as exc:
            raise lock_lost(exc, fence) from exc

    @staticmethod
    def _lease(resource: str, owner: str, fence: int) -> lease.Lease:
        # Only resource, owner and fence are used by renew and release: they are the identity.
        return lease.Lease(resource, owner, fence, expires_at_ms=0, acquired_at=0)
