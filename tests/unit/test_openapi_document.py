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
    assert links["reserve"]["confirm_reservation"]["parameters"] == {
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


# -- every answer typed, names a client reads well, a version (issue 40 items 2, 3, 6) ---------

SCHEMAS = "#/components/schemas/"

# What each route's success sends besides its body, as the handlers answer it
# (``resolver.created``/``ok``/``accepted``; ``Idempotent-Replayed`` on a keyed route's replay).
SUCCESS_HEADERS = {
    "create_product": {"ETag", "Location", "Idempotent-Replayed"},
    "get_product": {"ETag"},
    "update_product": {"ETag"},
    "restock": {"ETag"},
    "purchase": {"ETag", "Idempotent-Replayed"},
    "acquire_lock": {"Location"},
    "top_up_wallet": {"Location", "Idempotent-Replayed"},
    "create_inventory": {"Location"},
    "reserve": {"Location"},
    "create_event": {"ETag", "Location", "Idempotent-Replayed"},
    "get_event": {"ETag"},
    "register": {"Location", "Idempotent-Replayed"},
    "request_registration": {"Location", "Idempotent-Replayed"},
}


def component(document: dict[str, Any], schema: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The component a ``$ref`` schema names, and the component."""
    ref = schema.get("$ref", "")
    assert ref.startswith(SCHEMAS), schema
    name = ref.removeprefix(SCHEMAS)
    found: dict[str, Any] = document["components"]["schemas"][name]
    return name, found


def success_of(document: dict[str, Any], route: routes.Route) -> dict[str, Any]:
    found: dict[str, Any] = operation(document, route)["responses"][str(route.status)]
    return found


@pytest.mark.parametrize(
    "route", [r for r in routes.ROUTES if r.status != 204], ids=lambda r: r.operation
)
def test_every_success_with_a_body_declares_a_named_object_schema(document, route):
    # a generated client types the answer: not {"title": "Return"} (Any)
    schema = success_of(document, route)["content"]["application/json"]["schema"]
    name, found = component(document, schema)
    assert found["type"] == "object" and found["properties"] and found["required"], name
    assert found.get("additionalProperties") is False, name


@pytest.mark.parametrize("route", routes.ROUTES, ids=lambda r: r.operation)
def test_every_success_declares_exactly_the_headers_it_sends(document, route):
    declared = set(success_of(document, route).get("headers", {}))
    assert declared == SUCCESS_HEADERS.get(route.operation, set())


def error_schema(document: dict[str, Any], route: routes.Route) -> tuple[str, dict[str, Any]]:
    schemas = {
        json.dumps(response["content"]["application/json"]["schema"])
        for status, response in operation(document, route)["responses"].items()
        if int(status) >= 400
    }
    (one,) = schemas  # one error schema per route, on every error status
    return component(document, json.loads(one))


@pytest.mark.parametrize("route", routes.ROUTES, ids=lambda r: r.operation)
def test_every_route_types_its_error_codes_as_an_enum_of_exactly_the_codes_it_answers(
    document, route
):
    name, schema = error_schema(document, route)
    assert set(schema["required"]) == {"error", "message"}
    _, codes = component(document, schema["properties"]["error"])
    examples = {
        code
        for status, response in operation(document, route)["responses"].items()
        if int(status) >= 400
        for code in response["content"]["application/json"]["examples"]
    }
    assert codes["type"] == "string" and set(codes["enum"]) == examples, name
    # the details are declared properties, never free-form additional ones
    assert schema.get("additionalProperties") is False, name


@pytest.mark.parametrize(
    ("operation_id", "details"),
    [
        ("update_product", {"currentVersion"}),
        ("purchase", {"available"}),
        ("reserve", {"requested", "status", "unitsCreated", "units", "retryAfterSeconds"}),
        ("acquire_lock", {"owner", "expiresAt", "retryAfterSeconds", "queuePosition"}),
        ("renew_lock", {"currentFence"}),
        ("register", {"capacity", "registered"}),
    ],
)
def test_the_details_a_code_carries_are_typed_properties_of_the_routes_error(
    document, operation_id, details
):
    (route,) = [r for r in routes.ROUTES if r.operation == operation_id]
    _, schema = error_schema(document, route)
    properties = schema["properties"]
    assert details <= set(properties), sorted(properties)
    assert all("type" in properties[name] or "$ref" in properties[name] for name in details)


def test_request_bodies_are_named_as_requests_and_no_schema_is_both(document):
    requests_: set[str] = set()
    answers: set[str] = set()
    for route in routes.ROUTES:
        op = operation(document, route)
        if "requestBody" in op:
            body = op["requestBody"]["content"]["application/json"]["schema"]
            requests_.add(component(document, body)[0])
        content = success_of(document, route).get("content") or {}
        if content:
            answers.add(component(document, content["application/json"]["schema"])[0])
    assert requests_ and all(name.endswith("Request") for name in requests_), sorted(requests_)
    assert not any(name.endswith("Request") for name in answers), sorted(answers)
    assert requests_.isdisjoint(answers)


VERBS = {
    "acquire", "confirm", "count", "create", "get", "list", "purchase", "register",
    "release", "renew", "request", "reserve", "restock", "top", "unregister", "update",
}  # fmt: skip


def test_operation_ids_read_as_verbs_and_name_what_they_act_on(document):
    ids = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids)) == len(routes.ROUTES)
    assert [i for i in ids if i.split("_")[0] not in VERBS] == []
    # a bare "release" or "confirm" would read as the lock's in a client: say whose
    assert {"release", "confirm"}.isdisjoint(ids)


def test_info_version_is_the_api_version_the_changelog_names_last(document):
    # The newest "(HTTP API x.y.z)" heading of CHANGELOG.md names the API version the document
    # carries: an API change recorded there bumps the version in the same commit.
    from pathlib import Path

    changelog = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text()
    named = re.findall(r"^### .*\(HTTP API (\d+\.\d+\.\d+)\)", changelog, flags=re.MULTILINE)
    assert named, "CHANGELOG.md names no HTTP API version"
    assert document["info"]["version"] == routes.API_VERSION == named[0]


def test_every_example_is_valid_against_the_schema_it_illustrates(document):
    # a generated client (or a reader) sees examples as answers: none may break its schema
    import jsonschema  # type: ignore[import-untyped]  # (no stubs installed)

    invalid = []
    for route in routes.ROUTES:
        for status, response in operation(document, route)["responses"].items():
            content = (response.get("content") or {}).get("application/json")
            if not content:
                continue
            schema = {**content["schema"], "components": document["components"]}
            for name, example in content.get("examples", {}).items():
                validator = jsonschema.Draft202012Validator(schema)
                errors = [error.message for error in validator.iter_errors(example["value"])]
                if errors:
                    invalid.append(f"{route.operation} {status} {name}: {errors}")
    assert invalid == []


def test_no_schema_carries_pydantic_constraint_names_instead_of_json_schema_keywords(document):
    # pydantic writes a constraint on an optional union as its own name ("ge": 2), which every
    # validator and generator ignores: the bound must be JSON Schema's ("minimum": 2)
    def keys(node: Any) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {key for value in node.values() for key in keys(value)}
        if isinstance(node, list):
            return {key for value in node for key in keys(value)}
        return set()

    assert keys(document["components"]["schemas"]) & {"ge", "gt", "le", "lt"} == set()
