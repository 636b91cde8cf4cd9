"""The REST API, built from the route declarations in ``service.api.routes``.

Each route becomes a method with a Lambda proxy integration; a route with a body gets a request
model (its pydantic model's JSON Schema, as draft 4) and a validator, so API Gateway refuses a
malformed body before a Lambda runs. Every method takes the Cognito user pool authorizer of
``infra.auth`` (an ID token in ``Authorization``), as the API's default, so a method
added later is not anonymous either; ``GET /openapi.json`` is served only locally and has no method
here. The gateway's own error answers are rewritten to the contract's ``{"error", "message"}``
shape (``GATEWAY_ERRORS``).
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.auth import Auth
from infra.functions import Functions
from infra.nag import acknowledge
from infra.settings import Settings
from service import config
from service.api.routes import Route
from service.catalog import FunctionSpec

_SCHEMA_KEYS = {
    "minLength": "min_length",
    "maxLength": "max_length",
    "minProperties": "min_properties",
    "additionalProperties": "additional_properties",
    "minimum": "minimum",
    "maximum": "maximum",
    "pattern": "pattern",
    "enum": "enum",
    "required": "required",
}
_DOCUMENTATION_ONLY = {"title", "default", "description", "examples"}


def json_schema(schema: dict[str, Any], *, top: bool = True) -> apigw.JsonSchema:
    """A pydantic model's JSON Schema (flat models: no $defs, no anyOf) as CDK's draft-4
    JsonSchema; titles and defaults only document, so they are left out."""
    kwargs: dict[str, Any] = {"schema": apigw.JsonSchemaVersion.DRAFT4} if top else {}
    for key, value in schema.items():
        if key in _DOCUMENTATION_ONLY:
            continue
        if key == "type":
            kwargs["type"] = apigw.JsonSchemaType(value.upper())
        elif key == "properties":
            kwargs["properties"] = {
                name: json_schema(sub, top=False) for name, sub in value.items()
            }
        else:
            kwargs[_SCHEMA_KEYS[key]] = value
    return apigw.JsonSchema(**kwargs)


# API Gateway's own refusals, as (construct id, response type, contract code, status, message).
# The status is None where the gateway's default already matches the code; the message is None
# to pass on the gateway's own (``$context.error.messageString``, already a JSON string).
# Response types and defaults:
# https://docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html
#
# * UNAUTHORIZED (401): the Cognito authorizer could not authenticate the caller: no
#   ``Authorization`` header on a known route, or a token that is malformed, expired, forged or
#   of another pool. (A missing header on a known route is UNAUTHORIZED, not
#   MISSING_AUTHENTICATION_TOKEN: that one is for methods with IAM authorization, which this API
#   has none of, and for a method or path that does not exist.)
# * ACCESS_DENIED (403): an authenticated caller refused by the gateway (e.g. a resource policy).
# * MISSING_AUTHENTICATION_TOKEN (403 by default): here only an unknown method or path, so 404
#   with a message of its own. The gateway's would mislead: "Missing Authentication Token", or,
#   when the request carries a Bearer token, that the Authorization header is not a valid
#   key=value pair (it parses it as an AWS signature for a path it cannot route).
# * INVALID_SIGNATURE / EXPIRED_TOKEN (403 by default): an invalid or expired AWS (SigV4)
#   signature. No method here takes one, so they can only answer a client that sent AWS
#   credentials instead of an ID token: 401, as for any credentials this API does not accept.
# Read from AWS's documentation, not observed on a deployed stack (none is deployed from here).
# * DEFAULT_4XX keeps each remaining type's own status (it sets none).
GATEWAY_ERRORS: tuple[tuple[str, apigw.ResponseType, str, str | None, str | None], ...] = (
    ("BodyInvalid", apigw.ResponseType.BAD_REQUEST_BODY, "VALIDATION_ERROR", None, None),
    ("Unauthenticated", apigw.ResponseType.UNAUTHORIZED, "UNAUTHORIZED", "401", None),
    ("Forbidden", apigw.ResponseType.ACCESS_DENIED, "FORBIDDEN", "403", None),
    (
        "UnknownRoute",
        apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN,
        "NOT_FOUND",
        "404",
        "no route for this method and path",
    ),
    (
        "SignatureRefused",
        apigw.ResponseType.INVALID_SIGNATURE,
        "UNAUTHORIZED",
        "401",
        "send a Cognito ID token in Authorization, not an AWS signature",
    ),
    (
        "SignatureExpired",
        apigw.ResponseType.EXPIRED_TOKEN,
        "UNAUTHORIZED",
        "401",
        "send a Cognito ID token in Authorization, not an AWS signature",
    ),
    ("Throttled", apigw.ResponseType.THROTTLED, "THROTTLED", None, None),
    ("Default4xx", apigw.ResponseType.DEFAULT_4_XX, "BAD_REQUEST", None, None),
    ("Default5xx", apigw.ResponseType.DEFAULT_5_XX, "INTERNAL", None, None),
)


def gateway_error(code: str, message: str | None = None) -> dict[str, str]:
    """The response template of one gateway error: the contract's body, ``message`` as given
    (a plain string, JSON-escaped here) or else the gateway's own."""
    text = json.dumps(message) if message is not None else "$context.error.messageString"
    return {"application/json": '{"error":' + json.dumps(code) + ',"message":' + text + "}"}


class RestApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        routes: list[tuple[FunctionSpec, Route]],
        functions: Functions,
        auth: Auth,
    ) -> None:
        super().__init__(scope, construct_id)
        self.authorizer = auth.authorizer(self, "Authorizer")
        access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=Settings.of(self).removal_policy,  # retained unless a dev stack
        )
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name="turnstile",
            description="turnstile HTTP API (see README and /openapi.json)",
            cloud_watch_role=True,
            default_method_options=apigw.MethodOptions(
                authorizer=self.authorizer,
                authorization_type=apigw.AuthorizationType.COGNITO,
            ),
            deploy_options=apigw.StageOptions(
                stage_name=Settings.of(self).stage,
                throttling_rate_limit=config.API_RATE_LIMIT,
                throttling_burst_limit=config.API_BURST_LIMIT,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                metrics_enabled=True,
                tracing_enabled=True,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
        )
        self.validator = self.api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        for name, response_type, code, status, message in GATEWAY_ERRORS:
            self.api.add_gateway_response(
                name,
                type=response_type,
                status_code=status,
                templates=gateway_error(code, message),
            )
        acknowledge(
            self.api,
            "APIG3",
            "Stage throttling bounds the request rate; a WAF web ACL carries account-specific "
            "rules and is attached per deployment (see README, Deploy).",
        )
        acknowledge(
            self.api,
            "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs]",
            "API Gateway's account-wide logging role needs exactly this AWS-maintained policy "
            "to write the access logs APIG1 asks for.",
        )
        integrations: dict[str, apigw.LambdaIntegration] = {}
        for spec, route in routes:
            integration = integrations.setdefault(
                spec.name, apigw.LambdaIntegration(functions.alias(spec.name))
            )
            self._add_method(route, integration)

    def _add_method(self, route: Route, integration: apigw.LambdaIntegration) -> None:
        resource = self.api.root.resource_for_path(route.path)
        # Headers are declared but not required here: a missing If-Match must reach the
        # function, which answers 428 as the contract says (the gateway would say 400).
        options: dict[str, Any] = {
            "operation_name": route.operation,
            "request_parameters": {f"method.request.header.{name}": False for name in route.headers}
            or None,
        }
        if route.body is not None:
            model = self.api.add_model(
                f"{route.operation.title().replace('_', '')}Body",
                content_type="application/json",
                schema=json_schema(route.body.model_json_schema()),
            )
            options["request_models"] = {"application/json": model}
            options["request_validator"] = self.validator
        resource.add_method(route.method, integration, **options)
