"""Client-held locks (``/locks/{resource}``): leases with fencing tokens over HTTP (seed 003).

Table layout: the lease table of :mod:`turnstile.lease` (partition key ``resource``). Resources
named by HTTP clients match ``schema.ID_PATTERN``, which has no ``/``; leases the service takes for
itself (``wallet/...``) therefore cannot be touched through these routes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from service import config
from service.domain.errors import Locked, LockLost
from turnstile import lease


def leases(client: Any, table: str) -> lease.Leases:
    """The service's lease settings (the clock-skew margin: ``lease.SAFETY_MARGIN_MS``)."""
    return lease.Leases(client=client, table=table, backoff=config.call_backoff())


def ttl_ms(ttl_seconds: float) -> int:
    return max(1, round(ttl_seconds * 1000))


def public(held: lease.Lease) -> dict[str, Any]:
    return {
        "resource": held.resource,
        "owner": held.owner,
        "fence": held.fence,
        "expiresAt": held.expires_at,
    }


def locked(exc: lease.Held, now_ms: int) -> Locked:
    wait_seconds = max(0, exc.expires_at - now_ms) / 1000
    return Locked(
        f"{exc.resource!r} is held by {exc.owner!r}",
        owner=exc.owner,
        expiresAt=exc.expires_at,
        retryAfterSeconds=max(1, math.ceil(wait_seconds)),
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

    def acquire(self, resource: str, owner: str, ttl_seconds: float) -> dict[str, Any]:
        try:
            return public(self.leases.acquire(resource, owner, ttl_ms(ttl_seconds)))
        except lease.Held as exc:
            raise locked(exc, self.leases.now_ms()) from exc

    def renew(self, resource: str, owner: str, fence: int, ttl_seconds: float) -> dict[str, Any]:
        current = self._lease(resource, owner, fence)
        try:
            return public(self.leases.renew(current, ttl_ms(ttl_seconds)))
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
        return lease.Lease(resource, owner, fence, expires_at=0, acquired_at=0)
