"""The synthesized template: the inventory tables, the claimable index, the stream and its
consumer, with properties asserted rather than counted."""

from __future__ import annotations

import json
from typing import Any

from infra.tables import construct_id
from local import pump
from local import template as cfn
from service import catalog, config


def table(template: dict[str, Any], name: str) -> dict[str, Any]:
    (resource,) = [
        r
        for logical, r in cfn.resources(template, "AWS::DynamoDB::Table").items()
        if logical.startswith(f"Tables{construct_id(name)}")
    ]
    return resource


def test_inventory_table_streams_both_images_and_has_a_sparse_keys_only_index(template):
    properties = table(template, config.INVENTORY)["Properties"]
    assert {k["AttributeName"]: k["KeyType"] for k in properties["KeySchema"]} == {
        "sku": "HASH",
        "sk": "RANGE",
    }
    assert properties["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert properties["TimeToLiveSpecification"] == {
        "AttributeName": config.TTL_ATTRIBUTE,
        "Enabled": True,
    }
    (index,) = properties["GlobalSecondaryIndexes"]
    assert index["IndexName"] == config.INVENTORY_CLAIMABLE_INDEX
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert {k["AttributeName"]: k["KeyType"] for k in index["KeySchema"]} == {
        "pool": "HASH",
        "claimableAt": "RANGE",
    }
    types = {a["AttributeName"]: a["AttributeType"] for a in properties["AttributeDefinitions"]}
    assert types["claimableAt"] == "N" and types["pool"] == "S"


def test_summary_table_has_no_stream_so_the_consumer_never_reads_its_own_writes(template):
    properties = table(template, config.INVENTORY_SUMMARY)["Properties"]
    assert "StreamSpecification" not in properties
    assert properties["BillingMode"] == "PAY_PER_REQUEST"


def test_summary_consumer_mapping_reports_partial_failures_and_has_a_dead_letter_queue(template):
    (mapping,) = [
        m
        for m in cfn.resources(template, "AWS::Lambda::EventSourceMapping").values()
        if handler_of(template, m["Properties"]["FunctionName"])
        == "service.handlers.inventory_summary.handler"
    ]
    properties = mapping["Properties"]
    assert properties["EventSourceArn"]["Fn::GetAtt"][0].startswith("TablesInventoryTable")
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties["BisectBatchOnFunctionError"] is True
    assert properties["MaximumRetryAttempts"] == config.STREAM_RETRY_ATTEMPTS
    assert properties["ParallelizationFactor"] == 1
    assert "OnFailure" in properties["DestinationConfig"]
    assert properties["StartingPosition"] == "TRIM_HORIZON"


def test_functions_get_exactly_the_inventory_tables_they_use(template):
    by_handler = {
        f["Properties"]["Handler"]: f["Properties"]["Environment"]["Variables"]
        for f in cfn.resources(template, "AWS::Lambda::Function").values()
    }
    api = by_handler["service.handlers.inventory.handler"]
    consumer = by_handler["service.handlers.inventory_summary.handler"]
    assert {k for k in api if k.endswith("_TABLE")} == {
        "INVENTORY_TABLE",
        "INVENTORY_SUMMARY_TABLE",
    }
    assert {k for k in consumer if k.endswith("_TABLE")} == {"INVENTORY_SUMMARY_TABLE"}


def test_every_inventory_route_is_an_api_method(template):
    methods = {
        (m["Properties"]["HttpMethod"], m["Properties"].get("OperationName"))
        for m in cfn.resources(template, "AWS::ApiGateway::Method").values()
    }
    assert {
        ("POST", "create_inventory"),
        ("GET", "get_inventory"),
        ("GET", "count_inventory"),
        ("POST", "reserve"),
        ("POST", "confirm_reservation"),
        ("DELETE", "release_reservation"),
    } <= methods


def test_creation_worker_is_a_filtered_stream_consumer_one_chunk_per_invocation(template):
    (mapping,) = [
        m
        for m in cfn.resources(template, "AWS::Lambda::EventSourceMapping").values()
        if handler_of(template, m["Properties"]["FunctionName"])
        == "service.handlers.inventory_creator.handler"
    ]
    properties = mapping["Properties"]
    assert properties["EventSourceArn"]["Fn::GetAtt"][0].startswith("TablesInventoryTable")
    assert properties["BatchSize"] == 1
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert properties["ParallelizationFactor"] == 1
    assert "OnFailure" in properties["DestinationConfig"]
    (only,) = properties["FilterCriteria"]["Filters"]
    assert json.loads(only["Pattern"]) == {
        "dynamodb": {"Keys": {"sk": {"S": ["sku"]}}, "NewImage": {"status": {"S": ["CREATING"]}}}
    }
    worker = cfn.invoked_function(template, mapping["Properties"]["FunctionName"])[1]["Properties"]
    assert worker["Timeout"] == 120
    assert {k for k in worker["Environment"]["Variables"] if k.endswith("_TABLE")} == {
        "INVENTORY_TABLE",
        "INVENTORY_SUMMARY_TABLE",
    }


def test_the_local_pump_tells_the_creation_worker_its_deployed_timeout(template):
    # The worker chains steps while its remaining time covers another: locally as on AWS, that
    # time counts down from the function's Timeout
    names = {logical: logical for logical in cfn.resources(template, "AWS::DynamoDB::Table")}
    (creator,) = [
        spec
        for spec in pump.mapping_specs(template, names)
        if spec.handler == "service.handlers.inventory_creator.handler"
    ]
    assert creator.timeout_seconds == catalog.spec("inventorycreator").timeout_seconds == 120


def handler_of(template: dict[str, Any], function_name: Any) -> str:
    """The handler of the function a mapping's ``FunctionName`` invokes (through its alias)."""
    return str(cfn.invoked_function(template, function_name)[1]["Properties"]["Handler"])
