"""The REST API, built from the route declarations in ``service.api.routes``.

Each route becomes a method with a Lambda proxy integration; a route with a body gets a request
model (its pydantic model's JSON Schema, as draft 4) and a validator, so API Gateway refuses a
malformed body before a Lambda runs. The gateway's own error answers are rewritten to the
contract's ``{"error", "message"}`` shape.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.functions import Functions
from infra.nag import acknowledge
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


def _gateway_error(code: str) -> dict[str, str]:
    return {"application/json": '{"error":"' + code + '","message":$context.error.messageString}'}


class RestApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        routes: list[tuple[FunctionSpec, Route]],
        functions: Functions,
    ) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(self, "AccessLogs", retention=logs.RetentionDays.ONE_MONTH)
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name="turnstile",
            description="turnstile HTTP API (see README and /openapi.json)",
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name="v1",
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
        # API Gateway answers an unknown path with 403 "Missing Authentication Token"; say 404.
        for name, response_type, code, status in (
            ("BodyInvalid", apigw.ResponseType.BAD_REQUEST_BODY, "VALIDATION_ERROR", None),
            ("UnknownRoute", apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN, "NOT_FOUND", "404"),
            ("Throttled", apigw.ResponseType.THROTTLED, "THROTTLED", None),
            ("Default4xx", apigw.ResponseType.DEFAULT_4_XX, "BAD_REQUEST", None),
            ("Default5xx", apigw.ResponseType.DEFAULT_5_XX, "INTERNAL", None),
        ):
            self.api.add_gateway_response(
                name, type=response_type, status_code=status, templates=_gateway_error(code)
            )
        acknowledge(
            self.api,
            "APIG3",
            "Stage throttling bounds the request rate; a WAF web ACL carries account-specific "
            "rules and is attached per deployment (see README, Deploy).",
        )
        acknowledge(
            self.api,
            "APIG4",
            "The v1 contract (API.md) is an open demonstration API without callers' identities; "
            "front it with an IAM or Cognito authorizer before exposing it (see README, Deploy).",
        )
        acknowledge(
            self.api,
            "COG4",
            "Same as APIG4: authorization is deliberately left to the deployment, see README.",
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
                spec.name, apigw.LambdaIntegration(functions[spec.name])
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
