"""The local API's documentation: one OpenAPI document merged from every function's resolver
(Powertools' ``OpenAPIMerge``), and Swagger UI on it (Powertools' page and bundled assets, so it
works offline).

Each function's document comes from its own resolver (``app.get_openapi_schema()``), generated
from the route declarations. Powertools documents a 422 "Validation Error" on every validated
route; turnstile answers validation errors with 400 (the contract), and 422 only for a reused
``Idempotency-Key``, so that default entry and its schemas are dropped.

Every operation needs a Cognito ID token (docs/identity.md): the merged document declares one
security scheme, ``SECURITY_SCHEME``, and requires it document-wide (``OpenAPIMerge``'s
``security_schemes`` / ``security``), so it applies to every operation and to routes added later.
``GET /openapi.json`` is served by the local bridge, not by a function, so it is not an operation
of the document and stays open.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import aws_lambda_powertools.event_handler as event_handler
from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer, Server
from aws_lambda_powertools.event_handler.openapi.swagger_ui import generate_swagger_html

from service import catalog

TITLE = "turnstile"
VERSION = "1.0.0"
# HTTP bearer with a JWT format rather than an apiKey named Authorization: the token is a JWT in
# the standard Authorization header, and "Bearer <token>" (what bearer-aware clients and Swagger
# UI send) is accepted by API Gateway's Cognito authorizer and the local bridge alike. The raw
# token, API Gateway's other form, is accepted too; the description says so, as the scheme types
# cannot express "prefix optional".
SECURITY_SCHEME = "cognitoIdToken"
_SECURITY_SCHEMES = {
    SECURITY_SCHEME: HTTPBearer(
        bearerFormat="JWT",
        description=(
            "An ID token of the stack's Cognito user pool, as `Authorization: Bearer <token>` "
            "or the raw token (docs/identity.md). Locally: `make token USER=alice` prints one."
        ),
    )
}
_POWERTOOLS_422 = "Validation Error"
_POWERTOOLS_SCHEMAS = ("HTTPValidationError", "ValidationError")


def document(server_url: str = "/") -> dict[str, Any]:
    merge = OpenAPIMerge(
        title=TITLE,
        version=VERSION,
        servers=[Server(url=server_url)],
        security_schemes=dict(_SECURITY_SCHEMES),
        security=[{SECURITY_SCHEME: []}],
        on_conflict="error",
    )
    for spec in catalog.API_FUNCTIONS:
        app = importlib.import_module(spec.module).app
        merge.add_schema(app.get_openapi_schema(title=TITLE, version=VERSION))
    merged: dict[str, Any] = json.loads(merge.get_openapi_json_schema())
    for item in merged.get("paths", {}).values():
        for operation in item.values():
            responses = operation.get("responses", {})
            for status in ("422", 422):
                if responses.get(status, {}).get("description") == _POWERTOOLS_422:
                    del responses[status]
    if not any(name in json.dumps(merged["paths"]) for name in _POWERTOOLS_SCHEMAS):
        schemas = merged.get("components", {}).get("schemas", {})
        for name in _POWERTOOLS_SCHEMAS:
            schemas.pop(name, None)
    return merged


def swagger_page(server_url: str) -> str:
    assets = Path(event_handler.__file__).parent / "openapi" / "swagger_ui"
    spec = json.dumps(document(server_url)).replace("</", "<\\/")
    return generate_swagger_html(
        spec,
        (assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8"),
        (assets / "swagger-ui.min.css").read_text(encoding="utf-8"),
        "",
        None,
    )
