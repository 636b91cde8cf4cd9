"""The synthesized template: tables, index, stream and the decider's event source mapping."""

from __future__ import annotations

from typing import Any

import pytest

from local import template as cfn
from service import config
from tests.helpers import api_methods


def one(template: dict[str, Any], kind: str, contains: str) -> tuple[str, dict[str, Any]]:
    found = [
        (logical, resource)
        for logical, resource in cfn.resources(template, kind).items()
        if contains in logical
    ]
    assert len(found) == 1, f"expected one {kind} named like {contains}: {found}"
    return found[0]


@pytest.fixture(scope="module")
def mapping(template: dict[str, Any]) -> dict[str, Any]:
    mappings = cfn.resources(template, "AWS::Lambda::EventSourceMapping")
    requests_table, _ = one(template, "AWS::DynamoDB::Table", "RegistrationRequests")
    ours = [
        resource["Properties"]
        for resource in mappings.values()
        if resource["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [requests_table, "StreamArn"]}
    ]
    assert len(ours) == 1
    return ours[0]


def test_the_decider_mapping_cannot_block_the_shard(template, mapping):
    # The mapping bounds every way a bad record could hold up the records behind it
    assert mapping["BatchSize"] == config.STREAM_BATCH_SIZE
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["MaximumRetryAttempts"] == config.STREAM_RETRY_ATTEMPTS
    assert mapping["MaximumRecordAgeInSeconds"] == config.STREAM_MAX_RECORD_AGE_SECONDS
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    # One batch per shard at a time: decisions keep stream order
    assert mapping["ParallelizationFactor"] == 1
    # What it gives up on goes to its own dead-letter queue (watched by an alarm); one queue per
    # consumer since the stack is built on turnstile_ddb.cdk.OrderedStreamConsumer
    queue, _ = one(template, "AWS::SQS::Queue", "DeciderDeadLetters")
    destination = mapping["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": [queue, "Arn"]}
    alarms = cfn.resources(template, "AWS::CloudWatch::Alarm").values()
    assert any(
        dimension["Value"] == {"Fn::GetAtt": [queue, "QueueName"]}
        for alarm in alarms
        for dimension in alarm["Properties"].get("Dimensions", [])
    )


def test_the_mapping_invokes_the_decider_handler(template, mapping):
    function = cfn.invoked_function(template, mapping["FunctionName"])[1]["Properties"]
    assert function["Handler"] == "service.handlers.registration_consumer.handler"
    variables = function["Environment"]["Variables"]
    assert set(variables) >= {
        config.table_env(config.EVENTS),
        config.table_env(config.REGISTRATION_REQUESTS),
    }


def test_requests_table_streams_both_images_and_expires_items(template):
    _, table = one(template, "AWS::DynamoDB::Table", "RegistrationRequests")
    properties = table["Properties"]
    assert properties["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert properties["TimeToLiveSpecification"] == {
        "AttributeName": config.TTL_ATTRIBUTE,
        "Enabled": True,
    }
    assert {key["AttributeName"]: key["KeyType"] for key in properties["KeySchema"]} == {
        "eventId": "HASH",
        "requestId": "RANGE",
    }


def test_events_table_has_the_by_user_index(template):
    _, table = one(template, "AWS::DynamoDB::Table", "TablesEventsTable")
    properties = table["Properties"]
    assert {key["AttributeName"]: key["KeyType"] for key in properties["KeySchema"]} == {
        "eventId": "HASH",
        "sk": "RANGE",
    }
    (index,) = properties["GlobalSecondaryIndexes"]
    assert index["IndexName"] == config.EVENTS_BY_USER_INDEX
    assert {key["AttributeName"]: key["KeyType"] for key in index["KeySchema"]} == {
        "userId": "HASH",
        "eventId": "RANGE",
    }
    assert index["Projection"] == {"ProjectionType": "ALL"}


def test_events_api_routes_exist_with_their_methods(template):
    resources = cfn.resources(template, "AWS::ApiGateway::Resource")
    parts = {resource["Properties"]["PathPart"] for resource in resources.values()}
    assert {"events", "{eventId}", "registrations", "registration-requests", "{requestId}"} <= parts
    assert {"users", "{userId}"} <= parts
    methods = api_methods(template)
    assert ("DELETE", "/events/{eventId}/registrations/{userId}") in methods
    assert ("POST", "/events/{eventId}/registration-requests") in methods
