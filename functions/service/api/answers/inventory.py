"""Inventory's answers: the success bodies its routes document (OpenAPI only, never validated).

Imported only when the document is built (``service.api.models.answer``), never by a request.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from service import config
from service.api.models import Answer


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
