"""Every route of the original HTTP contract is served and in the OpenAPI document.

The original contract is the document the service was first specified by; the repository's
OpenAPI document must keep satisfying it. Its route table travels with the repository
(``contract_routes.json``), so these tests run in any clone. Where that original document sits
beside the checkout (``CONTRACT``), ``test_the_snapshot_is_the_contracts_route_table`` checks the
snapshot still equals its route table; elsewhere that one test is skipped.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from service.api import routes

CONTRACT = Path(__file__).resolve().parents[3] / "shared" / "API.md"
SNAPSHOT = Path(__file__).with_name("contract_routes.json")
ROUTE_ROW = r"\| `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`"


def contract_routes() -> set[tuple[str, str]]:
    """The contract's (method, path) pairs, from the snapshot in the repository."""
    data = json.loads(SNAPSHOT.read_text())
    return {(route["method"].lower(), route["path"]) for route in data["routes"]}


def test_the_snapshot_is_the_contracts_route_table():
    # Given the shared contract beside the repository (a checkout of the project has it)
    if not CONTRACT.exists():
        pytest.skip(f"{CONTRACT} is not beside the repository: the snapshot stands for it")
    in_contract = {(m.lower(), p) for m, p in re.findall(ROUTE_ROW, CONTRACT.read_text())}
    # Then the snapshot the other tests use lists exactly its routes
    assert in_contract == contract_routes()


def test_every_contract_route_is_in_the_openapi_document(api_url):
    routes = contract_routes()
    assert len(routes) >= 19  # the contract lists 19; fewer means the parsing broke
    document = requests.get(f"{api_url}/openapi.json", timeout=10).json()
    served = {(method, path) for path, item in document["paths"].items() for method in item}
    assert routes - served == set()


def test_the_served_document_is_open_and_requires_an_id_token_everywhere_else(api_url):
    # GET /openapi.json needs no token (it is the one route without one, docs/identity.md)
    response = requests.get(f"{api_url}/openapi.json", timeout=10)
    assert response.status_code == 200, response.text
    document = response.json()
    (scheme,) = document["security"]
    (name,) = scheme
    assert document["components"]["securitySchemes"][name]["scheme"] == "bearer"
    for route in routes.ROUTES:  # the declarations, so this runs without the contract beside
        method, path = route.method.lower(), route.path
        operation = document["paths"][path][method]
        assert operation.get("security", document["security"]), (method, path)
        for status, code in (("401", "UNAUTHORIZED"), ("403", "FORBIDDEN")):
            examples = operation["responses"][status]["content"]["application/json"]["examples"]
            assert code in examples, (method, path, status)


def minimal(schema: dict[str, Any], document: dict[str, Any]) -> Any:
    """The smallest value that satisfies ``schema`` (the subset turnstile's schemas use)."""
    if "$ref" in schema:
        return minimal(document["components"]["schemas"][schema["$ref"].split("/")[-1]], document)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        properties = schema["properties"]
        return {
            name: minimal(properties[name], document) for name in schema.get("required", [])
        } or {name: minimal(sub, document) for name, sub in list(properties.items())[:1]}
    if kind == "string":
        return "a" * max(1, schema.get("minLength", 1))
    if kind == "integer":  # OpenAPI may render an integer bound as 1.0
        return int(schema.get("minimum", 1))
    if kind == "number":
        return schema.get("minimum", 1)
    raise AssertionError(f"no minimal value for {schema}")


def test_every_contract_route_answers_unknown_ids_in_the_contract_shape(api_url, admin):
    # A well-formed request naming ids that do not exist reaches the domain code of every route
    # (sent by an administrator, whom no route refuses): never a 5xx, and every refusal in the
    # {"error","message"} shape.
    document = requests.get(f"{api_url}/openapi.json", timeout=10).json()
    for method, path in sorted(contract_routes()):
        operation = document["paths"][path][method]
        body_schema = (
            operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        ).get("schema")
        kwargs: dict[str, Any] = {"json": minimal(body_schema, document)} if body_schema else {}
        url = api_url + re.sub(r"\{[^}]+\}", f"nope-{uuid.uuid4().hex[:8]}", path)
        response = admin.request(method, url, timeout=10, **kwargs)
        assert response.status_code < 500, (method, path, response.text)
        if response.status_code >= 400:
            assert set(response.json()) >= {"error", "message"}, (method, path)
            assert response.json()["error"] not in ("VALIDATION_ERROR", "BAD_JSON"), (
                method,
                path,
                response.text,
            )
