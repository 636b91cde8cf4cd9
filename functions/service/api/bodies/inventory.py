"""Inventory's request bodies (its answers: ``service.api.answers.inventory``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from service import config
from service.api.models import INTEGRAL, Body, Identifier


class CreateInventoryRequest(Body):
    sku: Identifier
    units: Annotated[int, Field(ge=1, le=config.INVENTORY_MAX_UNITS), INTEGRAL]


class ReservationRequest(Body):
    quantity: Annotated[int, Field(ge=1, le=config.INVENTORY_MAX_QUANTITY), INTEGRAL]
    holdSeconds: Annotated[
        float,
        Field(ge=config.INVENTORY_MIN_HOLD_SECONDS, le=config.INVENTORY_MAX_HOLD_SECONDS),
    ] = config.INVENTORY_HOLD_SECONDS
