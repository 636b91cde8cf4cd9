"""The lease and wallet tables, functions and routes as the synthesized template has them."""

from __future__ import annotations

from typing import Any

from local import template as cfn


def table(template: dict[str, Any], key: str) -> dict[str, Any]:
    (found,) = [
        resource["Properties"]
        for resource in cfn.resources(template, "AWS::DynamoDB::Table").values()
        if resource["Properties"]["KeySchema"][0]["AttributeName"] == key
    ]
    return found


def function_env(template: dict[str, Any], handler: str) -> dict[str, Any]:
    (found,) = [
        resource["Properties"]["Environment"]["Variables"]
        for resource in cfn.resources(template, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] == handler
    ]
    return found


def test_lease_table_ttl_never_purges_a_lease_item(template):
    """Lease items carry the fences, which strictly increase forever: no TTL may delete
    one and restart its fence at 1. The TTL (turnstile_ddb.cdk.LeaseTable) is on
    ``reapAt``, which no lease item is written with and every acquisition removes
    (tests/integration/test_lease_table_ttl.py), so it only ever purges the queue's tombstones;
    not ``purgeAt``, which lease code before 0.3.0 wrote; never ``expiresAt``, which every
    item has."""
    leases = table(template, "resource")
    assert leases["KeySchema"] == [{"AttributeName": "resource", "KeyType": "HASH"}]
    assert leases["TimeToLiveSpecification"] == {"AttributeName": "reapAt", "Enabled": True}
    assert leases["BillingMode"] == "PAY_PER_REQUEST"


def test_lock_and_wallet_functions_get_exactly_their_tables(template):
    locks = function_env(template, "service.handlers.locks.handler")
    wallets = function_env(template, "service.handlers.wallets.handler")
    assert {k for k in locks if k.endswith("_TABLE")} == {"LEASES_TABLE"}
    assert {k for k in wallets if k.endswith("_TABLE")} == {
        "LEASES_TABLE",
        "WALLETS_TABLE",
        "IDEMPOTENCY_TABLE",  # top-ups accept an Idempotency-Key
    }
    assert locks["LEASES_TABLE"] == wallets["LEASES_TABLE"]


def test_lock_routes_are_api_methods_with_validated_bodies(template):
    methods = cfn.resources(template, "AWS::ApiGateway::Method")
    by_operation = {m["Properties"].get("OperationName"): m["Properties"] for m in methods.values()}
    for operation, verb in (
        ("acquire_lock", "POST"),
        ("renew_lock", "PUT"),
        ("release_lock", "DELETE"),
        ("top_up_wallet", "POST"),
    ):
        method = by_operation[operation]
        assert method["HttpMethod"] == verb
        assert "RequestValidatorId" in method and "RequestModels" in method


def test_locks_function_outlives_the_longest_queued_wait(template):
    """A queued acquisition (``waitMs``) waits up to LOCK_MAX_WAIT_MS, and ends a margin before
    the invocation would: the function's timeout leaves room for both, inside API Gateway's 29 s."""
    from service import config

    (locks,) = [
        resource["Properties"]
        for resource in cfn.resources(template, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] == "service.handlers.locks.handler"
    ]
    seconds = locks["Timeout"]
    assert config.LOCK_MAX_WAIT_MS + config.LOCK_WAIT_MARGIN_MS <= seconds * 1000 < 29_000
    models = cfn.resources(template, "AWS::ApiGateway::Model")
    schemas = [m["Properties"]["Schema"] for m in models.values()]
    acquire = [s for s in schemas if "waitMs" in s.get("properties", {})]
    assert acquire and acquire[0]["properties"]["waitMs"]["maximum"] == config.LOCK_MAX_WAIT_MS
