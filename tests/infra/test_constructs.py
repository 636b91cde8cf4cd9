"""turnstile_ddb.cdk: each construct's table, its grant (exactly the primitive's actions), the
stream
consumer's wiring, cdk-nag, and the refusal of replications under which a primitive is unsafe."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from local import template as cfn
from turnstile_ddb import cdk as tcdk

GRANTS = {
    "Versioned": (tcdk.VersionedTable, "grant_versioned", {"GetItem", "UpdateItem"}),
    "Leases": (tcdk.LeaseTable, "grant_lease", {"UpdateItem", "ConditionCheckItem"}),
    "Queue": (
        tcdk.LeaseTable,
        "grant_lease_queue",
        {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"},
    ),
    "Idempotency": (
        tcdk.IdempotencyTable,
        "grant_idempotency",
        {"PutItem", "UpdateItem", "DeleteItem"},
    ),
    "Capacity": (tcdk.CapacityTable, "grant_capacity", {"UpdateItem", "PutItem", "DeleteItem"}),
    "Units": (tcdk.ClaimPoolTable, "grant_claims", {"GetItem", "Query", "UpdateItem"}),
    "Shards": (tcdk.ShardedCounterTable, "grant_sharded", {"BatchGetItem", "UpdateItem"}),
}


def _function(stack: cdk.Stack, name: str) -> lambda_.Function:
    fn = lambda_.Function(
        stack,
        name,
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return {}\n"),
    )
    for rule, reason in (
        ("L1", "A test double; the runtime is the app's, checked in the app's stack."),
        (
            "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "A test double's logging role; the app's functions are checked in the app's stack.",
        ),
    ):
        cdk.Validations.of(fn).acknowledge(
            cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{rule}", reason=reason)
        )
    return fn


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # Given every construct, each granted to its own function, with the AwsSolutions checks live
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("constructs")))
    stack = cdk.Stack(app, "Constructs")
    for name, (construct, grant, _) in GRANTS.items():
        table = construct(stack, name, removal_policy=cdk.RemovalPolicy.DESTROY)
        getattr(table, grant)(_function(stack, f"{name}Fn"))
    stream = tcdk.IdempotencyTable(
        stack, "Streamed", stream=tcdk.dynamodb.StreamViewType.NEW_AND_OLD_IMAGES
    )
    tcdk.OrderedStreamConsumer(
        stack, "Consumer", table=stream.table, function=_function(stack, "ConsumerFn")
    )
    # and the grants beyond a primitive's: an app table's actions, an index's Query, own records
    app_table = tcdk.AppTable(stack, "Own", removal_policy=cdk.RemovalPolicy.DESTROY)
    extra = _function(stack, "OwnFn")
    app_table.grant_actions(extra, "dynamodb:GetItem", "dynamodb:PutItem")
    app_table.grant_actions(extra, "dynamodb:Query", index="byOwner")
    stream.grant_idempotency(_function(stack, "KeyedFn"), leading_keys=["orders#*"])
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    # When it synthesizes (an unacknowledged cdk-nag finding would raise ValidationFailed here)
    return dict(app.synth().get_stack_by_name("Constructs").template)


def _logical(template: dict[str, Any], prefix: str, kind: str) -> str:
    (found,) = [
        k for k, v in template["Resources"].items() if v["Type"] == kind and k.startswith(prefix)
    ]
    return found


def _actions_on(template: dict[str, Any], function_prefix: str, table_id: str) -> set[str]:
    role = _logical(template, f"{function_prefix}ServiceRole", "AWS::IAM::Role")
    actions: set[str] = set()
    for policy in cfn.resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources = (
                statement["Resource"]
                if isinstance(statement["Resource"], list)
                else [statement["Resource"]]
            )
            if any(table_id in str(r) for r in resources):
                listed = (
                    statement["Action"]
                    if isinstance(statement["Action"], list)
                    else [statement["Action"]]
                )
                actions |= {a.removeprefix("dynamodb:") for a in listed}
    return actions


@pytest.mark.parametrize("name", sorted(GRANTS))
def test_each_grant_gives_exactly_the_actions_its_primitive_issues(synthesized, name):
    _, _, expected = GRANTS[name]
    table_id = _logical(synthesized, name, "AWS::DynamoDB::Table")
    # Then the function's role may do exactly those actions on that table, nothing more
    assert _actions_on(synthesized, f"{name}Fn", table_id) == expected


def test_tables_are_on_demand_with_recovery_and_the_primitives_keys(synthesized):
    tables = {
        k: v["Properties"] for k, v in cfn.resources(synthesized, "AWS::DynamoDB::Table").items()
    }
    for props in tables.values():
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    keys = {k[:5]: [e["AttributeName"] for e in p["KeySchema"]] for k, p in tables.items()}
    assert keys["Lease"] == ["resource"] and keys["Units"] == ["sku", "sk"]
    assert keys["Capac"] == ["id", "sk"] and keys["Shard"] == ["id"]
    # Idempotency records expire by TTL; lease items never do: the lease table's TTL attribute is
    # reapAt, never written on a lease item and removed by every acquisition
    # (tests/integration/test_lease_table_ttl.py): only the queue's tombstones carry it
    idem = tables[_logical(synthesized, "Idempotency", "AWS::DynamoDB::Table")]
    assert idem["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    leases = tables[_logical(synthesized, "Leases", "AWS::DynamoDB::Table")]
    assert leases["TimeToLiveSpecification"] == {"AttributeName": "reapAt", "Enabled": True}
    units = tables[_logical(synthesized, "Units", "AWS::DynamoDB::Table")]
    (index,) = units["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "claimable" and index["Projection"] == {
        "ProjectionType": "KEYS_ONLY"
    }


def test_the_claims_grant_queries_its_own_index_only(synthesized):
    role = _logical(synthesized, "UnitsFnServiceRole", "AWS::IAM::Role")
    text = str(
        [
            p
            for p in cfn.resources(synthesized, "AWS::IAM::Policy").values()
            if {"Ref": role} in p["Properties"]["Roles"]
        ]
    )
    # Then Query is allowed on the claimable index only, never on index/*
    assert "/index/claimable" in text and "/index/*" not in text


def _statements_of(template: dict[str, Any], function_prefix: str) -> list[dict[str, Any]]:
    role = _logical(template, f"{function_prefix}ServiceRole", "AWS::IAM::Role")
    return [
        statement
        for p in cfn.resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for statement in p["Properties"]["PolicyDocument"]["Statement"]
        if "dynamodb:" in str(statement["Action"])
    ]


def test_extra_actions_are_scoped_to_the_table_or_one_named_index(synthesized):
    own = _logical(synthesized, "Own", "AWS::DynamoDB::Table")
    statements = _statements_of(synthesized, "OwnFn")
    assert {
        (json.dumps(s["Resource"], sort_keys=True), json.dumps(s["Action"])) for s in statements
    } == {
        (
            json.dumps({"Fn::GetAtt": [own, "Arn"]}),
            json.dumps(["dynamodb:GetItem", "dynamodb:PutItem"]),
        ),
        (
            json.dumps(
                {"Fn::Join": ["", [{"Fn::GetAtt": [own, "Arn"]}, "/index/byOwner"]]},
                sort_keys=True,
            ),
            json.dumps("dynamodb:Query"),
        ),
    }
    with pytest.raises(ValueError, match="DynamoDB actions"):
        stack = _stack()
        tcdk.AppTable(stack, "T").grant_actions(_function(stack, "F"), "s3:GetObject")


def test_idempotency_records_can_be_confined_to_leading_keys(synthesized):
    (statement,) = _statements_of(synthesized, "KeyedFn")
    assert statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["orders#*"]}
    }
    assert set(statement["Action"]) == {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    }


def test_a_constructs_table_keeps_the_logical_id_of_a_plain_table_in_its_place():
    # Given a plain table, and the construct that replaces it under the same id
    def logical_ids(build: Any) -> set[str]:
        stack = cdk.Stack(cdk.App(), "S")
        build(cdk.aws_dynamodb, stack)
        return set(
            cfn.resources(dict(Template.from_stack(stack).to_json()), "AWS::DynamoDB::Table")
        )

    plain = logical_ids(
        lambda ddb, stack: ddb.Table(
            stack,
            "Orders",
            partition_key=ddb.Attribute(name="id", type=ddb.AttributeType.STRING),
        )
    )
    construct = logical_ids(lambda ddb, stack: tcdk.VersionedTable(stack, "Orders"))
    # Then the logical id is the same: a deployed table is updated in place, not replaced
    assert plain == construct and len(plain) == 1


def test_the_consumer_is_ordered_stops_at_the_first_failure_and_has_a_dlq_and_alarms(synthesized):
    template = Template.from_json(synthesized)
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "BisectBatchOnFunctionError": True,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ParallelizationFactor": 1,
            "MaximumRetryAttempts": 5,
            "MaximumRecordAgeInSeconds": 3600,
            "StartingPosition": "TRIM_HORIZON",
            "DestinationConfig": {
                "OnFailure": {
                    "Destination": {
                        "Fn::GetAtt": [
                            _logical(synthesized, "ConsumerDeadLetters", "AWS::SQS::Queue"),
                            "Arn",
                        ]
                    }
                }
            },
        },
    )
    alarms = [
        a["Properties"] for a in cfn.resources(synthesized, "AWS::CloudWatch::Alarm").values()
    ]
    assert {a.get("MetricName") for a in alarms} == {
        "ApproximateNumberOfMessagesVisible",
        "IteratorAge",
    }
    (age,) = [a for a in alarms if a.get("MetricName") == "IteratorAge"]
    assert age["Statistic"] == "Maximum" and age["Threshold"] == 300_000
    # behind in 3 of the last 5 minutes: a short burst does not page
    assert (age["EvaluationPeriods"], age["DatapointsToAlarm"]) == (5, 3)


# -- replication -----------------------------------------------------------------------------

EVENTUAL = tcdk.Replication(["us-east-2", "us-west-2"])
STRONG = tcdk.Replication(["us-east-2", "us-west-2"], consistency="strong")


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Regions", env=cdk.Environment(region="us-east-1"))


@pytest.mark.parametrize("name", sorted(GRANTS))
def test_every_primitive_refuses_an_eventually_consistent_global_table(name):
    construct = GRANTS[name][0]
    with pytest.raises(tcdk.UnsafeReplication, match="last writer wins"):
        construct(_stack(), name, replication=EVENTUAL)


def test_the_lease_table_refuses_strong_consistency_while_abandoned_waiters_rely_on_ttl():
    with pytest.raises(tcdk.UnsafeReplication, match="Time to Live"):
        tcdk.LeaseTable(_stack(), "Leases", replication=STRONG)


@pytest.mark.parametrize("name", ["Capacity", "Units", "Shards"])
def test_primitives_that_need_transactions_refuse_strong_consistency(name):
    with pytest.raises(tcdk.UnsafeReplication, match="does not support transactions"):
        GRANTS[name][0](_stack(), name, replication=STRONG)


def test_idempotency_refuses_strong_consistency_while_it_relies_on_ttl_cleanup():
    with pytest.raises(tcdk.UnsafeReplication, match="Time to Live"):
        tcdk.IdempotencyTable(_stack(), "Idem", replication=STRONG)
    # And without TTL (cleanup by a job of one's own) it is accepted
    tcdk.IdempotencyTable(_stack(), "Idem", replication=STRONG, time_to_live_attribute=None)


@pytest.mark.parametrize("construct", [tcdk.VersionedTable, tcdk.LeaseTable])
def test_strongly_consistent_global_tables_are_accepted_where_the_primitive_holds(construct):
    stack = _stack()
    # (a lease table without TTL: MRSC has none; abandoned waiter rows need a cleanup of one's own)
    construct(
        stack,
        "T",
        replication=STRONG,
        removal_policy=cdk.RemovalPolicy.DESTROY,
        time_to_live_attribute=None,
    )
    (table,) = cfn.resources(
        dict(Template.from_stack(stack).to_json()), "AWS::DynamoDB::GlobalTable"
    ).values()
    assert table["Properties"]["MultiRegionConsistency"] == "STRONG"
    assert {r["Region"] for r in table["Properties"]["Replicas"]} == {
        "us-east-1",
        "us-east-2",
        "us-west-2",
    }


def test_an_explicit_reason_overrides_a_refusal():
    stack = _stack()
    tcdk.LeaseTable(
        stack,
        "T",
        replication=EVENTUAL,
        allow_unsafe_replication="only one region ever writes; the others are read replicas",
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    assert cfn.resources(dict(Template.from_stack(stack).to_json()), "AWS::DynamoDB::GlobalTable")


def test_the_refusal_is_a_turnstile_error():
    assert issubclass(tcdk.UnsafeReplication, tcdk.errors.Refused)
