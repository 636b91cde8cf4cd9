"""Locks' request bodies (seed 003)."""

from __future__ import annotations

from service.api.models import Body, Fence, LeaseOwner, LockTtl


class Acquire(Body):
    owner: str = LeaseOwner  # type: ignore[assignment]
    ttlSeconds: LockTtl


class Renew(Body):
    owner: str = LeaseOwner  # type: ignore[assignment]
    fence: Fence
    ttlSeconds: LockTtl


class Release(Body):
    owner: str = LeaseOwner  # type: ignore[assignment]
    fence: Fence
