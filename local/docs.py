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

The document is the contract, so it must validate as OpenAPI 3.1: every ``$ref`` resolves and
no component schema is left that nothing refers to (:func:`prune_schemas` drops Powertools'
validation-error schemas and anything else no operation reaches). Its one server is ``/``, a
URL relative to where the document was fetched from, so the document never repeats a caller's
``Host`` header and is the same bytes for every caller: the bridge builds it once per process.
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
from service.api.routes import API_VERSION

TITLE = "turnstile"
VERSION = API_VERSION  # the HTTP API's version (CHANGELOG.md follows it)
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
_SCHEMA_REF = "#/components/schemas/"
# The one server: relative to the document's own URL (OpenAPI 3.1, "Server Object").
SERVER_URL = "/"


def document(server_url: str = SERVER_URL) -> dict[str, Any]:
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
    prune_schemas(merged)
    return merged


def _refs(node: Any) -> set[str]:
    """The component schema names ``node`` refers to directly (``$ref`` anywhere inside it)."""
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_SCHEMA_REF):
            found.add(ref.removeprefix(_SCHEMA_REF))
        for value in node.values():
            found |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= _refs(value)
    return found


def prune_schemas(document: dict[str, Any]) -> list[str]:
    """Drop every component schema that no operation reaches, directly or through other schemas
    (Powertools' 422 schemas once their responses are gone, among them); the names dropped, sorted.
    """
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    outside = {key: value for key, value in document.items() if key != "components"}
    components = {k: v for k, v in document.get("components", {}).items() if k != "schemas"}
    reached: set[str] = set()
    frontier = _refs(outside) | _refs(components)
    while frontier:
        name = frontier.pop()
        if name in reached or name not in schemas:
            continue
        reached.add(name)
        frontier |= _refs(schemas[name])
    dropped = sorted(set(schemas) - reached)
    for name in dropped:
        del schemas[name]
    return dropped


def document_bytes() -> bytes:
    """The served document as JSON (what ``GET /openapi.json`` answers)."""
    return json.dumps(document()).encode("utf-8")


def swagger_page(spec_json: bytes | None = None) -> str:
    """Swagger UI on the document (``spec_json``: its JSON if already built)."""
    assets = Path(event_handler.__file__).parent / "openapi" / "swagger_ui"
    built = spec_json if spec_json is not None else document_bytes()
    spec = built.decode("utf-8").replace("</", "<\\/")
    return generate_swagger_html(
        spec,
        (assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8"),
        (assets / "swagger-ui.min.css").read_text(encoding="utf-8"),
        "",
        None,
    )
