"""Locks' request bodies (their answers: ``service.api.answers.locks``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from service import config
from service.api.models import INTEGRAL, Body, Fence, LeaseOwner, LockTtl


class LockAcquireRequest(Body):
    owner: str = LeaseOwner  # type: ignore[assignment]
    ttlSeconds: LockTtl
    # Without waitMs: one attempt. With it: queue (FIFO) and wait up to waitMs.
    waitMs: Annotated[int, INTEGRAL] = Field(default=None, ge=0, le=config.LOCK_MAX_WAIT_MS)  # type: ignore[assignment]


class LockRenewRequest(Body):
    owner: str = LeaseOwner  # type: ignore[assignment]
    fence: Fence
    ttlSeconds: LockTtl


class LockReleaseRequest(Body):
    owner: str = LeaseOwner  # type: ignore[assignment]
    fence: Fence
