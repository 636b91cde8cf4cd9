"""Throttling and lost replies, injected (DynamoDB Local never throttles and never loses a reply).

What a client sees: throttling is retried inside the request and is invisible unless it lasts,
then 503 THROTTLED with Retry-After; a write whose reply was lost is never sent again blindly:
without an Idempotency-Key the answer is 503 OUTCOME_UNKNOWN, with one the transaction is resent
under the same ClientRequestToken and the purchase completes exactly once."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.config import Config

from local.dynamodb_local import DynamoDBLocal
from service.domain.products import Products
from service.handlers import products
from tests.helpers import Faults, invoke, purchase, stock_of
from turnstile_ddb import retry


def new_client(db: DynamoDBLocal, config: Config | None = None) -> Any:
    return db.client(config=config or retry.client_config())


def test_brief_throttling_is_retried_and_the_purchase_applies_once(
    wired, ddb, tables, dynamodb_local, unique
):
    # Given a product, and DynamoDB throttling the next two updates
    Products(client=ddb, table=tables["products"]).create(unique, "P", 10)
    client = new_client(dynamodb_local)
    faults = Faults(client)
    faults.throttle("UpdateItem", 2)
    wired(client)
    # When a purchase arrives
    status, _, body = invoke(products.handler, purchase(unique, {"quantity": 1}))
    # Then it succeeds after the retries, and the stock went down by exactly one
    assert status == 201 and body["remainingStock"] == 9
    assert faults.sent["UpdateItem"] == 3
    assert stock_of(ddb, tables, unique) == (9, 2)


def test_lasting_throttling_is_a_503_with_retry_after_and_writes_nothing(
    wired, ddb, tables, dynamodb_local, unique
):
    Products(client=ddb, table=tables["products"]).create(unique, "P", 10)
    client = new_client(dynamodb_local)
    Faults(client).throttle("UpdateItem", 100)
    wired(client)
    status, headers, body = invoke(products.handler, purchase(unique, {"quantity": 1}))
    assert (status, body["error"]) == (503, "THROTTLED")
    assert headers["Retry-After"] == "1"
    assert stock_of(ddb, tables, unique) == (10, 1)


def test_botocore_default_retries_would_double_decrement_after_a_lost_reply(
    ddb, tables, dynamodb_local, unique
):
    """Why turnstile turns botocore retries off: this is the bug it avoids."""
    # Given a client with botocore's usual retry settings
    Products(client=ddb, table=tables["products"]).create(unique, "P", 10)
    client = new_client(dynamodb_local, Config(retries={"mode": "standard", "max_attempts": 3}))
    Faults(client).lose_reply("UpdateItem")
    # When the reply to a plain decrement is lost, botocore resends it by itself
    client.update_item(
        TableName=tables["products"],
        Key={"productId": {"S": unique}},
        UpdateExpression="SET stock = stock - :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    # Then the unit was taken twice
    assert stock_of(ddb, tables, unique)[0] == 8


@pytest.mark.parametrize("strategy", ["atomic", "versioned"])
def test_a_lost_reply_without_idempotency_key_is_503_outcome_unknown_and_applied_once(
    wired, ddb, tables, dynamodb_local, unique, strategy
):
    # Given the reply to the purchase's update will be lost
    Products(client=ddb, table=tables["products"]).create(unique, "P", 10)
    client = new_client(dynamodb_local)
    faults = Faults(client)
    faults.lose_reply("UpdateItem")
    wired(client)
    # When a purchase arrives (a single decrement, or a read and a version-checked write)
    status, _, body = invoke(
        products.handler, purchase(unique, {"quantity": 1, "strategy": strategy})
    )
    # Then the client is told the truth (maybe applied), not a 500; the write was not resent
    # blindly, and it was applied once
    assert (status, body["error"]) == (503, "OUTCOME_UNKNOWN")
    assert faults.sent["UpdateItem"] == 1
    assert stock_of(ddb, tables, unique) == (9, 2)


def test_a_lost_reply_with_idempotency_key_completes_exactly_once(
    wired, ddb, tables, dynamodb_local, unique
):
    # Given the reply to the keyed purchase's transaction will be lost once
    Products(client=ddb, table=tables["products"]).create(unique, "P", 10)
    client = new_client(dynamodb_local)
    faults = Faults(client)
    faults.lose_reply("TransactWriteItems")
    wired(client)
    # When the purchase arrives, and the client later retries with the same key
    first = invoke(products.handler, purchase(unique, {"quantity": 2}, key=f"k-{unique}"))
    again = invoke(products.handler, purchase(unique, {"quantity": 2}, key=f"k-{unique}"))
    # Then the transaction was resent under its token and applied once; the retry replays it
    assert first[0] == 201 and first[2]["remainingStock"] == 8
    assert faults.sent["TransactWriteItems"] == 2
    assert again[0] == 201 and again[2] == first[2]
    assert again[1]["Idempotent-Replayed"] == "true"
    assert stock_of(ddb, tables, unique) == (8, 2)
