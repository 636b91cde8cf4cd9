"""Every way a client can get a products request wrong: a clear 4xx, and nothing written.

moto is enough here: these are API-shape checks, no concurrency involved."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.handlers import products
from tests.helpers import proxy_event, scan_all

PURCHASES = "/products/{productId}/purchases"


@pytest.fixture
def seeded(moto_ddb, moto_tables) -> dict[str, Any]:
    """One product, apple, stock 10 at version 1; returns a snapshot function."""
    created = products.handler(
        proxy_event(
            "POST",
            "/products",
            "/products",
            body=json.dumps({"productId": "apple", "name": "Apple", "stock": 10}),
        ),
        None,
    )
    assert created["statusCode"] == 201

    def snapshot() -> list[Any]:
        return [
            sorted(map(json.dumps, scan_all(moto_ddb, moto_tables[name])))
            for name in moto_tables.names
        ]

    return {"snapshot": snapshot}


def purchase_event(raw_body: str | None, headers: dict[str, str] | None = None) -> dict:
    return proxy_event(
        "POST",
        PURCHASES,
        "/products/apple/purchases",
        body=raw_body,
        headers=headers,
        params={"productId": "apple"},
    )


def answer(event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = products.handler(event, None)
    return response["statusCode"], json.loads(response["body"])


@pytest.mark.parametrize(
    ("raw_body", "status", "code"),
    [
        ('{"quantity": 0}', 400, "VALIDATION_ERROR"),
        ('{"quantity": -1}', 400, "VALIDATION_ERROR"),
        ('{"quantity": 1001}', 400, "VALIDATION_ERROR"),
        ('{"quantity": "3"}', 400, "VALIDATION_ERROR"),
        ('{"quantity": 3.5}', 400, "VALIDATION_ERROR"),
        ('{"quantity": 1e40}', 400, "VALIDATION_ERROR"),
        ('{"quantity": 1e400}', 400, "BAD_JSON"),
        ('{"quantity": true}', 400, "VALIDATION_ERROR"),
        ('{"quantity": null}', 400, "VALIDATION_ERROR"),
        ('{"quantity": NaN}', 400, "BAD_JSON"),
        ('{"quantity": 1, "strategy": "pessimistic"}', 400, "VALIDATION_ERROR"),
        ('{"quantity": 1, "price": 0}', 400, "VALIDATION_ERROR"),
        ("{}", 400, "VALIDATION_ERROR"),
        ("[1]", 400, "VALIDATION_ERROR"),
        ('"quantity"', 400, "VALIDATION_ERROR"),
        ('{"quantity": 1', 400, "BAD_JSON"),
        ("", 400, "BAD_JSON"),
        (None, 400, "BAD_JSON"),
        ('{"quantity": 1, "pad": "' + "x" * 20_000 + '"}', 413, "PAYLOAD_TOO_LARGE"),
    ],
)
def test_bad_purchase_bodies_are_refused_and_write_nothing(seeded, raw_body, status, code):
    # Given a product with stock, and a snapshot of every table
    before = seeded["snapshot"]()
    # When a malformed purchase arrives
    got_status, body = answer(purchase_event(raw_body))
    # Then it is refused with the right status and code, in the contract's shape
    assert (got_status, body["error"]) == (status, code)
    assert isinstance(body["message"], str) and body["message"]
    # And nothing was written anywhere
    assert seeded["snapshot"]() == before


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "text/plain"},
        {},
        {"Content-Type": "application/x-www-form-urlencoded"},
        # no boundary made Powertools' multipart parser fail: a 500
        {"Content-Type": "multipart/form-data"},
        {"Content-Type": "multipart/form-data; boundary=x"},
        {"Content-Type": "application/json; charset=iso-8859-1"},
    ],
)
def test_a_body_that_is_not_declared_json_gets_415(seeded, headers):
    before = seeded["snapshot"]()
    status, body = answer(purchase_event('{"quantity": 1}', headers=headers))
    assert (status, body["error"]) == (415, "UNSUPPORTED_MEDIA_TYPE")
    assert seeded["snapshot"]() == before


def test_json_with_a_charset_is_accepted(seeded):
    status, body = answer(
        purchase_event(
            '{"quantity": 1}', headers={"content-type": "application/json; charset=utf-8"}
        )
    )
    assert status == 201 and body["remainingStock"] == 9


@pytest.mark.parametrize(
    "content_type",
    ["APPLICATION/JSON", 'Application/Json; Charset="UTF-8"', "application/json;charset=utf8"],
)
def test_media_types_are_case_insensitive(seeded, content_type):
    # RFC 9110 media types and parameter names are case-insensitive
    status, body = answer(purchase_event('{"quantity": 1}', headers={"Content-Type": content_type}))
    assert status == 201, body
    assert body["remainingStock"] == 9


def test_an_integral_json_number_is_an_integer_and_a_fraction_is_not(seeded):
    # {"quantity": 2.0} is JSON Schema's integer 2: it buys 2
    status, body = answer(purchase_event('{"quantity": 2.0}'))
    assert (status, body["quantity"], body["remainingStock"]) == (201, 2, 8)
    before = seeded["snapshot"]()
    status, body = answer(purchase_event('{"quantity": 2.5}'))
    assert (status, body["error"]) == (400, "VALIDATION_ERROR")
    assert seeded["snapshot"]() == before


def test_purchase_of_an_unknown_product_is_404_for_both_strategies(seeded):
    before = seeded["snapshot"]()
    for strategy in ("atomic", "versioned"):
        event = purchase_event(json.dumps({"quantity": 1, "strategy": strategy}))
        event["path"] = "/products/pear/purchases"
        event["pathParameters"] = {"productId": "pear"}
        status, body = answer(event)
        assert (status, body["error"]) == (404, "NOT_FOUND")
    assert seeded["snapshot"]() == before


def test_buying_more_than_the_stock_says_how_many_are_available(seeded):
    before = seeded["snapshot"]()
    for strategy in ("atomic", "versioned"):
        status, body = answer(purchase_event(json.dumps({"quantity": 11, "strategy": strategy})))
        assert (status, body["error"], body["available"]) == (409, "OUT_OF_STOCK", 10)
    assert seeded["snapshot"]() == before


def test_an_invalid_product_id_in_the_path_is_400(seeded):
    before = seeded["snapshot"]()
    event = purchase_event('{"quantity": 1}')
    event["path"], event["pathParameters"] = "/products/a b/purchases", {"productId": "a b"}
    status, body = answer(event)
    assert (status, body["error"]) == (400, "VALIDATION_ERROR")
    assert "productId" in body["message"]
    assert seeded["snapshot"]() == before


def test_creating_an_existing_product_is_409_and_keeps_the_original(seeded):
    before = seeded["snapshot"]()
    event = proxy_event(
        "POST",
        "/products",
        "/products",
        body=json.dumps({"productId": "apple", "name": "Impostor", "stock": 0}),
    )
    status, body = answer(event)
    assert (status, body["error"]) == (409, "ALREADY_EXISTS")
    assert seeded["snapshot"]() == before


@pytest.mark.parametrize(
    "payload",
    [
        {"productId": "p", "name": "P", "stock": -1},
        {"productId": "p", "name": "", "stock": 1},
        {"productId": "", "name": "P", "stock": 1},
        {"productId": "p", "name": "P"},
        {"productId": "p", "name": "P", "stock": 1, "version": 7},
    ],
)
def test_bad_product_definitions_are_400(seeded, payload):
    before = seeded["snapshot"]()
    status, body = answer(proxy_event("POST", "/products", "/products", body=json.dumps(payload)))
    assert (status, body["error"]) == (400, "VALIDATION_ERROR")
    assert seeded["snapshot"]() == before


def patch_event(body: Any, if_match: str | None) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if if_match is not None:
        headers["If-Match"] = if_match
    return proxy_event(
        "PATCH",
        "/products/{productId}",
        "/products/apple",
        body=json.dumps(body),
        headers=headers,
        params={"productId": "apple"},
    )


def test_patch_without_if_match_is_428(seeded):
    before = seeded["snapshot"]()
    status, body = answer(patch_event({"stock": 5}, None))
    assert (status, body["error"]) == (428, "PRECONDITION_REQUIRED")
    assert seeded["snapshot"]() == before


def test_patch_with_a_stale_if_match_is_412_and_names_the_current_version(seeded):
    # Given the product moved on to version 2
    assert answer(patch_event({"stock": 7}, '"1"'))[0] == 200
    before = seeded["snapshot"]()
    # When a client that read version 1 tries to write
    status, body = answer(patch_event({"stock": 5}, '"1"'))
    # Then it is told the current version, and its write is not applied
    assert (status, body["error"], body["currentVersion"]) == (412, "VERSION_MISMATCH", 2)
    assert seeded["snapshot"]() == before


@pytest.mark.parametrize("if_match", ['"abc"', "", '"-1"', '"1", "2"'])
def test_patch_with_a_malformed_if_match_is_400(seeded, if_match):
    before = seeded["snapshot"]()
    status, body = answer(patch_event({"stock": 5}, if_match))
    assert (status, body["error"]) == (400, "BAD_REQUEST")
    assert seeded["snapshot"]() == before


def test_patch_with_nothing_to_change_is_400(seeded):
    before = seeded["snapshot"]()
    status, body = answer(patch_event({}, '"1"'))
    assert (status, body["error"]) == (400, "VALIDATION_ERROR")
    assert seeded["snapshot"]() == before


def test_patch_with_the_current_version_applies_and_returns_the_new_etag(seeded):
    response = products.handler(patch_event({"name": "Green apple"}, 'W/"1"'), None)
    assert response["statusCode"] == 200
    assert response["headers"]["ETag"] == '"2"'
    assert json.loads(response["body"])["name"] == "Green apple"


def test_an_unknown_route_or_method_is_404_in_contract_shape_and_writes_nothing(seeded):
    # API Gateway has no DELETE method on /products/{productId} and answers 404 (its gateway
    # response for MISSING_AUTHENTICATION_TOKEN); the function answers the same when invoked.
    before = seeded["snapshot"]()
    status, body = answer(proxy_event("DELETE", "/products/{productId}", "/products/apple"))
    assert (status, body["error"]) == (404, "NOT_FOUND")
    status, body = answer(proxy_event("GET", "/nowhere", "/nowhere"))
    assert (status, body["error"]) == (404, "NOT_FOUND")
    assert seeded["snapshot"]() == before


def test_an_id_with_a_trailing_newline_is_refused_not_stored(seeded):
    # "$" in Python also matches before a final newline: such an id once reached a Location header
    before = seeded["snapshot"]()
    status, body = answer(
        proxy_event(
            "POST",
            "/products",
            "/products",
            body=json.dumps({"productId": "abc\n", "name": "P", "stock": 1}),
        )
    )
    assert (status, body["error"]) == (400, "VALIDATION_ERROR")
    event = purchase_event('{"quantity": 1}')
    event["path"], event["pathParameters"] = "/products/apple\n/purchases", {"productId": "apple\n"}
    assert answer(event)[0] == 404  # no route has a newline in a path segment
    assert seeded["snapshot"]() == before


@pytest.mark.parametrize("if_match", ['"\u00b2"', '"\u0661"', '"1\u00b2"'])
def test_non_ascii_digits_in_if_match_are_400_not_500(seeded, if_match):
    before = seeded["snapshot"]()
    status, body = answer(patch_event({"stock": 5}, if_match))
    assert (status, body["error"]) == (400, "BAD_REQUEST")
    assert seeded["snapshot"]() == before
