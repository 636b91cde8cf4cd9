"""The capacity model in front of DynamoDB Local: refusals are AWS's answers and apply nothing."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from local.capacity_model import CapacityModel
from local.dynamodb_local import DynamoDBLocal
from turnstile_ddb import codec, retry


class FrozenClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def throttled(dynamodb_local: DynamoDBLocal, tables: Any) -> tuple[Any, CapacityModel, FrozenClock]:
    clock = FrozenClock()
    # 2 WCU/s and 6 RCU/s per key, one second of burst, and time stands still: exact.
    model = CapacityModel(0.002, clock=clock)
    client = model.attach(dynamodb_local.client(config=retry.client_config()))
    return client, model, clock


def stock_of(ddb: Any, table: str, product_id: str) -> int:
    item = ddb.get_item(TableName=table, Key=codec.encode_item({"productId": product_id}))
    return int(item["Item"]["stock"]["N"])


def decrement(client: Any, table: str, product_id: str) -> Any:
    return client.update_item(
        TableName=table,
        Key=codec.encode_item({"productId": product_id}),
        UpdateExpression="SET stock = stock - :one",
        ExpressionAttributeValues=codec.values(one=1),
    )


def test_a_throttled_write_is_refused_as_aws_refuses_it_and_applies_nothing(
    throttled: tuple[Any, CapacityModel, FrozenClock], ddb: Any, tables: Any, unique: str
) -> None:
    client, model, _ = throttled
    table = tables["products"]
    ddb.put_item(TableName=table, Item=codec.encode_item({"productId": unique, "stock": 10}))
    decrement(client, table, unique)
    decrement(client, table, unique)  # the bucket held 2 WCU
    with pytest.raises(ClientError) as caught:
        decrement(client, table, unique)
    error: dict[str, Any] = dict(caught.value.response)  # ThrottlingReasons: newer than the stubs
    assert error["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert error["ThrottlingReasons"][0]["reason"] == "TableWriteKeyRangeThroughputExceeded"
    assert retry.is_throttle(caught.value)
    assert stock_of(ddb, table, unique) == 8
    assert model.stats.throttled == 1


def test_a_throttled_transaction_is_cancelled_with_throttling_error_and_applies_nothing(
    throttled: tuple[Any, CapacityModel, FrozenClock], ddb: Any, tables: Any, unique: str
) -> None:
    client, _, _ = throttled
    table = tables["products"]
    hot, cold = f"{unique}-hot", f"{unique}-cold"
    for key in (hot, cold):
        ddb.put_item(TableName=table, Item=codec.encode_item({"productId": key, "stock": 10}))
    decrement(client, table, hot)  # 1 WCU left on the hot key; a transaction needs 2

    def element(key: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": table,
                "Key": codec.encode_item({"productId": key}),
                "UpdateExpression": "SET stock = stock - :one",
                "ExpressionAttributeValues": codec.values(one=1),
            }
        }

    with pytest.raises(ClientError) as caught:
        client.transact_write_items(TransactItems=[element(cold), element(hot)])
    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    codes = [r["Code"] for r in caught.value.response["CancellationReasons"]]
    assert codes == ["None", "ThrottlingError"]
    assert (stock_of(ddb, table, hot), stock_of(ddb, table, cold)) == (9, 10)
    # the cold key's tokens were not taken: it still takes a full transaction
    client.transact_write_items(TransactItems=[element(cold)])
    assert stock_of(ddb, table, cold) == 9


def test_time_refills_the_bucket(
    throttled: tuple[Any, CapacityModel, FrozenClock], ddb: Any, tables: Any, unique: str
) -> None:
    client, _, clock = throttled
    table = tables["products"]
    ddb.put_item(TableName=table, Item=codec.encode_item({"productId": unique, "stock": 10}))
    for _ in range(2):
        decrement(client, table, unique)
    with pytest.raises(ClientError):
        decrement(client, table, unique)
    clock.now += 0.5  # 2 WCU/s: one more unit
    decrement(client, table, unique)
    assert stock_of(ddb, table, unique) == 7
