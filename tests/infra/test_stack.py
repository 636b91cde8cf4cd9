"""The synthesized template, asserted property by property (the ``template`` fixture synthesizes
with cdk-nag's AwsSolutions checks as a validation plugin, so it only exists if they pass)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from local import template as cfn
from service import config
from service.api.errors import STATUS
from tests.helpers import api_methods

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def t(template: dict[str, Any]) -> Template:
    return Template.from_json(template)


def logical_id(template: dict[str, Any], kind: str, prefix: str) -> str:
    matches = [k for k in cfn.resources(template, kind) if k.startswith(prefix)]
    assert len(matches) == 1, matches
    return matches[0]


def test_product_table_is_keyed_by_product_id(template):
    table = template["Resources"][
        logical_id(template, "AWS::DynamoDB::Table", "TablesProductsTable")
    ]
    assert table["Properties"]["KeySchema"] == [{"AttributeName": "productId", "KeyType": "HASH"}]
    assert table["Properties"]["AttributeDefinitions"] == [
        {"AttributeName": "productId", "AttributeType": "S"}
    ]


def test_every_table_is_on_demand_recoverable_and_retained(template):
    for resource in cfn.resources(template, "AWS::DynamoDB::Table").values():
        properties = resource["Properties"]
        assert properties["BillingMode"] == "PAY_PER_REQUEST"
        assert properties["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"]
        assert properties["DeletionProtectionEnabled"] is True
        assert resource["DeletionPolicy"] == resource["UpdateReplacePolicy"] == "Retain"


def test_idempotency_table_expires_records_by_ttl(t):
    t.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "TimeToLiveSpecification": {"AttributeName": config.TTL_ATTRIBUTE, "Enabled": True},
        },
    )


def test_products_function_runtime_layer_and_environment(t, template):
    products = logical_id(template, "AWS::DynamoDB::Table", "TablesProductsTable")
    idempotency = logical_id(template, "AWS::DynamoDB::Table", "TablesIdempotencyTable")
    t.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "service.handlers.products.handler",
            "Runtime": "python3.12",
            "Architectures": ["arm64"],
            "Timeout": config.API_TIMEOUT_SECONDS,
            # The project's own layer, built from the lock: test_versions.py checks that what
            # it ships is what the tests run (versions, file for file).
            "Layers": [{"Ref": logical_id(template, "AWS::Lambda::LayerVersion", "Functions")}],
            "Environment": {
                "Variables": {
                    "PRODUCTS_TABLE": {"Ref": products},
                    "IDEMPOTENCY_TABLE": {"Ref": idempotency},
                    "POWERTOOLS_SERVICE_NAME": "turnstile-products",
                }
            },
            "LoggingConfig": {"LogFormat": "JSON"},
        },
    )


def test_products_function_may_touch_only_its_three_tables(template):
    # its products, its idempotency records, and the leases (one resizer at a time)
    products = logical_id(template, "AWS::DynamoDB::Table", "TablesProductsTable")
    idempotency = logical_id(template, "AWS::DynamoDB::Table", "TablesIdempotencyTable")
    leases = logical_id(template, "AWS::DynamoDB::Table", "TablesLeasesTable")
    policy = template["Resources"][
        logical_id(template, "AWS::IAM::Policy", "FunctionsProductsRoleDefaultPolicy")
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    dynamo = [s for s in statements if any(a.startswith("dynamodb:") for a in s["Action"])]
    tables = {
        r["Fn::GetAtt"][0]
        for s in dynamo
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        if isinstance(r, dict) and "Fn::GetAtt" in r
    }
    assert tables == {products, idempotency, leases}
    actions = {action for s in dynamo for action in s["Action"]}
    assert "dynamodb:UpdateItem" in actions and "dynamodb:Scan" not in actions


def test_no_policy_grants_a_wildcard_resource(template):
    """The exceptions: actions IAM only allows on "*": dynamodb:ListStreams (stream consumers) and
    X-Ray's trace writes (active tracing)."""
    for resource in cfn.resources(template, "AWS::IAM::Policy").values():
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            actions = statement["Action"]
            actions = actions if isinstance(actions, list) else [actions]
            if "*" in resources:
                assert actions in (
                    ["dynamodb:ListStreams"],
                    ["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
                ), statement


def test_no_lambda_role_uses_a_managed_policy(template):
    lambda_roles = [
        r
        for r in cfn.resources(template, "AWS::IAM::Role").values()
        if "lambda.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    ]
    assert lambda_roles
    assert all("ManagedPolicyArns" not in r["Properties"] for r in lambda_roles)


def test_stage_throttling_and_access_logs(t):
    t.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": "v1",
            "AccessLogSetting": {"DestinationArn": Match.any_value(), "Format": Match.any_value()},
            "TracingEnabled": True,
            "MethodSettings": Match.array_with(
                [
                    Match.object_like(
                        {
                            "ThrottlingRateLimit": config.API_RATE_LIMIT,
                            "ThrottlingBurstLimit": config.API_BURST_LIMIT,
                            "LoggingLevel": "ERROR",
                            "MetricsEnabled": True,
                        }
                    )
                ]
            ),
        },
    )


# Every route of the original HTTP contract (tests/e2e/contract_routes.json), plus turnstile's
# own (wallets, exact counts), written out here rather than read from the declarations the
# stack is built from.
EXPECTED_ROUTES = {
    ("POST", "/products", "products"),
    ("GET", "/products/{productId}", "products"),
    ("PATCH", "/products/{productId}", "products"),
    ("POST", "/products/{productId}/restocks", "products"),
    ("POST", "/products/{productId}/purchases", "products"),
    ("POST", "/events", "events"),
    ("GET", "/events/{eventId}", "events"),
    ("POST", "/events/{eventId}/registrations", "events"),
    ("DELETE", "/events/{eventId}/registrations/{userId}", "events"),
    ("GET", "/users/{userId}/registrations", "events"),
    ("POST", "/events/{eventId}/registration-requests", "events"),
    ("GET", "/events/{eventId}/registration-requests/{requestId}", "events"),
    ("POST", "/locks/{resource}", "locks"),
    ("PUT", "/locks/{resource}", "locks"),
    ("DELETE", "/locks/{resource}", "locks"),
    ("POST", "/wallets/{walletId}/top-ups", "wallets"),
    ("GET", "/wallets/{walletId}", "wallets"),
    ("POST", "/inventory", "inventory"),
    ("GET", "/inventory/{sku}", "inventory"),
    ("GET", "/inventory/{sku}/exact", "inventory"),
    ("POST", "/inventory/{sku}/reservations", "inventory"),
    ("POST", "/inventory/{sku}/reservations/{reservationId}/confirm", "inventory"),
    ("DELETE", "/inventory/{sku}/reservations/{reservationId}", "inventory"),
}


def test_every_route_is_a_method_on_its_function(template):
    methods = api_methods(template)
    assert set(methods) == {(method, path) for method, path, _ in EXPECTED_ROUTES}
    functions = cfn.resources(template, "AWS::Lambda::Function")
    for method, path, function in EXPECTED_ROUTES:
        integration = methods[(method, path)]["Integration"]
        assert integration["Type"] == "AWS_PROXY"
        target = json.dumps(integration["Uri"])
        # API Gateway invokes the function's SnapStart alias, never $LATEST
        aliases = cfn.resources(template, "AWS::Lambda::Alias")
        assert not [name for name in functions if f'"{name}"' in target], target
        (alias,) = [name for name in aliases if f'"{name}"' in target]
        _, invoked = cfn.invoked_function(template, alias)
        assert invoked["Properties"]["Handler"] == f"service.handlers.{function}.handler"


def test_every_method_with_a_body_is_validated_by_a_model(template):
    methods = api_methods(template)
    validator = logical_id(template, "AWS::ApiGateway::RequestValidator", "HttpApiValidator")
    bodyless = {("GET", p) for m, p, _ in EXPECTED_ROUTES if m == "GET"} | {
        ("POST", "/inventory/{sku}/reservations/{reservationId}/confirm"),
        ("DELETE", "/inventory/{sku}/reservations/{reservationId}"),
        ("DELETE", "/events/{eventId}/registrations/{userId}"),
    }
    for key, method in methods.items():
        if key in bodyless:
            assert "RequestModels" not in method, key
            continue
        assert method["RequestValidatorId"] == {"Ref": validator}, key
        assert "application/json" in method["RequestModels"], key


def test_purchase_model_matches_the_contract(t):
    t.has_resource_properties(
        "AWS::ApiGateway::Model",
        {
            "Schema": {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "type": "object",
                "required": ["quantity"],
                "additionalProperties": False,
                "properties": {
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "strategy": {"type": "string", "enum": ["atomic", "versioned"]},
                },
            }
        },
    )


def test_every_method_requires_a_cognito_id_token_from_the_one_authorizer(template):
    # Every deployed route needs an ID token (docs/identity.md) (GET /openapi.json is served only
    # locally, so it is not among the methods at all).
    methods = api_methods(template)
    assert set(methods) == {(method, path) for method, path, _ in EXPECTED_ROUTES}
    assert ("GET", "/openapi.json") not in methods
    authorizer = logical_id(template, "AWS::ApiGateway::Authorizer", "HttpAuthorizer")
    for key, method in methods.items():
        assert method["AuthorizationType"] == "COGNITO_USER_POOLS", key
        assert method["AuthorizerId"] == {"Ref": authorizer}, key
        assert "AuthorizationScopes" not in method, key  # scopes would demand access tokens


# Each gateway refusal: (status, error code, message), None where the gateway's own stays.
GATEWAY_REFUSALS = {
    "UNAUTHORIZED": ("401", "UNAUTHORIZED", None),
    "ACCESS_DENIED": ("403", "FORBIDDEN", None),
    "MISSING_AUTHENTICATION_TOKEN": ("404", "NOT_FOUND", "no route for this method and path"),
    "INVALID_SIGNATURE": (
        "401",
        "UNAUTHORIZED",
        "send a Cognito ID token in Authorization, not an AWS signature",
    ),
    "EXPIRED_TOKEN": (
        "401",
        "UNAUTHORIZED",
        "send a Cognito ID token in Authorization, not an AWS signature",
    ),
    "BAD_REQUEST_BODY": (None, "VALIDATION_ERROR", None),
    "THROTTLED": (None, "THROTTLED", None),
    "DEFAULT_4XX": (None, "BAD_REQUEST", None),
    "DEFAULT_5XX": (None, "INTERNAL", None),
}


def rendered(body_template: str, gateway_message: str) -> Any:
    """The body API Gateway sends, ``$context.error.messageString`` being a quoted string."""
    return json.loads(
        body_template.replace("$context.error.messageString", json.dumps(gateway_message))
    )


def test_gateway_refusals_have_the_contract_status_code_and_body(template):
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in cfn.resources(template, "AWS::ApiGateway::GatewayResponse").values()
    }
    assert set(responses) == set(GATEWAY_REFUSALS)
    for kind, (status, code, message) in GATEWAY_REFUSALS.items():
        response = responses[kind]
        assert response.get("StatusCode") == status, kind
        if status is not None:  # the status the contract gives the code
            assert STATUS[code] == int(status), kind
        assert set(response["ResponseTemplates"]) == {"application/json"}, kind
        body = rendered(response["ResponseTemplates"]["application/json"], "gateway says no")
        assert body == {"error": code, "message": message or "gateway says no"}, kind


def test_app_py_synthesizes_offline_and_cfn_lint_is_clean(assembly):
    # Given nothing but the repository: python app.py wrote the template (the session's synth,
    # tests/conftest.py: run as a script, offline)
    written = Path(assembly.directory) / "Turnstile.template.json"
    assert written.exists()
    # Then cfn-lint finds no errors (W3005, the DependsOn CDK adds, is a known warning)
    lint = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--ignore-checks",
            "W3005",
            "--",
            str(written),
        ],
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
