"""Locks' answers: the success bodies their routes document (OpenAPI only, never validated).

Imported only when the document is built (``service.api.models.answer``), never by a request.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from service.api.models import Answer, absent


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
