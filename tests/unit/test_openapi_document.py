"""An audit's document findings: what the OpenAPI document promises is what the server does."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from local import docs
from service import policy
from service.api import keyed, routes


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return docs.document("http://localhost")


def operation(document: dict[str, Any], route: routes.Route) -> dict[str, Any]:
    found: dict[str, Any] = document["paths"][route.path][route.method.lower()]
    return found


@pytest.mark.parametrize("route", [r for r in routes.ROUTES if r.status == 204], ids=str)
def test_a_204_is_documented_without_a_body(document, route):
    success = operation(document, route)["responses"]["204"]
    assert not success.get("content"), success


def test_patch_declares_its_required_if_match_and_the_428_without_it(document):
    (route,) = [r for r in routes.ROUTES if r.method == "PATCH"]
    patch = operation(document, route)
    (header,) = [p for p in patch["parameters"] if p["in"] == "header"]
    assert header["name"].lower() == "if-match" and header["required"] is True
    assert header["schema"]["type"] == "string" and "pattern" in header["schema"]
    examples = patch["responses"]["428"]["content"]["application/json"]["examples"]
    assert "PRECONDITION_REQUIRED" in examples
    assert (
        "VERSION_MISMATCH" in patch["responses"]["412"]["content"]["application/json"]["examples"]
    )


def test_create_operations_link_to_the_operations_using_their_ids(document):
    links = {
        route.operation: operation(document, route)["responses"][str(route.status)].get("links")
        for route in routes.ROUTES
        if route.creates
    }
    assert links["create_product"]["purchase"] == {
        "operationId": "purchase",
        "parameters": {"productId": "$request.body#/productId"},
    }
    assert links["reserve"]["confirm"]["parameters"] == {
        "sku": "$request.path.sku",
        "reservationId": "$response.body#/reservationId",
    }
    assert links["register"]["unregister"]["parameters"]["userId"] == "$response.body#/userId"
    assert "get_registration_request" in links["request_registration"]
    assert "get_inventory" in links["create_inventory"] and "get_event" in links["create_event"]
    assert {"renew_lock", "release_lock"} <= set(links["acquire_lock"])
    assert "get_wallet" in links["top_up_wallet"]
    # every link names an operation of the document, with every path parameter it takes
    operations = {
        op["operationId"]: op for item in document["paths"].values() for op in item.values()
    }
    for of_route in links.values():
        for link in (of_route or {}).values():
            target = operations[link["operationId"]]
            wanted = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}
            assert set(link["parameters"]) == wanted


@pytest.mark.parametrize("route", routes.ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_operation_says_who_may_call_it(document, route):
    who = policy.access_of(route)
    assert who is not None
    assert operation(document, route)["description"] == f"Who may call: {who.value}."


KEYED = [r for r in routes.ROUTES if r.idempotent]


def idempotency_key(document: dict[str, Any], route: routes.Route) -> list[dict[str, Any]]:
    return [
        p
        for p in operation(document, route).get("parameters", [])
        if p["in"] == "header" and p["name"].lower() == "idempotency-key"
    ]


def test_six_routes_take_an_idempotency_key():
    # docs/http-api.md names them: POST /products, purchases, the three event POSTs, top-ups
    assert len(KEYED) == 6


@pytest.mark.parametrize("route", KEYED, ids=lambda r: f"{r.method} {r.path}")
def test_a_keyed_route_declares_its_optional_idempotency_key_as_the_server_reads_it(
    document, route
):
    (header,) = idempotency_key(document, route)
    assert header["required"] is False
    schema = header["schema"]
    assert schema["type"] == "string"
    assert schema["minLength"] == 1 and schema["maxLength"] == 128
    # the pattern accepts exactly the characters the server's own check accepts
    pattern = re.compile(schema["pattern"])
    for code in range(256):
        assert bool(pattern.search(chr(code))) == bool(keyed.KEY_PATTERN.fullmatch(chr(code)))
    assert pattern.search("!" * 128) and not pattern.search("a b")
    # it says what a replay answers, and the answers a key can bring are documented
    assert "Idempotent-Replayed" in header["description"]
    responses = operation(document, route)["responses"]
    assert "IDEMPOTENCY_KEY_REUSED" in responses["422"]["content"]["application/json"]["examples"]
    assert "IDEMPOTENCY_IN_PROGRESS" in responses["409"]["content"]["application/json"]["examples"]
    assert "BAD_REQUEST" in responses["400"]["content"]["application/json"]["examples"]


@pytest.mark.parametrize("route", KEYED, ids=lambda r: f"{r.method} {r.path}")
def test_a_keyed_routes_success_declares_the_idempotent_replayed_header(document, route):
    success = operation(document, route)["responses"][str(route.status)]
    replayed = success["headers"]["Idempotent-Replayed"]
    assert replayed["schema"] == {"type": "string", "enum": ["true"]}
    assert replayed["description"]


@pytest.mark.parametrize(
    "route", [r for r in routes.ROUTES if not r.idempotent], ids=lambda r: f"{r.method} {r.path}"
)
def test_a_route_without_keys_declares_no_idempotency_key(document, route):
    # the server answers the header there with 400: the document must not invite it
    assert idempotency_key(document, route) == []
    assert "Idempotent-Replayed" not in operation(document, route)["responses"][
        str(route.status)
    ].get("headers", {})


# -- the document validates, and is the same for every caller (issue: the contract) -------------


def test_the_document_validates_as_openapi_3_1(document):
    # A maintained validator (openapi-spec-validator): a dangling $ref fails here, as the
    # unused ResponseValidationError schema's reference to ValidationError once did.
    from openapi_spec_validator import OpenAPIV31SpecValidator

    errors = [str(error)[:200] for error in OpenAPIV31SpecValidator(document).iter_errors()]
    assert document["openapi"].startswith("3.1") and errors == []


def test_the_document_keeps_no_schema_that_nothing_refers_to(document):
    # prune_schemas is the rule; run on the served document again it finds nothing to drop
    assert docs.prune_schemas(document) == []
    assert "ResponseValidationError" not in document["components"]["schemas"]


def test_prune_schemas_drops_unreached_schemas_and_keeps_those_reached_through_others():
    ref = "#/components/schemas/"
    spec: dict[str, Any] = {
        "paths": {"/a": {"get": {"responses": {"200": {"$ref": ref + "A"}}}}},
        "components": {
            "schemas": {
                "A": {"properties": {"b": {"$ref": ref + "B"}}},
                "B": {"type": "string"},
                "Unused": {"properties": {"c": {"$ref": ref + "C"}}},
                "C": {"type": "integer"},
            }
        },
    }
    assert docs.prune_schemas(spec) == ["C", "Unused"]
    assert set(spec["components"]["schemas"]) == {"A", "B"}


def test_the_bridge_serves_one_document_built_once_whatever_the_host(monkeypatch):
    # Given a bridge with no functions behind it (the document comes from the declarations)
    from werkzeug.test import Client

    from local import bridge as local_bridge

    built: list[int] = []
    real = docs.document_bytes

    def counting() -> bytes:
        built.append(1)
        return real()

    monkeypatch.setattr(docs, "document_bytes", counting)
    client = Client(local_bridge.Bridge(specs=(), functions={}))
    # When callers naming different hosts ask for the document and the Swagger page
    first = client.get("/openapi.json", headers={"Host": "evil.example:1"})
    second = client.get("/openapi.json", headers={"Host": "localhost:3000"})
    page = client.get("/swagger", headers={"Host": "other.example"})
    # Then both callers get the same bytes, built once, naming no caller's host
    assert first.status_code == second.status_code == page.status_code == 200
    assert first.data == second.data and len(built) == 1
    served = json.loads(first.data)
    assert served["servers"] == [{"url": docs.SERVER_URL}]
    assert b"evil.example" not in first.data and b"other.example" not in page.data
