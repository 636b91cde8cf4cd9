"""Tracing, the dashboard and the alarms in the synthesized template, property by property."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra import monitoring
from local import template as cfn
from service import catalog, observability


def alarm(template: dict[str, Any], name: str, scope: str = "Monitoring") -> dict[str, Any]:
    found = [
        resource["Properties"]
        for logical, resource in cfn.resources(template, "AWS::CloudWatch::Alarm").items()
        if logical.startswith(f"{scope}{name}")
    ]
    assert len(found) == 1, f"expected one alarm {scope}{name}*, found {len(found)}"
    return found[0]


def assert_window(properties: dict[str, Any]) -> None:
    assert properties["ComparisonOperator"] == "GreaterThanThreshold"
    assert properties["EvaluationPeriods"] == monitoring.EVALUATION_PERIODS
    assert properties["DatapointsToAlarm"] == monitoring.DATAPOINTS_TO_ALARM
    assert properties["TreatMissingData"] == "notBreaching"


def stats(properties: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The MetricStat queries of a metric-math alarm, by id."""
    return {
        query["Id"]: query["MetricStat"] for query in properties["Metrics"] if "MetricStat" in query
    }


def test_every_function_is_traced_and_named_for_powertools(template):
    functions = cfn.resources(template, "AWS::Lambda::Function")
    specs = catalog.API_FUNCTIONS + catalog.STREAM_CONSUMERS
    assert len(functions) == len(specs)
    names = set()
    for resource in functions.values():
        properties = resource["Properties"]
        assert properties["TracingConfig"] == {"Mode": "Active"}
        environment = properties["Environment"]["Variables"]
        assert environment["POWERTOOLS_METRICS_NAMESPACE"] == "turnstile"
        names.add(environment["POWERTOOLS_SERVICE_NAME"])
    assert names == {f"turnstile-{spec.name}" for spec in specs}


def test_traced_functions_may_write_traces(template):
    policies = cfn.resources(template, "AWS::IAM::Policy").values()
    actions = {
        action
        for policy in policies
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in (
            statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        )
    }
    assert {"xray:PutTraceSegments", "xray:PutTelemetryRecords"} <= actions


def test_server_error_rate_alarm(template):
    properties = alarm(template, "ApiServerErrors")
    assert_window(properties)
    assert properties["Namespace"] == "AWS/ApiGateway"
    assert properties["MetricName"] == "5XXError"
    assert properties["Statistic"] == "Average"  # a share of requests, not a count
    assert properties["Threshold"] == 0.01
    assert properties["Dimensions"] == [{"Name": "ApiName", "Value": "turnstile"}]


def test_throttle_alarm_reads_the_throttles_summed_over_every_pattern(template):
    properties = alarm(template, "DynamoDbThrottles")
    assert_window(properties)
    assert properties["Threshold"] == monitoring.THROTTLES_PER_MINUTE
    assert properties["Namespace"] == "turnstile"
    assert properties["MetricName"] == "Throttle"
    assert properties["Statistic"] == "Sum"
    assert properties["Dimensions"] == [{"Name": "pattern", "Value": "all"}]


def test_conflict_rate_alarm_is_conflict_answers_over_requests(template):
    properties = alarm(template, "ConflictRate")
    assert_window(properties)
    assert properties["Threshold"] == monitoring.CONFLICT_RATE_PERCENT
    queries = stats(properties)
    conflicts = queries["conflicts"]["Metric"]
    assert conflicts["Namespace"] == "turnstile"
    assert conflicts["MetricName"] == "ConflictAnswer"
    assert conflicts["Dimensions"] == [{"Name": "pattern", "Value": "api"}]
    requests = queries["requests"]["Metric"]
    assert (requests["Namespace"], requests["MetricName"]) == ("AWS/ApiGateway", "Count")
    expression = next(q["Expression"] for q in properties["Metrics"] if "Expression" in q)
    assert "100 * FILL(conflicts, 0) / requests" in expression


@pytest.mark.parametrize("consumer", [spec.name for spec in catalog.STREAM_CONSUMERS])
def test_iterator_age_alarm_per_stream_consumer(template, consumer):
    # The consumer's own alarm (turnstile_ddb.cdk.OrderedStreamConsumer), with this stack's
    # threshold
    properties = alarm(template, f"{consumer.capitalize()}IteratorAgeAlarm", scope="Consumers")
    assert_window(properties)
    assert (properties["Namespace"], properties["MetricName"]) == ("AWS/Lambda", "IteratorAge")
    assert properties["Statistic"] == "Maximum"
    assert properties["Threshold"] == monitoring.ITERATOR_AGE_MS
    # measured on the alias the stream's mapping invokes
    dimensions = {d["Name"]: d["Value"] for d in properties["Dimensions"]}
    assert set(dimensions) == {"FunctionName", "Resource"}
    function = dimensions["FunctionName"]["Ref"]
    handler = template["Resources"][function]["Properties"]["Handler"]
    spec = next(s for s in catalog.STREAM_CONSUMERS if s.name == consumer)
    assert handler == spec.handler


def test_pending_request_age_alarm(template):
    properties = alarm(template, "PendingRequestAge")
    assert_window(properties)
    assert properties["Namespace"] == "turnstile"
    assert properties["MetricName"] == "PendingAge"
    assert properties["Dimensions"] == [{"Name": "pattern", "Value": "decider"}]
    assert properties["Statistic"] == "Maximum"
    assert properties["Unit"] == "Milliseconds"
    assert properties["Threshold"] == 5 * 60_000


@pytest.mark.parametrize("consumer", [spec.name for spec in catalog.STREAM_CONSUMERS])
def test_dead_letter_depth_alarm_per_consumer_is_on_the_dashboard(template, consumer):
    (dlq_alarm,) = [
        logical
        for logical in cfn.resources(template, "AWS::CloudWatch::Alarm")
        if logical.startswith(f"Consumers{consumer.capitalize()}DeadLettersAlarm")
    ]
    body = dashboard_body(template)
    assert {"Fn::GetAtt": [dlq_alarm, "Arn"]} in body


def dashboard_body(template: dict[str, Any]) -> list[Any]:
    dashboards = list(cfn.resources(template, "AWS::CloudWatch::Dashboard").values())
    assert len(dashboards) == 1
    body = dashboards[0]["Properties"]["DashboardBody"]
    return body["Fn::Join"][1] if isinstance(body, dict) else [body]


def test_dashboard_shows_every_alarm_and_every_catalogued_metric(template):
    parts = dashboard_body(template)
    text = "".join(part if isinstance(part, str) else json.dumps(part) for part in parts)
    for logical in cfn.resources(template, "AWS::CloudWatch::Alarm"):
        assert logical in text, f"alarm {logical} is not on the dashboard"
    for pattern, names in observability.catalog().items():
        for name in names:
            assert f'"turnstile","{name}","pattern","{pattern}"' in text, (pattern, name)
