"""Request bodies as strict pydantic v2 models, the answers' models, and the contract's error body.

Powertools' resolver validates each body against its model before the route runs; the same models
become the OpenAPI components and, through their JSON Schema, the API Gateway request models
(``infra.api``). This module imports pydantic and ``service.config`` only, so deploy-time code can
read it without loading boto3, Powertools or the domains.

Strict on purpose, because these numbers are money and stock: ``true``, ``"3"`` and ``3.5`` are
not integers, unknown fields are refused, NaN and Infinity are not numbers (the JSON parser refuses
them before the model sees them, see ``service.api.envelope``). Optional fields default to an
absent value, never to ``null``: a client that sends ``null`` is refused.

An integer field takes what JSON Schema's ``integer`` admits (the OpenAPI document says
``integer``): a JSON number with no fractional part, written ``3``, ``3.0`` or ``3e0``; ``1e40`` is
one too, and then out of its field's range. :data:`INTEGRAL` is that rule, ahead of pydantic's
strict ``int`` (which refuses every float).

Each function's bodies live in ``service.api.bodies.<function>``: a function's cold start builds
its own models only (building a pydantic model costs a few milliseconds of CPU each, the 16 of
them about 80 ms). Here: the shared types, the base classes and the error body;
``models.PurchaseRequest`` and the like still work (imported on first use, :func:`__getattr__`).

Request bodies are named as requests (``PurchaseRequest``); what a route answers is an
:class:`Answer`, named after the resource or receipt it is (``Product``, ``PurchaseReceipt``),
in ``service.api.answers.<function>``. Answers are documentation, never validation: only the
OpenAPI document imports them (a request never does), the server answers its domain's dicts,
and ``tests/e2e/test_declared_vs_sent.py`` checks, against the local stack, that those are what
the answers declare (no field more, none never sent).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.json_schema import JsonDict

from service import config

if TYPE_CHECKING:
    from service.api.bodies.events import CreateEventRequest, RegistrationRequest
    from service.api.bodies.inventory import CreateInventoryRequest, ReservationRequest
    from service.api.bodies.locks import LockAcquireRequest, LockReleaseRequest, LockRenewRequest
    from service.api.bodies.products import (
        CreateProductRequest,
        PurchaseRequest,
        RestockRequest,
        UpdateProductRequest,
    )
    from service.api.bodies.wallets import TopUpRequest

# An id in a path or a body. pydantic checks patterns with Rust's regex engine, where ``$`` ends
# the input (Python's ``re`` would also accept a final newline, and "abc\n" would reach a header).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"


def _integral(value: Any) -> Any:
    """A float with no fractional part becomes that int (JSON Schema's ``integer``); anything
    else is left for the strict ``int`` check to refuse (a bool is an int to Python: not here)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Every integer field of a body: ``Annotated[int, Field(<bounds>), INTEGRAL]`` (after the bounds,
# so that they stay JSON Schema's minimum and maximum).
INTEGRAL = BeforeValidator(_integral)

Identifier = Annotated[str, Field(min_length=1, max_length=128, pattern=ID_PATTERN)]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Fence = Annotated[int, Field(ge=1, le=2**53 - 1), INTEGRAL]
LockTtl = Annotated[float, Field(ge=config.LOCK_MIN_TTL_SECONDS, le=config.LOCK_MAX_TTL_SECONDS)]
Stock = Annotated[int, Field(ge=0, le=1_000_000_000), INTEGRAL]
# Sharded stock or capacity (hot items): shards per product or event, fixed at creation.
Shards = Annotated[int, Field(ge=1, le=config.MAX_STOCK_SHARDS), INTEGRAL]


class Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


# Who a request acts for comes from the token (docs/identity.md); a body may name a user
# only to act on their behalf (administrators, ``service.policy.acting_for``). Absent, not
# null, as above.
OnBehalfOf = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)
LeaseOwner = Field(default=None, min_length=1, max_length=256)


class Answer(BaseModel):
    """What a route answers: every field it sends, required where always sent; no other."""

    model_config = ConfigDict(extra="forbid")


def _no_default(schema: JsonDict) -> None:
    schema.pop("default", None)


def absent(description: str) -> Any:
    """An answer's field sent only sometimes (``description`` says when): optional in the
    schema, never ``null`` (annotate it ``X | SkipJsonSchema[None]``, constraints inside ``X``:
    on the union pydantic would write them as unknown keywords)."""
    return Field(default=None, description=description, json_schema_extra=_no_default)


class ErrorBody(BaseModel):
    """Every refusal: a stable code, a sentence for people, sometimes details (``available``...)."""

    model_config = ConfigDict(extra="allow")

    error: str
    message: str


# Which function's module defines each body (``service.api.bodies.<function>``).
HOMES = {
    "CreateProductRequest": "products",
    "UpdateProductRequest": "products",
    "RestockRequest": "products",
    "PurchaseRequest": "products",
    "CreateEventRequest": "events",
    "RegistrationRequest": "events",
    "CreateInventoryRequest": "inventory",
    "ReservationRequest": "inventory",
    "LockAcquireRequest": "locks",
    "LockRenewRequest": "locks",
    "LockReleaseRequest": "locks",
    "TopUpRequest": "wallets",
}

__all__ = [
    "HOMES",
    "ID_PATTERN",
    "Answer",
    "Body",
    "CreateEventRequest",
    "CreateInventoryRequest",
    "CreateProductRequest",
    "ErrorBody",
    "LockAcquireRequest",
    "LockReleaseRequest",
    "LockRenewRequest",
    "PurchaseRequest",
    "RegistrationRequest",
    "ReservationRequest",
    "RestockRequest",
    "TopUpRequest",
    "UpdateProductRequest",
]


def body(name: str) -> type[Body]:
    """The body model ``name``, imported from its function's module on first use."""
    found: type[Body] = getattr(importlib.import_module(f"service.api.bodies.{HOMES[name]}"), name)
    return found


def answer(function: str, name: str) -> type[Answer]:
    """The answer model ``name`` of ``function``'s module (``service.api.answers.<function>``)."""
    found: type[Answer] = getattr(importlib.import_module(f"service.api.answers.{function}"), name)
    return found


def __getattr__(name: str) -> Any:
    if name in HOMES:
        return body(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
