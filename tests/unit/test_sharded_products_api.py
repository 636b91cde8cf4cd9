"""Sharded products through the handler (API shape, moto): creation with ``shards``, GET sums the
shards, restock and PATCH keep the total exact and move the ETag, bad ``shards`` writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.handlers import products
from tests.helpers import proxy_event, scan_all


def call(
    method: str, resource: str, path: str, body: Any = None, **kw: Any
) -> tuple[int, Any, Any]:
    event = proxy_event(
        method,
        resource,
        path,
        body=None if body is None else json.dumps(body),
        params={"productId": "drop"} if "{productId}" in resource else None,
        **kw,
    )
    response = products.handler(event, None)
    return response["statusCode"], response.get("headers") or {}, json.loads(response["body"])


def test_a_sharded_product_sums_its_shards_and_keeps_the_total_exact(moto_ddb, moto_tables):
    status, headers, created = call(
        "POST",
        "/products",
        "/products",
        {"productId": "drop", "name": "Drop", "stock": 10, "shards": 4},
    )
    assert status == 201 and created["shards"] == 4 and created["stock"] == 10
    assert headers["ETag"] == '"1"'
    status, _, receipt = call(
        "POST", "/products/{productId}/purchases", "/products/drop/purchases", {"quantity": 2}
    )
    assert status == 201 and receipt["shard"] in range(4) and receipt["version"] == 1
    status, headers, product = call("GET", "/products/{productId}", "/products/drop")
    assert (status, product["stock"], headers["ETag"]) == (200, 8, '"1"')
    status, headers, product = call(
        "POST", "/products/{productId}/restocks", "/products/drop/restocks", {"units": 5}
    )
    assert (status, product["stock"], headers["ETag"]) == (200, 13, '"2"')
    status, _, refused = call(
        "PATCH",
        "/products/{productId}",
        "/products/drop",
        {"stock": 3},
        headers={"If-Match": '"1"', "Content-Type": "application/json"},
    )
    assert (status, refused["error"]) == (412, "VERSION_MISMATCH")
    status, headers, product = call(
        "PATCH",
        "/products/{productId}",
        "/products/drop",
        {"stock": 3},
        headers={"If-Match": '"2"', "Content-Type": "application/json"},
    )
    assert (status, product["stock"], headers["ETag"]) == (200, 3, '"3"')


@pytest.mark.parametrize("shards", [0, 65, "4", 1.5])
def test_bad_shards_are_refused_and_write_nothing(moto_ddb, moto_tables, shards):
    status, _, body = call(
        "POST",
        "/products",
        "/products",
        {"productId": "x", "name": "X", "stock": 1, "shards": shards},
    )
    assert status == 400 and body["error"] == "VALIDATION_ERROR"
    assert scan_all(moto_ddb, moto_tables["products"]) == []


def test_a_keyed_purchase_of_a_sharded_product_is_applied_once(moto_ddb, moto_tables):
    call(
        "POST",
        "/products",
        "/products",
        {"productId": "drop", "name": "D", "stock": 4, "shards": 2},
    )
    headers = {"Idempotency-Key": "k-1", "Content-Type": "application/json"}
    path = "/products/drop/purchases"
    first = call("POST", "/products/{productId}/purchases", path, {"quantity": 1}, headers=headers)
    again = call("POST", "/products/{productId}/purchases", path, {"quantity": 1}, headers=headers)
    assert first[0] == again[0] == 201
    assert first[2]["purchaseId"] == again[2]["purchaseId"]
    assert call("GET", "/products/{productId}", "/products/drop")[2]["stock"] == 3


def test_an_adaptive_product_is_created_with_one_shard_and_says_so(moto_ddb, moto_tables):
    # When a product is created adaptive, without a shard count
    status, _, created = call(
        "POST",
        "/products",
        "/products",
        {"productId": "drop", "name": "Drop", "stock": 10, "adaptive": True},
    )
    # Then it answers as a product whose shards follow the load (one shard: no "shards")
    assert status == 201 and created["adaptive"] is True and "shards" not in created
    status, _, receipt = call(
        "POST", "/products/{productId}/purchases", "/products/drop/purchases", {"quantity": 2}
    )
    assert (status, receipt["shard"], receipt["remainingStock"]) == (201, 0, 8)
    status, _, product = call("GET", "/products/{productId}", "/products/drop")
    assert (status, product["stock"], product["adaptive"]) == (200, 8, True)


@pytest.mark.parametrize("adaptive", ["yes", 1, None])
def test_an_adaptive_flag_that_is_not_a_boolean_is_refused_and_writes_nothing(
    moto_ddb, moto_tables, adaptive
):
    body = {"productId": "drop", "name": "Drop", "stock": 10, "adaptive": adaptive}
    status, _, refused = call("POST", "/products", "/products", body)
    assert status == 400 and refused["error"] == "VALIDATION_ERROR"
    assert scan_all(moto_ddb, moto_tables["products"]) == []
