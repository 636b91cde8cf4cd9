"""Products' request bodies (their answers: ``service.api.answers.products``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from service import config
from service.api.models import INTEGRAL, Body, Identifier, Name, Shards, Stock


class CreateProductRequest(Body):
    productId: Identifier
    name: Name
    stock: Stock
    shards: Shards = 1
    # the shard count follows the load (starting at ``shards``): docs/http-api.md
    adaptive: bool = False


class UpdateProductRequest(Body):
    """Any of name and stock; at least one."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    # absent, not null: a null is refused (strict str), so the schema has no "null" type
    name: str = Field(default=None, min_length=1, max_length=200)  # type: ignore[assignment]
    stock: Annotated[int, INTEGRAL] = Field(default=None, ge=0, le=1_000_000_000)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateProductRequest:
        if not self.model_fields_set:
            raise ValueError("set at least one of name, stock")
        return self

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


class RestockRequest(Body):
    units: Annotated[int, Field(ge=1, le=1_000_000_000), INTEGRAL]


class PurchaseRequest(Body):
    quantity: Annotated[int, Field(ge=1, le=config.MAX_PURCHASE_QUANTITY), INTEGRAL]
    strategy: Literal["atomic", "versioned"] = "atomic"
