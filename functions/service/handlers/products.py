"""Products API (seed 000): create, read, conditional update with ETag/If-Match, purchase."""

from __future__ import annotations

from typing import Any

from service import config, runtime
from service.api import schema
from service.api.http import Api, HttpError, Request, Response, Route, created, ok
from service.domain.products import STRATEGIES, Products

TABLES = (config.PRODUCTS, config.IDEMPOTENCY)


products: runtime.Lazy[Products] = runtime.Lazy(
    lambda: Products(
        client=runtime.dynamodb.get(),
        table=config.Tables.from_env(*TABLES)[config.PRODUCTS],
        idempotency=runtime.idempotency.get(),
    )
)


def expected_version(request: Request) -> int | None:
    """The version named by ``If-Match`` (``None`` for ``*``); 428 when the header is missing."""
    value = request.header("If-Match")
    if value is None:
        raise HttpError(
            "PRECONDITION_REQUIRED", 'send If-Match: "<version>" from the ETag you read'
        )
    value = value.strip()
    if value == "*":
        return None
    tag = value[2:] if value.startswith("W/") else value
    digits = tag[1:-1] if len(tag) >= 2 and tag[0] == tag[-1] == '"' else tag
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 18:
        raise HttpError("BAD_REQUEST", 'If-Match must be an ETag such as "3"')
    return int(digits)


def create_product(request: Request) -> Response:
    body = request.body
    product = products.get().create(
        body["productId"], body["name"], body["stock"], body.get("shards", 1)
    )
    return created(product, f"/products/{product['productId']}", etag=product["version"])


def get_product(request: Request) -> Response:
    product = products.get().get(request.params["productId"])
    return ok(product, etag=product["version"])


def update_product(request: Request) -> Response:
    version = expected_version(request)
    product = products.get().update(request.params["productId"], version, dict(request.body))
    return ok(product, etag=product["version"])


def restock(request: Request) -> Response:
    product = products.get().restock(request.params["productId"], request.body["units"])
    return ok(product, etag=product["version"])


def purchase(request: Request) -> Response:
    body: dict[str, Any] = request.body

    def answer(receipt: dict[str, Any]) -> Response:
        return created(receipt, etag=receipt["version"])

    if request.claim is not None:  # the answer commits with the purchase: so do its headers
        request.claim.headers_for = lambda receipt: answer(receipt).headers
    receipt = products.get().purchase(
        request.params["productId"],
        body["quantity"],
        body.get("strategy", "atomic"),
        claim=request.claim,
    )
    return answer(receipt)


PRODUCT_FIELDS = {"name": schema.string(1, 200), "stock": schema.integer(0, 1_000_000_000)}

ROUTES = [
    Route(
        "POST",
        "/products",
        create_product,
        "Create a product at version 1",
        body=schema.obj(
            {"productId": schema.identifier(), **PRODUCT_FIELDS},
            {"shards": schema.integer(1, config.MAX_STOCK_SHARDS)},
        ),
        success=201,
        errors=("ALREADY_EXISTS",),
        idempotent=True,
    ),
    Route(
        "GET",
        "/products/{productId}",
        get_product,
        "Read a product (strongly consistent); ETag carries its version",
        errors=("NOT_FOUND",),
    ),
    Route(
        "PATCH",
        "/products/{productId}",
        update_product,
        "Change name and/or stock if the product is still at the If-Match version",
        body=schema.obj({}, PRODUCT_FIELDS, minProperties=1),
        errors=("NOT_FOUND", "VERSION_MISMATCH", "PRECONDITION_REQUIRED"),
        headers=("If-Match",),
    ),
    Route(
        "POST",
        "/products/{productId}/restocks",
        restock,
        "Add units to the stock, exactly, whatever sells meanwhile (sharded or not)",
        body=schema.obj({"units": schema.integer(1, 1_000_000_000)}),
        errors=("NOT_FOUND", "CONFLICT"),
    ),
    Route(
        "POST",
        "/products/{productId}/purchases",
        purchase,
        "Buy quantity units; strategy atomic (one conditional write) or versioned (seed 000)",
        body=schema.obj(
            {"quantity": schema.integer(1, config.MAX_PURCHASE_QUANTITY)},
            {"strategy": schema.enum(*STRATEGIES)},
        ),
        success=201,
        errors=("NOT_FOUND", "OUT_OF_STOCK", "CONFLICT"),
        idempotent=True,
    ),
]

api: runtime.Lazy[Api] = runtime.Lazy(lambda: Api(ROUTES, runtime.idempotency.get))


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api.get()(event, context)
