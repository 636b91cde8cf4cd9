"""The capacity model's buckets and sizing, on a fake clock (exact, no network, no timing)."""

from __future__ import annotations

from typing import Any

import pytest

from local.capacity_model import Bucket, CapacityModel, item_size, scale_from_env

TABLE = "products"
SCHEMA: dict[str, Any] = {"KeySchema": [{"AttributeName": "productId", "KeyType": "HASH"}]}
INDEXED: dict[str, Any] = {
    "KeySchema": [
        {"AttributeName": "eventId", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    "GlobalSecondaryIndexes": [
        {"IndexName": "byUser", "KeySchema": [{"AttributeName": "userId", "KeyType": "HASH"}]}
    ],
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def model(scale: float = 0.05, burst: float = 1.0) -> tuple[CapacityModel, FakeClock]:
    clock = FakeClock()
    schemas = {TABLE: SCHEMA, "events": INDEXED}
    return CapacityModel(
        scale, burst_seconds=burst, clock=clock, describe=schemas.__getitem__
    ), clock


def update(key: str) -> dict:
    return {
        "TableName": TABLE,
        "Key": {"productId": {"S": key}},
        "UpdateExpression": "SET stock = stock - :q",
        "ExpressionAttributeValues": {":q": {"N": "1"}},
    }


def test_a_hot_key_is_admitted_at_the_scaled_rate_within_ten_percent() -> None:
    # Given 50 WCU/s per key (scale 0.05) and one second of burst
    capacity, clock = model(0.05)
    offered_per_second, seconds = 150, 20  # 3x what one key takes
    admitted = throttled = 0
    # When one key is offered 3x its rate for 20 seconds
    for _ in range(offered_per_second * seconds):
        clock.now += 1 / offered_per_second
        if all(capacity.admit(capacity.charges("UpdateItem", update("hot")))):
            admitted += 1
        else:
            throttled += 1
    # Then, after the burst, it is admitted at 50/s (within 10 %) and the rest is throttled
    rate = (admitted - capacity.wcu * capacity.burst_seconds) / seconds
    assert abs(rate - 50) <= 5, rate
    assert throttled == offered_per_second * seconds - admitted
    assert capacity.stats.throttled == throttled


def test_a_cold_key_beside_a_hot_one_is_never_throttled() -> None:
    capacity, clock = model(0.05)
    cold_refused = 0
    for step in range(3000):
        clock.now += 1 / 150
        capacity.admit(capacity.charges("UpdateItem", update("hot")))
        if step % 5 == 0:  # 30/s on another key, under its 50/s
            cold_refused += not all(capacity.admit(capacity.charges("UpdateItem", update("cold"))))
    assert cold_refused == 0
    assert capacity.stats.throttled > 0


def test_a_refused_request_takes_no_tokens() -> None:
    capacity, _ = model(0.01, burst=1.0)  # 10 WCU/s, bucket of 10
    big = {"TableName": TABLE, "Item": {"productId": {"S": "k"}, "blob": {"S": "x" * 6000}}}
    for _ in range(4):  # 6 KB: 6 WCU each; the first fits, the next do not
        capacity.admit(capacity.charges("PutItem", big))
    # 4 tokens are left: four 1-WCU writes fit, the fifth does not
    small = [all(capacity.admit(capacity.charges("UpdateItem", update("k")))) for _ in range(5)]
    assert small == [True, True, True, True, False]


def test_units_are_sized_as_aws_sizes_them() -> None:
    capacity, _ = model(1.0)
    kb = {"TableName": TABLE, "Item": {"productId": {"S": "k"}, "b": {"S": "x" * 1500}}}
    assert [u for _, u in capacity.charges("PutItem", kb)] == [2.0]  # 1 KB per write unit
    get = {"TableName": TABLE, "Key": {"productId": {"S": "k"}}}
    assert [u for _, u in capacity.charges("GetItem", get)] == [0.5]  # eventual: half
    assert [u for _, u in capacity.charges("GetItem", {**get, "ConsistentRead": True})] == [1.0]
    transaction = {"TransactItems": [{"Update": update("a")}, {"Put": kb}]}
    assert [u for _, u in capacity.charges("TransactWriteItems", transaction)] == [2.0, 4.0]
    batch = {"RequestItems": {TABLE: {"Keys": [get["Key"]] * 3, "ConsistentRead": True}}}
    assert [u for _, u in capacity.charges("BatchGetItem", batch)] == [1.0, 1.0, 1.0]


def test_a_put_charges_the_index_key_it_carries_and_a_query_its_index_key() -> None:
    capacity, _ = model(1.0)
    put = {
        "TableName": "events",
        "Item": {"eventId": {"S": "e"}, "sk": {"S": "REG#u"}, "userId": {"S": "u"}},
    }
    keys = [key for key, _ in capacity.charges("PutItem", put)]
    assert keys == [("events", "", '{"S": "e"}', "W"), ("events", "byUser", '{"S": "u"}', "W")]
    query = {
        "TableName": "events",
        "IndexName": "byUser",
        "KeyConditionExpression": "userId = :user",
        "ExpressionAttributeValues": {":user": {"S": "u"}},
    }
    assert [key for key, _ in capacity.charges("Query", query)] == [
        ("events", "byUser", '{"S": "u"}', "R")
    ]


def test_bucket_refills_up_to_its_capacity_only() -> None:
    clock = FakeClock()
    bucket = Bucket(10.0, 10.0, clock)
    bucket.tokens = 0
    clock.now += 100
    bucket.refill()
    assert bucket.tokens == 10


def test_item_size_counts_names_and_values() -> None:
    assert item_size({"ab": {"S": "xyz"}}) == 5
    assert item_size({"n": {"N": "12345"}}) == 1 + 4


@pytest.mark.parametrize("raw,expected", [("", None), ("0.05", 0.05)])
def test_scale_is_off_unless_the_variable_is_set(raw: str, expected: float | None) -> None:
    assert scale_from_env({"TURNSTILE_CAPACITY_SCALE": raw}) == expected


def test_a_non_positive_scale_is_refused() -> None:
    with pytest.raises(ValueError):
        scale_from_env({"TURNSTILE_CAPACITY_SCALE": "0"})


def test_a_request_larger_than_the_bucket_goes_through_a_full_bucket_into_debt() -> None:
    capacity, clock = model(0.001, burst=1.0)  # 1 WCU/s, a bucket of 1
    transaction = {"TransactItems": [{"Update": update("k")}]}  # 2 WCU
    assert all(capacity.admit(capacity.charges("TransactWriteItems", transaction)))
    clock.now += 1.5  # debt of 1 repaid, half a token back: not full
    assert not all(capacity.admit(capacity.charges("UpdateItem", update("k"))))
    clock.now += 0.5
    assert all(capacity.admit(capacity.charges("UpdateItem", update("k"))))


def test_a_query_naming_its_key_through_attribute_names_charges_that_key() -> None:
    # Given two queries of the same index, each naming its partition key as "#user"
    capacity, _ = model(1.0)

    def query(user: str) -> dict:
        return {
            "TableName": "events",
            "IndexName": "byUser",
            "KeyConditionExpression": "#user = :user AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#user": "userId", "#sk": "sk"},
            "ExpressionAttributeValues": {
                ":user": {"S": user},
                ":low": {"N": "0"},
                ":high": {"N": "9"},
            },
        }

    # Then each is charged to its own key (not to one shared unknown key)
    assert [key for key, _ in capacity.charges("Query", query("a"))] == [
        ("events", "byUser", '{"S": "a"}', "R")
    ]
    assert [key for key, _ in capacity.charges("Query", query("b"))] == [
        ("events", "byUser", '{"S": "b"}', "R")
    ]
