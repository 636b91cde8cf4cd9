"""Products API (optimistic): create, read, conditional update with ETag/If-Match, purchase."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Header

from service import catalog, runtime
from service.api.bodies import products as models
from service.api.errors import HttpError
from service.api.resolver import Id, Resolver, created, ok
from service.domain.products import Products
from service.observability import observed

app = Resolver("products")

products: runtime.Lazy[Products] = runtime.Lazy(
    lambda: Products(
        client=runtime.dynamodb.get(),
        table=catalog.tables("products")["products"],
        idempotency=runtime.idempotency.get(),
        hints=runtime.sharded_hints.get(),
        resizer=runtime.resizer.get(),
    )
)


# What If-Match may say: ``*`` (any current representation) or one ETag as this API writes them
# (``"3"``; weak ``W/"3"`` and a bare ``3`` are read alike). Declared on the header parameter, so
# the OpenAPI document says it; a missing header is 428 (``Resolver._invalid``).
IF_MATCH_PATTERN = r'^\s*(\*|(W/)?"[0-9]{1,18}"|[0-9]{1,18})\s*$'


def expected_version(if_match: str) -> int | None:
    """The version named by ``If-Match`` (``None`` for ``*``)."""
    value = if_match.strip()
    if value == "*":
        return None
    tag = value[2:] if value.startswith("W/") else value
    digits = tag[1:-1] if len(tag) >= 2 and tag[0] == tag[-1] == '"' else tag
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 18:
        raise HttpError("BAD_REQUEST", 'If-Match must be an ETag such as "3"')
    return int(digits)


@app.declared
def create_product(body: models.CreateProductRequest) -> Response[Any]:
    product = products.get().create(
        body.productId, body.name, body.stock, body.shards, body.adaptive
    )
    return created(product, f"/products/{product['productId']}", etag=product["version"])


@app.declared
def get_product(productId: Id) -> Response[Any]:
    product = products.get().get(productId)
    return ok(product, etag=product["version"])


@app.declared
def update_product(
    productId: Id,
    body: models.UpdateProductRequest,
    if_match: Annotated[
        str,
        Header(
            alias="If-Match",
            pattern=IF_MATCH_PATTERN,
            max_length=64,
            description='"<version>" from the ETag read (412 if it moved on), or * for any '
            "current version; required (428 without it)",
        ),
    ],
) -> Response[Any]:
    version = expected_version(if_match)
    product = products.get().update(productId, version, body.changes())
    return ok(product, etag=product["version"])


@app.declared
def restock(productId: Id, body: models.RestockRequest) -> Response[Any]:
    product = products.get().restock(productId, body.units)
    return ok(product, etag=product["version"])


@app.declared
def purchase(productId: Id, body: models.PurchaseRequest) -> Response[Any]:
    def answer(receipt: dict[str, Any]) -> Response[Any]:
        return created(receipt, etag=receipt["version"])

    claim = app.claim(answer)  # the answer commits with the purchase
    receipt = products.get().purchase(productId, body.quantity, body.strategy, claim=claim)
    return answer(receipt)


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
