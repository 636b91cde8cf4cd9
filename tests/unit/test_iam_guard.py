"""The local IAM evaluator (``local/sandbox/iam_guard.py``): which requests a DynamoDB call makes,
and how a policy decides them, on hand-written policies."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from local.sandbox.iam_guard import Calls, Guard, Request, UnsupportedPolicy, decide

ACCOUNT = "123456789012"
T = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table"
CALLS = Calls("us-east-1", ACCOUNT, {"Orders": "pk", "Keys": "id"})


def allow(actions: Any, resources: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources, **extra}


def test_a_transaction_needs_each_elements_own_action_on_its_table():
    requests = CALLS.requests(
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": "Orders", "Item": {"pk": {"S": "a"}}}},
                {"Update": {"TableName": "Orders", "Key": {"pk": {"S": "b"}}}},
                {"Delete": {"TableName": "Keys", "Key": {"id": {"S": "c"}}}},
                {"ConditionCheck": {"TableName": "Keys", "Key": {"id": {"N": "4"}}}},
            ]
        },
    )
    assert requests == [
        Request("dynamodb:PutItem", f"{T}/Orders", ("a",)),
        Request("dynamodb:UpdateItem", f"{T}/Orders", ("b",)),
        Request("dynamodb:DeleteItem", f"{T}/Keys", ("c",)),
        Request("dynamodb:ConditionCheckItem", f"{T}/Keys", ("4",)),
    ]


def test_batches_index_queries_and_scans_name_their_resources_and_keys():
    batch = CALLS.requests(
        "BatchGetItem",
        {"RequestItems": {"Orders": {"Keys": [{"pk": {"S": "a"}}, {"pk": {"S": "b"}}]}}},
    )
    assert batch == [Request("dynamodb:BatchGetItem", f"{T}/Orders", ("a", "b"))]
    query = CALLS.requests(
        "Query",
        {
            "TableName": "Orders",
            "KeyConditionExpression": "#p = :v AND begins_with(sk, :s)",
            "ExpressionAttributeNames": {"#p": "pk"},
            "ExpressionAttributeValues": {":v": {"S": "a"}, ":s": {"S": "x"}},
        },
    )
    assert query == [Request("dynamodb:Query", f"{T}/Orders", ("a",))]
    on_index = CALLS.requests(
        "Query", {"TableName": "Orders", "IndexName": "byUser", "KeyConditionExpression": "u = :u"}
    )
    assert on_index == [Request("dynamodb:Query", f"{T}/Orders/index/byUser", None)]
    assert CALLS.requests("Scan", {"TableName": "Orders"}) == [
        Request("dynamodb:Scan", f"{T}/Orders", None)
    ]


def test_allow_needs_a_matching_action_and_resource_and_a_deny_wins():
    statements = [
        allow(["dynamodb:Get*", "dynamodb:Query"], [f"{T}/Orders", f"{T}/Orders/index/*"])
    ]
    assert decide(statements, Request("dynamodb:GetItem", f"{T}/Orders")) == "allow"
    assert decide(statements, Request("DynamoDB:getitem", f"{T}/Orders")) == "allow"
    assert decide(statements, Request("dynamodb:Query", f"{T}/Orders/index/i")) == "allow"
    assert decide(statements, Request("dynamodb:GetItem", f"{T}/Orders2")) == "implicit deny"
    assert decide(statements, Request("dynamodb:PutItem", f"{T}/Orders")) == "implicit deny"
    denied = [*statements, {"Effect": "Deny", "NotAction": "dynamodb:Query", "Resource": "*"}]
    assert decide(denied, Request("dynamodb:GetItem", f"{T}/Orders")) == "explicit deny"
    assert decide(denied, Request("dynamodb:Query", f"{T}/Orders/index/i")) == "allow"


def test_leading_keys_confine_the_keys_and_for_all_values_holds_without_any():
    condition = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["products#*"]}}
    statements = [allow("dynamodb:PutItem", f"{T}/Keys", Condition=condition)]
    assert decide(statements, Request("dynamodb:PutItem", f"{T}/Keys", ("products#1",))) == "allow"
    outside = Request("dynamodb:PutItem", f"{T}/Keys", ("products#1", "events#1"))
    assert decide(statements, outside) == "implicit deny"
    assert decide(statements, Request("dynamodb:PutItem", f"{T}/Keys", None)) == "allow"
    anyof = [allow("dynamodb:PutItem", f"{T}/Keys", Condition={"ForAnyValue:StringEquals": {
        "dynamodb:LeadingKeys": ["a"]}})]  # fmt: skip
    assert decide(anyof, Request("dynamodb:PutItem", f"{T}/Keys", None)) == "implicit deny"
    assert decide(anyof, Request("dynamodb:PutItem", f"{T}/Keys", ("b", "a"))) == "allow"


@pytest.mark.parametrize(
    "statement",
    [
        allow("dynamodb:GetItem", "*", Condition={"NumericLessThan": {"aws:Foo": "1"}}),
        allow("dynamodb:GetItem", "*", Condition={"StringEquals": {"dynamodb:Attributes": "a"}}),
        {**allow("dynamodb:GetItem", "*"), "Principal": "*"},
    ],
)
def test_what_it_cannot_evaluate_is_refused_not_guessed(statement):
    with pytest.raises(UnsupportedPolicy):
        Guard({"principal": "p", "statements": [statement], "region": "r", "account": "a",
               "hash_keys": {}})  # fmt: skip


def test_a_denied_call_raises_access_denied_in_awss_shape_before_it_is_sent():
    # Given a client (pointing nowhere) under a policy that allows only GetItem on Orders
    role = f"arn:aws:sts::{ACCOUNT}:assumed-role/Role/Fn"
    guard = Guard(
        {
            "principal": role,
            "statements": [allow("dynamodb:GetItem", f"{T}/Orders")],
            "region": "us-east-1",
            "account": ACCOUNT,
            "hash_keys": {"Orders": "pk"},
        }
    )
    client = guard.attach(
        boto3.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="x",
            aws_secret_access_key="x",
        )
    )
    # When it puts an item
    with pytest.raises(ClientError) as raised:
        client.put_item(TableName="Orders", Item={"pk": {"S": "a"}})
    # Then DynamoDB's AccessDeniedException, AWS's message, nothing sent
    error = raised.value.response["Error"]
    assert error["Code"] == "AccessDeniedException"
    assert error["Message"] == (
        f"User: {role} is not authorized to perform: dynamodb:PutItem on resource: {T}/Orders "
        "because no identity-based policy allows the dynamodb:PutItem action"
    )
    assert raised.value.operation_name == "PutItem" and guard.denied == 1
