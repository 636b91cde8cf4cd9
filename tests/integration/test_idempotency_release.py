"""Regression (found by the nemesis, seed 7): a keyed request answered 503 THROTTLED gives its key
back; when that release was throttled too, the client got a 500 INTERNAL instead of the 503."""

from __future__ import annotations

import pytest

from service.domain.products import Products
from service.handlers import products
from tests.helpers import Faults, invoke, purchase, stock_of
from turnstile_ddb import retry

pytestmark = pytest.mark.integration


def test_a_throttled_keyed_request_is_503_even_when_giving_its_key_back_is_throttled(
    wired, ddb, tables, dynamodb_local, unique
):
    # Given a product, and a database that throttles every purchase write and the next few
    # deletes (the key's release)
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    client = dynamodb_local.client(config=retry.client_config())
    faults = Faults(client)
    faults.throttle("TransactWriteItems", 1000)
    faults.throttle("UpdateItem", 1000)
    faults.throttle("DeleteItem", 3)
    wired(client)
    key = f"r-{unique}"
    # When a keyed purchase runs out of throttling retries
    status, _, body = invoke(products.handler, purchase(unique, {"quantity": 1}, key=key))
    # Then the client hears 503 THROTTLED (nothing applied), not a 500
    assert (status, body["error"]) == (503, "THROTTLED"), body
    assert faults.sent["DeleteItem"] >= 4  # the release was retried past the throttles
    assert stock_of(ddb, tables, unique) == (5, 1)
    # And the key was given back: a retry once the database recovers runs at once and buys
    wired(dynamodb_local.client(config=retry.client_config()))
    status, _, body = invoke(products.handler, purchase(unique, {"quantity": 1}, key=key))
    assert status == 201 and body["remainingStock"] == 4


def test_a_release_that_keeps_failing_is_left_to_lapse_and_still_answers_503(
    wired, ddb, tables, dynamodb_local, unique
):
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    client = dynamodb_local.client(config=retry.client_config())
    faults = Faults(client)
    for operation in ("TransactWriteItems", "UpdateItem", "DeleteItem"):
        faults.throttle(operation, 1000)
    wired(client)
    status, _, body = invoke(products.handler, purchase(unique, {"quantity": 1}, key=f"s-{unique}"))
    assert (status, body["error"]) == (503, "THROTTLED"), body
    assert stock_of(ddb, tables, unique) == (5, 1)
