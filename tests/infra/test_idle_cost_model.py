"""The idle-cost calculation (``infra.cost``) on small templates written for the test: what is
priced, by how much, and what is refused because it would cost money idle without a price."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from infra import cost


def function(memory: int | None, snapstart: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {"Runtime": "python3.12"}
    if memory is not None:
        properties["MemorySize"] = memory
    if snapstart:
        properties["SnapStart"] = {"ApplyOn": "PublishedVersions"}
    return {"Type": "AWS::Lambda::Function", "Properties": properties}


def version(of: str) -> dict[str, Any]:
    return {"Type": "AWS::Lambda::Version", "Properties": {"FunctionName": {"Ref": of}}}


def table(pitr: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {"BillingMode": "PAY_PER_REQUEST"}
    if pitr:
        properties["PointInTimeRecoverySpecification"] = {"PointInTimeRecoveryEnabled": True}
    return {"Type": "AWS::DynamoDB::Table", "Properties": properties}


ALARM = {
    "Type": "AWS::CloudWatch::Alarm",
    "Properties": {"MetricName": "Errors", "Namespace": "AWS/Lambda", "Period": 60},
}
RATIO_ALARM = {  # metric math over two metrics: two alarm metrics
    "Type": "AWS::CloudWatch::Alarm",
    "Properties": {
        "Metrics": [
            {"Id": "rate", "Expression": "100 * a / b"},
            {"Id": "a", "MetricStat": {"Period": 60}, "ReturnData": False},
            {"Id": "b", "MetricStat": {"Period": 60}, "ReturnData": False},
        ]
    },
}


def template(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": resources}


def test_snapstart_caches_each_published_version_by_memory_and_nothing_else_is_cached():
    # Given a 1 GB function with SnapStart and a published version, and one without SnapStart
    idle = cost.idle_cost(
        template(
            Fast=function(1024, snapstart=True),
            FastVersion=version("Fast"),
            Plain=function(512, snapstart=False),
            PlainVersion=version("Plain"),
        )
    )
    # Then only the SnapStart version is billed: 1 GB for a month of seconds
    (item,) = idle.items
    assert item.resource == "Fast"
    assert item.quantity == Decimal(1) * cost.SECONDS_PER_MONTH
    assert item.price is cost.PRICES["snapstart_cache"]
    assert idle.total == (cost.SECONDS_PER_MONTH * cost.PRICES["snapstart_cache"].usd)
    assert "Plain" in dict(idle.free)


def test_a_snapstart_function_without_a_version_has_no_snapshot_and_memory_defaults_to_128():
    idle = cost.idle_cost(template(Fn=function(None, snapstart=True)))
    assert idle.items == ()
    with_version = cost.idle_cost(template(Fn=function(None, snapstart=True), V=version("Fn")))
    assert with_version.items[0].quantity == Decimal(128) / 1024 * cost.SECONDS_PER_MONTH


def test_alarms_are_billed_per_alarm_metric_and_a_table_with_pitr_by_its_assumed_size():
    idle = cost.idle_cost(
        template(One=ALARM, Ratio=RATIO_ALARM, Kept=table(pitr=True), Bare=table(pitr=False)),
        table_gb=Decimal(2),
    )
    by = {(item.resource, item.price.key): item.quantity for item in idle.items}
    assert by[("One", "alarm_metric")] == 1
    assert by[("Ratio", "alarm_metric")] == 2
    assert by[("Kept", "pitr")] == 2
    assert ("Bare", "pitr") not in by
    assert by[("Kept", "table_storage")] == by[("Bare", "table_storage")] == 2
    expected = (
        3 * cost.PRICES["alarm_metric"].usd
        + 2 * cost.PRICES["pitr"].usd
        + 4 * cost.PRICES["table_storage"].usd
    )
    assert idle.total == expected


def test_the_free_tier_is_taken_off_per_price_never_below_zero():
    idle = cost.idle_cost(template(One=ALARM, Kept=table(pitr=True)), table_gb=Decimal(1))
    # 1 alarm metric (10 free) and 1 GB stored (25 free): only PITR is left
    assert idle.total_after_free_tier == cost.PRICES["pitr"].usd
    assert idle.total > idle.total_after_free_tier


@pytest.mark.parametrize(
    "resource",
    [
        {"Type": "AWS::EC2::NatGateway", "Properties": {}},
        {"Type": "AWS::DynamoDB::Table", "Properties": {"BillingMode": "PROVISIONED"}},
        {"Type": "AWS::ApiGateway::Stage", "Properties": {"CacheClusterEnabled": True}},
        {"Type": "AWS::CloudWatch::Alarm", "Properties": {"MetricName": "X", "Period": 10}},
    ],
)
def test_a_resource_that_costs_money_idle_without_a_price_here_is_refused(resource):
    # A new resource must get a price (or a reason it is free idle) before the page can be right
    with pytest.raises(cost.UnpricedResource, match="Thing"):
        cost.idle_cost(template(Thing=resource))


def test_every_price_says_where_it_was_read_and_when():
    for key, price in cost.PRICES.items():
        assert price.key == key
        assert price.source.startswith("https://"), key
        assert price.read_on == cost.READ_ON
        assert price.usd > 0
