"""Products' request bodies and answers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from service import config
from service.api.models import INTEGRAL, Answer, Body, Identifier, Name, Shards, Stock, absent


class CreateProductRequest(Body):
    productId: Identifier
    name: Name
    stock: Stock
    shards: Shards = 1


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


Version = Annotated[int, Field(ge=1, description="the product's version, also its ETag")]
Shards2 = Annotated[int, Field(ge=2)]  # shards, when there are several


class Product(Answer):
    """A product as every products route answers it (its ETag is its ``version``)."""

    productId: str
    name: str
    stock: int = Field(ge=0)
    version: Version
    shards: Shards2 | SkipJsonSchema[None] = absent("a sharded product's shards (more than 1)")


class PurchaseReceipt(Answer):
    purchaseId: str
    productId: str
    quantity: int = Field(ge=1)
    remainingStock: int = Field(ge=0)
    version: Version
    shard: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = absent(
        "the shard sold from (a sharded product)"
    )
