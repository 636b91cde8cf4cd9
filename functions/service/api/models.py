"""Request bodies as strict pydantic v2 models, and the contract's error body.

Powertools' resolver validates each body against its model before the route runs; the same models
become the OpenAPI components and, through their JSON Schema, the API Gateway request models
(``infra.api``). This module imports pydantic and ``service.config`` only, so deploy-time code can
read it without loading boto3, Powertools or the domains.

Strict on purpose, because these numbers are money and stock: ``true``, ``"3"``, ``3.0`` and
``1e40`` are not integers, unknown fields are refused, NaN and Infinity are not numbers (the JSON
parser refuses them before the model sees them, see ``service.api.envelope``). Optional fields
default to an absent value, never to ``null``: a client that sends ``null`` is refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service import config

# An id in a path or a body. pydantic checks patterns with Rust's regex engine, where ``$`` ends
# the input (Python's ``re`` would also accept a final newline, and "abc\n" would reach a header).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"

Identifier = Annotated[str, Field(min_length=1, max_length=128, pattern=ID_PATTERN)]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Fence = Annotated[int, Field(ge=1, le=2**53 - 1)]
LockTtl = Annotated[float, Field(ge=config.LOCK_MIN_TTL_SECONDS, le=config.LOCK_MAX_TTL_SECONDS)]
Stock = Annotated[int, Field(ge=0, le=1_000_000_000)]
# Sharded stock or capacity (hot items): shards per product or event, fixed at creation.
Shards = Annotated[int, Field(ge=1, le=config.MAX_STOCK_SHARDS)]
STRATEGIES = ("atomic", "versioned")


class Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


class NewProduct(Body):
    productId: Identifier
    name: Name
    stock: Stock
    shards: Shards = 1


class ProductChanges(Body):
    """Any of name and stock; at least one."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    # absent, not null: a null is refused (strict str), so the schema has no "null" type
    name: str = Field(default=None, min_length=1, max_length=200)  # type: ignore[assignment]
    stock: int = Field(default=None, ge=0, le=1_000_000_000)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _something_to_change(self) -> ProductChanges:
        if not self.model_fields_set:
            raise ValueError("set at least one of name, stock")
        return self

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


class Restock(Body):
    units: Annotated[int, Field(ge=1, le=1_000_000_000)]


class Purchase(Body):
    quantity: Annotated[int, Field(ge=1, le=config.MAX_PURCHASE_QUANTITY)]
    strategy: Literal["atomic", "versioned"] = "atomic"


class NewEvent(Body):
    eventId: Identifier
    name: Name
    capacity: Annotated[int, Field(ge=1, le=config.MAX_EVENT_CAPACITY)]
    shards: Shards = 1


# API.md v2: who a request acts for comes from the token; a body may name a user only to act on
# their behalf (administrators, ``service.policy.acting_for``). Absent, not null, as above.
OnBehalfOf = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)
LeaseOwner = Field(default=None, min_length=1, max_length=256)


class Registration(Body):
    userId: str = OnBehalfOf  # type: ignore[assignment]


class NewInventory(Body):
    sku: Identifier
    units: Annotated[int, Field(ge=1, le=config.INVENTORY_MAX_UNITS)]


class Reservation(Body):
    quantity: Annotated[int, Field(ge=1, le=config.INVENTORY_MAX_QUANTITY)]
    holdSeconds: Annotated[
        float,
        Field(ge=config.INVENTORY_MIN_HOLD_SECONDS, le=config.INVENTORY_MAX_HOLD_SECONDS),
    ] = config.INVENTORY_HOLD_SECONDS


class Acquire(Body):
    """Without ``waitMs``: one attempt. With it: queue (FIFO) and wait up to ``waitMs``."""

    owner: str = LeaseOwner  # type: ignore[assignment]
    ttlSeconds: LockTtl
    waitMs: int = Field(default=None, ge=0, le=config.LOCK_MAX_WAIT_MS)  # type: ignore[assignment]


class Renew(Body):
    owner: str = LeaseOwner  # type: ignore[assignment]
    fence: Fence
    ttlSeconds: LockTtl


class Release(Body):
    owner: str = LeaseOwner  # type: ignore[assignment]
    fence: Fence


class TopUp(Body):
    amount: Annotated[int, Field(ge=1, le=config.MAX_TOP_UP)]


class ErrorBody(BaseModel):
    """Every refusal: a stable code, a sentence for people, sometimes details (``available``...)."""

    model_config = ConfigDict(extra="allow")

    error: str
    message: str
