"""Every domain error code maps to a 4xx in the one place that maps codes (service.api.errors)."""

from __future__ import annotations

import importlib
import pkgutil

import service.domain
from service.api.errors import STATUS
from service.domain.errors import DomainError


def all_subclasses(cls: type[DomainError]) -> set[type[DomainError]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= all_subclasses(sub)
    return found


def domain_codes() -> set[str]:
    for module in pkgutil.iter_modules(service.domain.__path__):
        importlib.import_module(f"service.domain.{module.name}")
    return {error.code for error in all_subclasses(DomainError)}


def test_every_domain_error_has_a_client_status():
    codes = domain_codes()
    assert codes, "no domain errors found"
    missing = sorted(code for code in codes if code not in STATUS)
    assert missing == []
    # A domain refusal is about the request, never an outage: 4xx (or 502 for a failed upstream
    # the client may retry).
    assert all(400 <= STATUS[code] < 500 or STATUS[code] == 502 for code in codes)


def test_identity_errors_map_to_401_and_403():
    assert {"UNAUTHORIZED", "FORBIDDEN"} <= domain_codes()
    assert (STATUS["UNAUTHORIZED"], STATUS["FORBIDDEN"]) == (401, 403)


def test_every_code_the_http_layer_raises_has_a_status():
    # Every HttpError("CODE", ...) and refusal("CODE", ...) written in the API layer and the
    # handlers: a code missing from STATUS would answer 400 with an error log, never its status.
    import ast
    from pathlib import Path

    root = Path(service.domain.__path__[0]).parent
    codes: set[str] = set()
    for path in [*root.glob("api/*.py"), *root.glob("handlers/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None))
                in ("HttpError", "refusal")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                codes.add(node.args[0].value)
    assert {"BAD_REQUEST", "PRECONDITION_REQUIRED", "THROTTLED", "INTERNAL"} <= codes
    assert sorted(codes - set(STATUS)) == []


def test_a_throttle_the_library_did_not_retry_is_a_503_never_a_500():
    # An AWS error the library classified as retryable (a throttle or a connection it did not
    # retry itself) is an outage the client may retry, on every route and in the idempotency
    # middleware: 503 THROTTLED, not the 500 of a bug.
    from botocore.exceptions import ClientError

    from service.api import keyed, resolver
    from turnstile_ddb import errors

    cause = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "GetItem")
    exc = errors.AwsRetryable(cause, "ThrottlingException", "slow", "GetItem")
    response = resolver.answer(exc)
    assert response is not None and isinstance(response.body, dict)
    assert (response.status_code, response.body["error"]) == (503, "THROTTLED")
    assert any(isinstance(exc, kind) for kind in keyed.OUTAGES)
