"""Inventory's request bodies and answers."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from service import config
from service.api.models import INTEGRAL, Answer, Body, Identifier


class CreateInventoryRequest(Body):
    sku: Identifier
    units: Annotated[int, Field(ge=1, le=config.INVENTORY_MAX_UNITS), INTEGRAL]


class ReservationRequest(Body):
    quantity: Annotated[int, Field(ge=1, le=config.INVENTORY_MAX_QUANTITY), INTEGRAL]
    holdSeconds: Annotated[
        float,
        Field(ge=config.INVENTORY_MIN_HOLD_SECONDS, le=config.INVENTORY_MAX_HOLD_SECONDS),
    ] = config.INVENTORY_HOLD_SECONDS


class SkuStatus(StrEnum):
    """A sku's creation: its units are created in chunks (CREATING), then all exist (READY)."""

    CREATING = config.INVENTORY_CREATING
    READY = "READY"


Count = Annotated[int, Field(ge=0)]
UnitIds = Annotated[list[str], Field(description="the units' ids")]


class SkuProgress(Answer):
    """A sku's creation progress (``POST /inventory`` answers it at once)."""

    sku: str
    units: Count
    status: SkuStatus
    unitsCreated: Count


class InventorySummary(SkuProgress):
    """Counts kept from the table's stream, with the creation's progress."""

    available: Count
    reserved: Count
    sold: Count
    consistency: Literal["eventual"]


class InventoryCount(Answer):
    """Exact counts from the units themselves."""

    sku: str
    units: Count
    available: Count
    reserved: Count
    sold: Count
    consistency: Literal["strong"]


class HeldReservation(Answer):
    reservationId: str
    sku: str
    units: UnitIds
    expiresAt: int = Field(description="when the hold ends, epoch milliseconds")


class ConfirmedReservation(Answer):
    reservationId: str
    sku: str
    units: UnitIds
    status: Literal["confirmed"]
