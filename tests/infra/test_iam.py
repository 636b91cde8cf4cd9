"""Least privilege: each function's role, as synthesized, allows the DynamoDB requests its code
makes and nothing around them; the shared idempotency table only within the function's own
partitions (``dynamodb:LeadingKeys``).

The policies are read from the template and evaluated as the local runtime enforces them
(``local.iam``), request by request, never compared with ``infra.access`` (the module that wrote
them): what the e2e tier runs is what is checked here. That the code's calls fit these roles is
proven by the e2e tier, whose workers enforce the same policies on every call.
"""

from __future__ import annotations

from typing import Any

import pytest

from local import iam
from local.sandbox.iam_guard import Request, decide
from local.template import resources

FUNCTIONS = {
    "products": "service.handlers.products.handler",
    "locks": "service.handlers.locks.handler",
    "wallets": "service.handlers.wallets.handler",
    "inventory": "service.handlers.inventory.handler",
    "events": "service.handlers.events.handler",
    "inventorysummary": "service.handlers.inventory_summary.handler",
    "inventorycreator": "service.handlers.inventory_creator.handler",
    "decider": "service.handlers.registration_consumer.handler",
}
EVERY_ITEM_ACTION = (
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "ConditionCheckItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "BatchWriteItem",
)


def table(template: dict[str, Any], prefix: str) -> str:
    (logical,) = [t for t in resources(template, "AWS::DynamoDB::Table") if t.startswith(prefix)]
    return logical


def arn(name: str, index: str | None = None) -> str:
    found = f"arn:aws:dynamodb:{iam.REGION}:{iam.ACCOUNT}:table/{name}"
    return f"{found}/index/{index}" if index else found


def allowed(
    template: dict[str, Any], function: str, action: str, resource: str, *keys: str
) -> bool:
    policy = iam.policy_of(template, FUNCTIONS[function])
    request = Request(f"dynamodb:{action}", resource, tuple(keys) if keys else None)
    return decide(policy.statements, request) == "allow"


def grants(template: dict[str, Any], function: str) -> dict[str, set[str]]:
    """Table (``Products``...) -> the item actions the function may perform on it (any key)."""
    found: dict[str, set[str]] = {}
    for logical in resources(template, "AWS::DynamoDB::Table"):
        for action in EVERY_ITEM_ACTION:
            if allowed(template, function, action, arn(logical)):
                found.setdefault(logical.removeprefix("Tables").split("Table")[0], set()).add(
                    action
                )
    return found


def test_every_function_has_a_policy_the_local_runtime_can_evaluate(template):
    policies = iam.policies(template)
    assert {p.function for p in policies.values()} == set(
        resources(template, "AWS::Lambda::Function")
    )
    for policy in policies.values():
        policy.guard()  # refuses any statement element it cannot evaluate


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_no_function_may_scan_or_batch_write_anything(template, function):
    for logical in resources(template, "AWS::DynamoDB::Table"):
        assert not allowed(template, function, "Scan", arn(logical))
        assert not allowed(template, function, "BatchWriteItem", arn(logical))


@pytest.mark.parametrize(
    ("function", "prefix"),
    [("products", "TablesProducts"), ("events", "TablesEvents"), ("decider", "TablesEvents")],
)
def test_sharded_counters_may_read_their_shards_at_once(template, function, prefix):
    # Defect 2: turnstile_ddb.sharded reads every shard with one BatchGetItem
    assert allowed(template, function, "BatchGetItem", arn(table(template, prefix)))


@pytest.mark.parametrize("function", ["locks", "wallets", "inventory", "inventorysummary"])
def test_functions_without_sharded_items_may_not_batch_read(template, function):
    for logical in resources(template, "AWS::DynamoDB::Table"):
        assert not allowed(template, function, "BatchGetItem", arn(logical))


def test_the_narrowest_functions_as_written_out(template):
    # acquire, renew, release; waitMs queues: waiter rows put, read and deleted, a missing
    # waiter's placeholder put under a check of the head (lease_queue)
    assert grants(template, "locks") == {
        "Leases": {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"}
    }
    assert grants(template, "inventorysummary") == {"InventorySummary": {"UpdateItem"}}
    assert grants(template, "wallets") == {
        "Leases": {"UpdateItem", "ConditionCheckItem"},
        "Wallets": {"GetItem", "PutItem"},
        "Idempotency": {"PutItem", "UpdateItem", "DeleteItem"},  # own partition only (below)
    }


def test_only_the_creation_worker_may_describe_the_inventory_table_to_pace_itself(template):
    inventory = table(template, "TablesInventoryTable")
    assert allowed(template, "inventorycreator", "DescribeTable", arn(inventory))
    assert grants(template, "inventorycreator") == {
        "Inventory": {"GetItem", "PutItem", "UpdateItem"},
        "InventorySummary": {"UpdateItem"},
    }
    for function in FUNCTIONS:
        if function != "inventorycreator":
            assert not allowed(template, function, "DescribeTable", arn(inventory)), function
    for logical in resources(template, "AWS::DynamoDB::Table"):
        if logical != inventory:
            assert not allowed(template, "inventorycreator", "DescribeTable", arn(logical))


def test_index_queries_are_allowed_on_the_functions_own_tables_indexes_only(template):
    events = table(template, "TablesEvents")
    assert allowed(template, "events", "Query", arn(events, "byUser"))
    assert not allowed(template, "products", "Query", arn(events, "byUser"))
    assert not allowed(template, "decider", "Query", arn(events, "byUser"))


@pytest.mark.parametrize(
    ("function", "partition"),
    [("products", "products"), ("events", "events"), ("wallets", "wallets")],
)
def test_idempotency_records_are_confined_to_the_functions_own_partition(
    template, function, partition
):
    records = arn(table(template, "TablesIdempotency"))
    for action in ("PutItem", "UpdateItem", "DeleteItem"):
        assert allowed(template, function, action, records, f"{partition}#k1")
    others = {"products", "events", "wallets"} - {partition}
    for other in others:
        assert not allowed(template, function, "PutItem", records, f"{other}#k1")
    assert not allowed(template, function, "GetItem", records, f"{partition}#k1")


@pytest.mark.parametrize("function", ["locks", "inventory", "inventorysummary", "decider"])
def test_functions_without_keyed_routes_cannot_touch_idempotency_records(template, function):
    records = arn(table(template, "TablesIdempotency"))
    for action in EVERY_ITEM_ACTION:
        assert not allowed(template, function, action, records, f"{function}#k1")


def test_a_policy_without_one_action_denies_it_with_awss_message(template):
    # Given the products role as synthesized, and a copy without BatchGetItem
    policy = iam.policy_of(template, FUNCTIONS["products"])
    reduced = policy.without("dynamodb:BatchGetItem")
    products = table(template, "TablesProducts")
    params = {"RequestItems": {products: {"Keys": [{"productId": {"S": "p#0"}}]}}}
    # When the same BatchGetItem is checked against both
    assert policy.guard().denial("BatchGetItem", params) is None
    denied = reduced.guard().denial("BatchGetItem", params)
    # Then only the copy denies it, in AWS's words
    assert denied is not None
    assert reduced.guard().message(*denied) == (
        f"User: arn:aws:sts::{iam.ACCOUNT}:assumed-role/{policy.role}/{policy.function} is not "
        f"authorized to perform: dynamodb:BatchGetItem on resource: {arn(products)} because no "
        "identity-based policy allows the dynamodb:BatchGetItem action"
    )


@pytest.mark.parametrize("function", ["products", "events"])
def test_functions_that_resize_their_shards_take_the_resize_lease_and_shrink(template, function):
    # An adaptive product's or event's shards are resized by one resizer at a time (a lease on
    # the leases table: acquire and release are conditional updates); a shrink deletes shards
    leases = arn(table(template, "TablesLeases"))
    assert grants(template, function)["Leases"] == {"UpdateItem", "ConditionCheckItem"}
    own = "TablesProducts" if function == "products" else "TablesEvents"
    assert allowed(template, function, "DeleteItem", arn(table(template, own)))
    assert not allowed(template, function, "DeleteItem", leases)
