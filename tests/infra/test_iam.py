"""Issue 13 (IAM): each function may call exactly the DynamoDB actions it uses on the tables it
uses, and on the shared idempotency table only its own records (``dynamodb:LeadingKeys``)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.tables import construct_id
from local import template as cfn
from service import access, catalog, config

STREAM_ACTIONS = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
}
FUNCTIONS = [spec.name for spec in catalog.API_FUNCTIONS + catalog.STREAM_CONSUMERS]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def table_of(resource: Any) -> str:
    """The logical table name (``config.PRODUCTS``...) an ARN expression points at."""
    text = str(resource)
    names = [n for n in _all_tables() if f"'Tables{construct_id(n)}" in text]
    assert len(names) == 1, resource
    return names[0]


def _all_tables() -> dict[str, Any]:
    return {name: None for grants in access.ACTIONS.values() for name in grants}


def table_statements(template: dict[str, Any], function: str) -> list[dict[str, Any]]:
    prefix = f"Functions{function.capitalize()}RoleDefaultPolicy"
    (policy,) = [
        p
        for logical, p in cfn.resources(template, "AWS::IAM::Policy").items()
        if logical.startswith(prefix)
    ]
    return [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))
        and not set(as_list(s["Action"])) <= STREAM_ACTIONS
    ]


def grants(template: dict[str, Any], function: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for statement in table_statements(template, function):
        for resource in as_list(statement["Resource"]):
            found.setdefault(table_of(resource), set()).update(as_list(statement["Action"]))
    return found


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_function_gets_exactly_the_declared_actions(template, function):
    expected = {table: set(actions) for table, actions in access.ACTIONS[function].items()}
    assert grants(template, function) == expected


@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_function_may_scan_or_batch_write(template, function):
    # (units are created with conditional transactional puts: never written over)
    actions = set().union(*grants(template, function).values())
    assert "dynamodb:Scan" not in actions and "dynamodb:BatchGetItem" not in actions
    assert "dynamodb:BatchWriteItem" not in actions


def test_the_narrowest_functions_as_written_out(template):
    # acquire, renew, release; waitMs queues: waiter rows put, read and deleted
    assert grants(template, "locks") == {
        config.LEASES: {
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        }
    }
    assert grants(template, "wallets") == {
        config.LEASES: {"dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"},
        config.WALLETS: {"dynamodb:GetItem", "dynamodb:PutItem"},
        config.IDEMPOTENCY: {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
    }
    assert grants(template, "inventorysummary") == {
        config.INVENTORY_SUMMARY: {"dynamodb:UpdateItem"}
    }


@pytest.mark.parametrize(
    ("function", "partitions"),
    [("products", ["products#*"]), ("events", ["events#*"]), ("wallets", ["wallets#*"])],
)
def test_idempotency_records_are_confined_to_the_functions_own_partition(
    template, function, partitions
):
    (statement,) = [
        s
        for s in table_statements(template, function)
        if any(table_of(r) == config.IDEMPOTENCY for r in as_list(s["Resource"]))
    ]
    assert statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": partitions}
    }
    assert all(table_of(r) == config.IDEMPOTENCY for r in as_list(statement["Resource"]))


@pytest.mark.parametrize("function", ["locks", "inventory", "inventorysummary", "decider"])
def test_functions_without_keyed_routes_cannot_touch_idempotency_records(template, function):
    assert config.IDEMPOTENCY not in grants(template, function)
