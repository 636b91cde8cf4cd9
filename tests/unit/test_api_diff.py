"""The HTTP API's breaking-change check (``make api-diff``, clients/api_diff.py): the served
document against the last released one (``api/openapi-<version>.json``), every breaking change
recorded in the API changelog (docs/api-changelog.md) or the check fails.

The checker is tested on a small document broken in each way it must catch, and on one that only
adds (which must pass); then the real document is checked against the released one.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from clients import api_diff
from tests.helpers import make


def released() -> dict[str, Any]:
    """A small released document: a create with a body, headers and enums; a read."""
    product = {
        "type": "object",
        "properties": {
            "productId": {"type": "string"},
            "stock": {"type": "integer"},
            "status": {"type": "string", "enum": ["READY", "CREATING"]},
            "price": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        },
        "required": ["productId", "stock"],
    }
    new_product = {
        "type": "object",
        "properties": {
            "productId": {"type": "string", "maxLength": 64},
            "stock": {"type": "number"},
            "strategy": {"type": "string", "enum": ["atomic", "versioned"]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["productId"],
    }
    created = {
        "description": "created",
        "headers": {"ETag": {"schema": {"type": "string"}}, "Location": {"schema": {}}},
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Product"}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1.0.0"},
        "paths": {
            "/products": {
                "post": {
                    "operationId": "create_product",
                    "parameters": [
                        {"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}
                    ],
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/NewProduct"}
                            }
                        }
                    },
                    "responses": {"201": created, "400": {"description": "bad"}},
                }
            },
            "/products/{productId}": {
                "get": {
                    "operationId": "get_product",
                    "parameters": [
                        {
                            "name": "productId",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
        },
        "components": {"schemas": {"Product": product, "NewProduct": new_product}},
    }


def changed(edit: Any) -> dict[str, Any]:
    document = copy.deepcopy(released())
    edit(document)
    return document


def schemas(document: dict[str, Any]) -> dict[str, Any]:
    return document["components"]["schemas"]


def request_fields(document: dict[str, Any]) -> dict[str, Any]:
    return schemas(document)["NewProduct"]["properties"]


def answer_fields(document: dict[str, Any]) -> dict[str, Any]:
    return schemas(document)["Product"]["properties"]


def created(document: dict[str, Any]) -> dict[str, Any]:
    return document["paths"]["/products"]["post"]["responses"]["201"]


BREAKING = {
    "a route removed": (
        lambda d: d["paths"]["/products/{productId}"].pop("get"),
        "route-removed: GET /products/{productId}",
    ),
    "a request field removed": (
        lambda d: request_fields(d).pop("strategy"),
        "field-removed: POST /products request body: strategy",
    ),
    "an answer field removed": (
        lambda d: answer_fields(d).pop("status"),
        "field-removed: POST /products 201 body: status",
    ),
    "a request enum value removed": (
        lambda d: request_fields(d)["strategy"].update(enum=["atomic"]),
        "enum-value-removed: POST /products request body: strategy: versioned",
    ),
    "an answer enum value removed": (
        lambda d: answer_fields(d)["status"].update(enum=["READY"]),
        "enum-value-removed: POST /products 201 body: status: CREATING",
    ),
    "a request field made required": (
        lambda d: schemas(d)["NewProduct"]["required"].append("stock"),
        "field-made-required: POST /products request body: stock",
    ),
    "a required request field added": (
        lambda d: (
            request_fields(d).update(shards={"type": "integer"}),
            schemas(d)["NewProduct"]["required"].append("shards"),
        ),
        "field-made-required: POST /products request body: shards",
    ),
    "a request header made required": (
        lambda d: d["paths"]["/products"]["post"]["parameters"][0].update(required=True),
        "parameter-made-required: POST /products header Idempotency-Key",
    ),
    "an answer field made optional": (
        lambda d: schemas(d)["Product"]["required"].remove("stock"),
        "field-made-optional: POST /products 201 body: stock",
    ),
    "a request type narrowed": (
        lambda d: request_fields(d)["stock"].update(type="integer"),
        "type-narrowed: POST /products request body: stock: number to integer",
    ),
    "a request null no longer accepted": (
        lambda d: request_fields(d).update(note={"type": "string"}),
        "type-narrowed: POST /products request body: note: null, string to string",
    ),
    "a request bound narrowed": (
        lambda d: request_fields(d)["productId"].update(maxLength=32),
        "bound-narrowed: POST /products request body: productId: maxLength 64 to 32",
    ),
    "an answer type widened": (
        lambda d: answer_fields(d)["stock"].update(type="number"),
        "type-widened: POST /products 201 body: stock: integer to number",
    ),
    "an answer header removed": (
        lambda d: created(d)["headers"].pop("ETag"),
        "header-removed: POST /products 201: ETag",
    ),
    "an operation renamed": (
        lambda d: d["paths"]["/products"]["post"].update(operationId="add_product"),
        "operation-renamed: POST /products: create_product to add_product",
    ),
    "a schema renamed": (
        lambda d: (
            schemas(d).update(ProductRequest=schemas(d).pop("NewProduct"))
            or d["paths"]["/products"]["post"]["requestBody"]["content"]["application/json"].update(
                schema={"$ref": "#/components/schemas/ProductRequest"}
            )
        ),
        "schema-removed: NewProduct",
    ),
    "a success status removed": (
        lambda d: d["paths"]["/products"]["post"]["responses"].pop("201"),
        "status-removed: POST /products 201",
    ),
}


@pytest.mark.parametrize("case", list(BREAKING))
def test_each_breaking_change_is_caught(case):
    # Given the released document changed in one breaking way
    edit, expected = BREAKING[case]
    # When the current document is compared with it
    found = api_diff.breaking_changes(released(), changed(edit))
    # Then that change, and only it, is reported (by its key)
    assert [change.key for change in found] == [expected]


def additions(document: dict[str, Any]) -> None:
    """Only additions and relaxations: each is safe for every existing client."""
    document["paths"]["/wallets"] = {"get": {"operationId": "w", "responses": {}}}
    request_fields(document)["colour"] = {"type": "string"}  # a new optional field
    request_fields(document)["strategy"]["enum"].append("sharded")  # a value more accepted
    request_fields(document)["productId"]["maxLength"] = 128  # a bound relaxed
    request_fields(document)["stock"]["type"] = ["number", "string"]  # a type widened
    answer_fields(document)["version"] = {"type": "integer"}  # a new answer field
    answer_fields(document)["price"] = {"type": "number"}  # an answer narrowed (no null)
    schemas(document)["Product"]["required"].append("status")  # an answer field always sent
    created(document)["headers"]["Idempotent-Replayed"] = {"schema": {"type": "string"}}
    operation = document["paths"]["/products"]["post"]
    operation["responses"]["409"] = {"description": "conflict"}
    schemas(document)["Receipt"] = {"type": "object"}  # a schema more


def test_a_document_that_only_adds_passes():
    assert api_diff.breaking_changes(released(), changed(additions)) == []


def test_the_released_document_against_itself_is_unchanged():
    assert api_diff.breaking_changes(released(), released()) == []


def test_a_breaking_change_recorded_in_the_api_changelog_is_accepted():
    # Given two breaking changes, one of them recorded in the changelog's Unreleased section
    found = api_diff.breaking_changes(
        released(), changed(lambda d: d["paths"].pop("/products/{productId}"))
    )
    found += api_diff.breaking_changes(
        released(), changed(lambda d: request_fields(d).pop("strategy"))
    )
    changelog = (
        "# HTTP API changelog\n\n## Unreleased\n\n### Breaking\n\n"
        "- `route-removed: GET /products/{productId}`: read products from the catalogue.\n\n"
        "## 1.0.0\n\n- `field-removed: POST /products request body: strategy`: (an old release)\n"
    )
    # Then only the unrecorded one is left (a record under a released version does not count)
    left = api_diff.unrecorded(found, changelog)
    assert [change.key for change in left] == [
        "field-removed: POST /products request body: strategy"
    ]


def test_the_served_document_keeps_what_the_released_one_promised():
    # Given the last released document (api/) and the document the server serves now
    version, promised = api_diff.latest_release()
    current = api_diff.served()
    # Then every breaking change between them is recorded in docs/api-changelog.md
    left = api_diff.unrecorded(
        api_diff.breaking_changes(promised, current), api_diff.CHANGELOG.read_text()
    )
    assert left == [], api_diff.report(version, left)


def test_make_api_diff_runs_the_check():
    # When a user runs the target
    done = make("api-diff")
    # Then it compared the served document with the released one, and found nothing unrecorded
    assert done.returncode == 0, done.stdout + done.stderr
    assert "keeps the released 1.0.0" in done.stdout
