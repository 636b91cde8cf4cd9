"""The OpenAPI 3 document, generated from the same route declarations that build the API."""

from __future__ import annotations

from typing import Any

from service import catalog
from service.api.http import STATUS

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
}


def _operation(spec: catalog.FunctionSpec, route: Any) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in route.params
    ]
    parameters += [
        {"name": name, "in": "header", "required": False, "schema": {"type": "string"}}
        for name in route.headers
    ]
    if route.idempotent:
        parameters.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "Retries with the same key get the first answer back.",
                "schema": {"type": "string", "maxLength": 128},
            }
        )
    responses: dict[str, Any] = {str(route.success): {"description": "success"}}
    by_status: dict[int, list[str]] = {}
    for code in (*route.errors, "VALIDATION_ERROR", "BAD_JSON"):
        by_status.setdefault(STATUS[code], []).append(code)
    for status, codes in sorted(by_status.items()):
        responses[str(status)] = {
            "description": " or ".join(sorted(set(codes))),
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    operation: dict[str, Any] = {
        "operationId": route.action.__name__,
        "summary": route.summary,
        "tags": [spec.name],
        "parameters": parameters,
        "responses": responses,
    }
    if route.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": route.body}},
        }
    return operation


def document(server_url: str | None = None) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for spec, route in catalog.api_routes():
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(spec, route)
    doc: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "turnstile", "version": "1.0.0"},
        "paths": paths,
        "components": {"schemas": {"Error": ERROR_SCHEMA}},
    }
    if server_url:
        doc["servers"] = [{"url": server_url}]
    return doc
