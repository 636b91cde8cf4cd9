"""Every DynamoDB call asks for its consumed capacity, and the units and the call are counted, by
one adapter on the client (``turnstile_ddb.consumption``). botocore's Stubber stands in for
DynamoDB: it checks the parameters the client sent and answers what DynamoDB would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from turnstile_ddb import metrics, retry
from turnstile_ddb.consumption import PATTERN, count_consumption


@pytest.fixture
def client() -> Any:
    # Configured as turnstile's own clients are: botocore retries off (retrying is the library's
    # job). botocore's default would retry a call without an answer with backoff, for seconds.
    return boto3.session.Session().client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=retry.client_config(),
    )


@pytest.fixture
def counted() -> Iterator[dict[str, float]]:
    """What the adapter counted during the test, per metric name (live)."""
    figures: dict[str, float] = {}

    def sink(figure: metrics.Figure) -> None:
        if figure.pattern == PATTERN:
            figures[figure.name] = figures.get(figure.name, 0.0) + figure.value

    metrics.add_sink(sink)
    yield figures
    metrics.remove_sink(sink)


KEY = {"pk": {"S": "a"}}


def test_a_write_asks_for_its_capacity_and_its_units_are_counted(client, counted):
    # Given a counted client, and DynamoDB answering an update with its consumed capacity
    count_consumption(client)
    with Stubber(client) as stub:
        stub.add_response(
            "update_item",
            {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0}},
            {
                "TableName": "t",
                "Key": KEY,
                "UpdateExpression": "SET n = :n",
                "ExpressionAttributeValues": {":n": {"N": "1"}},
                "ReturnConsumedCapacity": "TOTAL",  # Then the client asked for it
            },
        )
        # When the update is sent
        client.update_item(
            TableName="t",
            Key=KEY,
            UpdateExpression="SET n = :n",
            ExpressionAttributeValues={":n": {"N": "1"}},
        )
    # Then the call and its write unit are counted, no read unit
    assert counted == {"DynamoDBCall": 1.0, "WriteUnits": 1.0}


def test_a_transaction_and_a_read_add_up_every_table_of_their_answers(client, counted):
    count_consumption(client)
    with Stubber(client) as stub:
        stub.add_response(
            "transact_write_items",
            {
                "ConsumedCapacity": [
                    {"TableName": "a", "CapacityUnits": 2.0, "WriteCapacityUnits": 2.0},
                    {"TableName": "b", "CapacityUnits": 2.0, "WriteCapacityUnits": 2.0},
                ]
            },
        )
        stub.add_response(
            "get_item",
            {"ConsumedCapacity": {"TableName": "a", "CapacityUnits": 0.5}},
            {"TableName": "a", "Key": KEY, "ReturnConsumedCapacity": "TOTAL"},
        )
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "a", "Item": KEY}},
                {"Put": {"TableName": "b", "Item": KEY}},
            ]
        )
        client.get_item(TableName="a", Key=KEY)
    assert counted == {"DynamoDBCall": 2.0, "WriteUnits": 4.0, "ReadUnits": 0.5}


def test_a_refused_call_is_counted_as_unreported_never_guessed(client, counted):
    count_consumption(client)
    with Stubber(client) as stub:
        stub.add_client_error("put_item", "ConditionalCheckFailedException")
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            client.put_item(TableName="t", Item=KEY, ConditionExpression="attribute_not_exists(pk)")
    assert counted == {"DynamoDBCall": 1.0, "UnitsUnreported": 1.0}


def test_registering_twice_counts_once_and_a_callers_own_choice_is_kept(client, counted):
    count_consumption(count_consumption(client))
    with Stubber(client) as stub:
        stub.add_response(
            "query",
            {"Items": [], "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}},
            {
                "TableName": "t",
                "KeyConditionExpression": "pk = :p",
                "ReturnConsumedCapacity": "INDEXES",
            },
        )
        client.query(
            TableName="t", KeyConditionExpression="pk = :p", ReturnConsumedCapacity="INDEXES"
        )
    assert counted == {"DynamoDBCall": 1.0, "ReadUnits": 0.5}


def test_an_uncounted_client_is_left_alone(client, counted):
    with Stubber(client) as stub:
        stub.add_response("get_item", {}, {"TableName": "a", "Key": KEY})
        client.get_item(TableName="a", Key=KEY)
    assert counted == {}


def test_the_services_client_counts_every_call_of_every_route(counted, monkeypatch):
    # Given the client the functions build for themselves (service.runtime)
    from service import runtime

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    client = runtime._build_dynamodb()
    with Stubber(client) as stub:
        stub.add_response(
            "delete_item",
            {"ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0}},
            {"TableName": "t", "Key": KEY, "ReturnConsumedCapacity": "TOTAL"},
        )
        # When it deletes an item
        client.delete_item(TableName="t", Key=KEY)
    # Then the call asked for its capacity, and both were counted
    assert counted == {"DynamoDBCall": 1.0, "WriteUnits": 1.0}


def test_a_call_without_an_answer_is_counted_with_no_units(client, counted):
    from botocore.exceptions import EndpointConnectionError

    def refuse(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="http://nowhere")

    count_consumption(client)
    client.meta.events.register_first("before-send.dynamodb", refuse)
    with pytest.raises(EndpointConnectionError):
        client.get_item(TableName="a", Key=KEY)
    assert counted["DynamoDBCall"] == 1.0 and "ReadUnits" not in counted
