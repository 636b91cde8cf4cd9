"""The API layer on Powertools' resolver: strict models on every route, refusals before any
domain code, per-thread request state, OpenAPI from the resolvers. (What the stack's modules
import at deploy time is checked in tests/infra/test_deploy_time_imports.py: importing them
starts Node.)

No database: every request here is refused before a table is touched (the functions have no
table variables, so a request that got through to a domain would answer 500, not 4xx)."""

from __future__ import annotations

import importlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from local import docs
from service import catalog
from service.api import models, routes
from service.api.errors import STATUS
from service.api.resolver import Resolver
from tests.helpers import proxy_event

ROOT = Path(__file__).resolve().parents[2]
BODY_ROUTES = [route for route in routes.ROUTES if route.body is not None]


def handler_of(route: routes.Route) -> Any:
    return importlib.import_module(catalog.spec(route.function).module).handler


def minimal(model: type[models.Body]) -> dict[str, Any]:
    """A valid body: every required field at its smallest allowed value."""
    body: dict[str, Any] = {}
    for name, schema in model.model_json_schema()["properties"].items():
        if name not in model.model_json_schema().get("required", []):
            continue
        if schema["type"] == "string":
            body[name] = "a" * schema.get("minLength", 1)
        else:
            body[name] = schema.get("minimum", 1)
    return body or {"name": "x"}  # UpdateProductRequest: one of its optional fields


def event_for(route: routes.Route, body: str | None, **overrides: Any) -> dict[str, Any]:
    params = {name: f"id-{name}" for name in route.params}
    path = route.path
    for name, value in params.items():
        path = path.replace("{" + name + "}", value)
    headers = {"Content-Type": "application/json"}
    if "If-Match" in route.headers:
        headers["If-Match"] = '"1"'
    event = proxy_event(
        route.method, route.path, path, body=body, params=params or None, headers=headers
    )
    event.update(overrides)
    return event


def answer(route: routes.Route, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = handler_of(route)(event, None)
    return response["statusCode"], json.loads(response["body"])


def integer_fields(model: type[models.Body]) -> list[str]:
    return [
        name
        for name, schema in model.model_json_schema()["properties"].items()
        if schema.get("type") == "integer"
    ]


CASES = [
    (route, field)
    for route in BODY_ROUTES
    for field in integer_fields(route.body)  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("true", "VALIDATION_ERROR"),
        ('"3"', "VALIDATION_ERROR"),
        ("3.5", "VALIDATION_ERROR"),
        ("1e40", "VALIDATION_ERROR"),
        ("null", "VALIDATION_ERROR"),
        ("NaN", "BAD_JSON"),
        ("Infinity", "BAD_JSON"),
        ("1e400", "BAD_JSON"),
    ],
)
@pytest.mark.parametrize(("route", "field"), CASES, ids=[f"{r.operation}.{f}" for r, f in CASES])
def test_every_integer_field_of_every_route_is_strict(route, field, raw, code):
    body = json.dumps(minimal(route.body)).replace("}", f', "{field}": {raw}}}')
    body = body.replace("{, ", "{")
    status, answered = answer(route, event_for(route, body))
    assert (status, answered["error"]) == (400, code), answered


def test_an_integral_json_number_is_an_integer_in_every_integer_field():
    # JSON Schema's integer admits 29.0 (the document says integer): so does the server,
    # and a fraction is still refused (above)
    for route in BODY_ROUTES:
        for field in integer_fields(route.body):  # type: ignore[arg-type]
            valid = minimal(route.body)  # type: ignore[arg-type]
            value = valid.get(field, 1)
            as_float = {**valid, field: float(value)}
            parsed = route.body.model_validate(as_float)  # type: ignore[union-attr]
            assert getattr(parsed, field) == value and type(getattr(parsed, field)) is int
            assert route.body.model_json_schema()["properties"][field]["type"] == "integer"  # type: ignore[union-attr]


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda r: r.operation)
def test_every_body_refuses_unknown_fields_and_wrong_envelopes(route):
    valid = minimal(route.body)
    refusals: list[tuple[str | None, dict[str, Any], int, str | None]] = [
        (json.dumps({**valid, "extra": 1}), {}, 400, "VALIDATION_ERROR"),
        (json.dumps(valid), {"headers": {"Content-Type": "text/plain"}}, 415, None),
        (json.dumps(valid), {"headers": {}}, 415, None),
        # a multipart type without a boundary was a 500; another charset is not JSON
        (json.dumps(valid), {"headers": {"Content-Type": "multipart/form-data"}}, 415, None),
        (
            json.dumps(valid),
            {"headers": {"Content-Type": "application/json; charset=latin-1"}},
            415,
            None,
        ),
        (json.dumps({**valid, "pad": "x" * 17_000}), {}, 413, "PAYLOAD_TOO_LARGE"),
        ("{", {}, 400, "BAD_JSON"),
        (None, {}, 400, "BAD_JSON"),
    ]
    for body, overrides, status, code in refusals:
        got, answered = answer(route, event_for(route, body, **overrides))
        assert got == status, (body, overrides, answered)
        assert answered["error"] == (code or "UNSUPPORTED_MEDIA_TYPE")
        assert answered["message"]


@pytest.mark.parametrize(
    "route", [r for r in routes.ROUTES if r.body is None], ids=lambda r: r.operation
)
def test_a_body_sent_to_a_route_that_takes_none_is_400(route):
    status, answered = answer(route, event_for(route, '{"a": 1}'))
    assert (status, answered["error"]) == (400, "BAD_REQUEST")


@pytest.mark.parametrize("route", routes.ROUTES, ids=lambda r: r.operation)
def test_every_path_id_is_validated(route):
    if not route.params:
        pytest.skip("no path parameter")
    valid = json.dumps(minimal(route.body)) if route.body else None
    event = event_for(route, valid)
    event["path"] = event["path"].replace(f"id-{route.params[-1]}", "bad id!")
    status, answered = answer(route, event)
    assert (status, answered["error"]) == (400, "VALIDATION_ERROR")
    assert route.params[-1] in answered["message"]


def test_requests_served_at_once_from_threads_each_get_their_own_answer():
    # Powertools keeps the current event in class attributes; the resolver keeps it per thread.
    from service.handlers import products

    def unknown(i: int) -> str:
        event = proxy_event("GET", f"/nowhere/{i}", f"/nowhere/{i}")
        return json.loads(products.handler(event, None)["body"])["message"]

    with ThreadPoolExecutor(32) as pool:
        messages = list(pool.map(unknown, range(400)))
    assert messages == [f"no route for GET /nowhere/{i}" for i in range(400)]


def test_a_route_function_must_take_its_declared_body():
    app = Resolver("locks")

    def acquire_lock(resource: str, body: models.LockReleaseRequest) -> Any:
        raise AssertionError("never called")

    with pytest.raises(TypeError, match="LockAcquireRequest"):
        app.declared(acquire_lock)


def test_every_declared_route_is_served_by_its_function():
    for spec in catalog.API_FUNCTIONS:
        app = importlib.import_module(spec.module).app
        served = {(r.method, r.path) for r in app._static_routes + app._dynamic_routes}
        assert served == {(r.method, r.rule) for r in spec.routes()}, spec.name


def test_the_openapi_document_lists_every_status_a_route_can_answer_with_examples():
    document = docs.document("http://localhost")
    for route in routes.ROUTES:
        responses = document["paths"][route.path][route.method.lower()]["responses"]
        expected = {route.status, 400, 401, 403, 500, 503}  # 404: route.errors
        if route.body is not None:
            expected |= {413, 415}
        if route.idempotent:
            expected |= {409, 422}
        expected |= {STATUS[code] for code in route.errors}
        assert expected <= {int(status) for status in responses}, route.operation
        for status, response in responses.items():
            if int(status) >= 400:
                content = response["content"]["application/json"]
                assert content["examples"], (route.operation, status)
                for example in content["examples"].values():
                    assert STATUS[example["value"]["error"]] == int(status)
        if route.body is not None:
            body = document["paths"][route.path][route.method.lower()]["requestBody"]
            assert body["content"]["application/json"]["schema"]
    assert "HTTPValidationError" not in json.dumps(document)


def test_every_operation_documents_401_and_403_in_the_contract_shape():
    document = docs.document("http://localhost")
    for route in routes.ROUTES:
        responses = document["paths"][route.path][route.method.lower()]["responses"]
        for status, code in (("401", "UNAUTHORIZED"), ("403", "FORBIDDEN")):
            content = responses[status]["content"]["application/json"]
            name = "".join(part.title() for part in route.operation.split("_"))
            assert content["schema"] == {"$ref": f"#/components/schemas/{name}Error"}
            assert content["examples"][code]["value"]["error"] == code, route.operation
            assert content["examples"][code]["value"]["message"], route.operation


def test_the_document_requires_a_cognito_id_token_on_every_operation():
    # Given the merged document the local server serves at GET /openapi.json
    document = docs.document("http://localhost")
    # Then it declares one scheme: a JWT in Authorization, sent as "Bearer <token>" (or raw)
    schemes = document["components"]["securitySchemes"]
    assert schemes == {
        docs.SECURITY_SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": schemes[docs.SECURITY_SCHEME]["description"],
        }
    }
    assert "raw token" in schemes[docs.SECURITY_SCHEME]["description"]
    # required document-wide, and no operation opts out (an empty list would make it anonymous)
    assert document["security"] == [{docs.SECURITY_SCHEME: []}]
    operations = {
        (path, method.upper(), op["operationId"]): op
        for path, item in document["paths"].items()
        for method, op in item.items()
    }
    # (exactly the declared routes, each under its own path, method and operationId: a route
    # missing from the document, or one the document has and no declaration, fails here)
    assert set(operations) == {(r.path, r.method, r.operation) for r in routes.ROUTES}
    assert all(op.get("security", document["security"]) for op in operations.values())
    # and the document itself is not an operation of it: GET /openapi.json stays open.
    assert "/openapi.json" not in document["paths"]
