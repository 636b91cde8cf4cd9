"""Events' request bodies (their answers: ``service.api.answers.events``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from service import config
from service.api.models import INTEGRAL, Body, Identifier, Name, OnBehalfOf, Shards


class CreateEventRequest(Body):
    eventId: Identifier
    name: Name
    capacity: Annotated[int, Field(ge=1, le=config.MAX_EVENT_CAPACITY), INTEGRAL]
    shards: Shards = 1
    # the counter's shard count follows the load (starting at ``shards``): docs/http-api.md
    adaptive: bool = False


class RegistrationRequest(Body):
    userId: str = OnBehalfOf  # type: ignore[assignment]
