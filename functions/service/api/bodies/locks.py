"""Locks' request bodies and answers."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from service import config
from service.api.models import INTEGRAL, Answer, Body, Fence, LeaseOwner, LockTtl, absent


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


class Lease(Answer):
    """A lease held: send ``owner`` and ``fence`` back to renew or release it."""

    resource: str
    owner: str
    fence: int = Field(ge=1, description="grows with every acquisition: fences protected writes")
    expiresAt: int = Field(description="when the lease ends, epoch milliseconds")


class AcquiredLease(Lease):
    """A lease just acquired (a renewal answers a :class:`Lease`: it was served on no ticket)."""

    ticket: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = absent(
        "the queue ticket it was served on (waitMs)"
    )
