"""Events' answers: the success bodies their routes document (OpenAPI only, never validated).

Imported only when the document is built (``service.api.models.answer``), never by a request.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from service.api.models import Answer, absent


class Event(Answer):
    """An event (its ETag is its ``version``)."""

    eventId: str
    name: str
    capacity: int = Field(ge=1)
    registered: int = Field(ge=0)
    version: int = Field(ge=1)
    shards: Annotated[int, Field(ge=2)] | SkipJsonSchema[None] = absent(
        "a sharded event's shards (more than 1)"
    )
    adaptive: Literal[True] | SkipJsonSchema[None] = absent(
        "true when the event's shard count follows the load (created adaptive)"
    )


class EventRegistration(Answer):
    eventId: str
    userId: str
    registeredAt: datetime


class UserRegistrations(Answer):
    items: list[EventRegistration]


class RequestStatus(StrEnum):
    PENDING = "PENDING"
    ACCEPTED = "ACCEPTED"
    REJECTED = "REJECTED"


# the code the synchronous registration would have answered (service.domain.registration_requests)
RejectionReason = Literal["EVENT_FULL", "ALREADY_REGISTERED", "NOT_FOUND"]


class RegistrationRequestReceipt(Answer):
    """A registration request taken: decided later, in order (poll its Location)."""

    requestId: str
    status: Literal["PENDING"]


class RegistrationRequestState(Answer):
    requestId: str
    userId: str
    status: RequestStatus
    reason: RejectionReason | SkipJsonSchema[None] = absent("why it was REJECTED (only then)")
