"""Products' answers: the success bodies their routes document (OpenAPI only, never validated).

Imported only when the document is built (``service.api.models.answer``), never by a request.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from service.api.models import Answer, absent

Version = Annotated[int, Field(ge=1, description="the product's version, also its ETag")]
Shards2 = Annotated[int, Field(ge=2)]  # shards, when there are several


class Product(Answer):
    """A product as every products route answers it (its ETag is its ``version``)."""

    productId: str
    name: str
    stock: int = Field(ge=0)
    version: Version
    shards: Shards2 | SkipJsonSchema[None] = absent("a sharded product's shards (more than 1)")
    adaptive: Literal[True] | SkipJsonSchema[None] = absent(
        "true when the product's shard count follows the load (created adaptive)"
    )


class PurchaseReceipt(Answer):
    purchaseId: str
    productId: str
    quantity: int = Field(ge=1)
    remainingStock: int = Field(ge=0)
    version: Version
    shard: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = absent(
        "the shard sold from (a sharded product)"
    )
