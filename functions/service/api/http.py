"""API Gateway REST proxy events in, proxy responses out.

Every route is declared once (:class:`Route`): its method and path template, the schema of its body,
and the function that serves it. The same declarations drive the API Gateway resources, methods and
request models in ``infra``, the OpenAPI document, and the local HTTP bridge.

:class:`Api` is the only place where errors become status codes (:data:`STATUS`). It refuses what a
client got wrong before any domain code runs: unknown route (404/405), body too large (413), wrong
content type (415), unparsable JSON or a body that breaks its schema (400). A client error never
becomes a 5xx; a 5xx means an outage (503, ``Retry-After`` where a retry helps) or a bug (500).

It is also where ``Idempotency-Key`` is honoured for the routes that accept it: the first request
with a key runs, every retry of it gets the first answer back (see ``turnstile.idempotency``).

It holds no per-request state, so one instance serves many threads at once (the local bridge).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from service import config
from service.api import schema
from service.domain.errors import DomainError
from turnstile import idempotency, metrics, retry, transact

logger = Logger(service="turnstile")

STATUS: dict[str, int] = {
    "BAD_REQUEST": 400,
    "BAD_JSON": 400,
    "VALIDATION_ERROR": 400,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "ALREADY_EXISTS": 409,
    "OUT_OF_STOCK": 409,
    "EVENT_FULL": 409,
    "ALREADY_REGISTERED": 409,
    "CONFLICT": 409,
    "IDEMPOTENCY_IN_PROGRESS": 409,
    "EXPIRED": 409,
    "ALREADY_CONFIRMED": 409,
    "VERSION_MISMATCH": 412,
    "PAYLOAD_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "IDEMPOTENCY_KEY_REUSED": 422,
    "PRECONDITION_REQUIRED": 428,
    "INTERNAL": 500,
    "THROTTLED": 503,
    "OUTCOME_UNKNOWN": 503,
    "LOCKED": 409,
    "LOCK_LOST": 409,
    "PAYMENT_FAILED": 502,
}

# 5xx answers that promise nothing was applied: the Idempotency-Key's claim is given back.
RELEASED_OUTAGES = frozenset({"THROTTLED", "PAYMENT_FAILED"})

IDEMPOTENCY_KEY_PATTERN = re.compile(r"[\x21-\x7e]{1,128}")  # used with fullmatch


class HttpError(Exception):
    """A refusal decided by the HTTP layer itself (malformed request, missing header...)."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    params: Mapping[str, str]
    headers: Mapping[str, str]  # lower-cased names
    body: Any
    request_id: str
    claim: idempotency.Claim | None = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    action: Callable[[Request], Response]
    summary: str
    body: schema.Schema | None = None
    success: int = 200
    errors: tuple[str, ...] = ()
    idempotent: bool = False
    headers: tuple[str, ...] = ()

    @property
    def params(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"error": code, "message": message, **details}


def to_proxy(response: Response) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", **response.headers}
    body = "" if response.body is None else json.dumps(response.body, separators=(",", ":"))
    if response.body is None:
        headers.pop("Content-Type")
    return {
        "statusCode": response.status,
        "headers": headers,
        "body": body,
        "isBase64Encoded": False,
    }


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError("number out of range")
    return value


def parse_json(raw: str) -> Any:
    try:
        return json.loads(raw, parse_constant=_reject_constant, parse_float=_parse_float)
    except (ValueError, RecursionError) as exc:
        raise HttpError("BAD_JSON", f"the body is not valid JSON: {exc}") from exc


class Api:
    """One Lambda's routes. ``idempotency`` builds the store lazily (None: keys are refused)."""

    def __init__(
        self,
        routes: list[Route],
        idempotency_store: Callable[[], idempotency.IdempotencyStore] | None = None,
    ) -> None:
        self.routes = routes
        self._by_resource = {(route.method, route.path): route for route in routes}
        self._idempotency_store = idempotency_store

    def __call__(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        try:
            route, request = self._request(event)
            return to_proxy(self._run(route, request))
        except HttpError as exc:
            return to_proxy(self._error(exc.code, exc.message, **exc.details))
        except DomainError as exc:
            return to_proxy(self._domain_error(exc))
        except Exception:
            logger.exception("unhandled error", extra={"path": event.get("path")})
            return to_proxy(self._error("INTERNAL", "internal error"))

    # -- parsing -------------------------------------------------------------------------------

    def _request(self, event: Mapping[str, Any]) -> tuple[Route, Request]:
        method = str(event.get("httpMethod", "")).upper()
        resource = str(event.get("resource", ""))
        route = self._by_resource.get((method, resource))
        if route is None:
            if any(path == resource for _, path in self._by_resource):
                raise HttpError("METHOD_NOT_ALLOWED", f"{method} is not allowed on {resource}")
            raise HttpError("NOT_FOUND", f"no route for {method} {event.get('path')}")
        headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
        params = dict(event.get("pathParameters") or {})
        for name in route.params:
            problems = schema.errors(schema.identifier(), params.get(name), name)
            if problems:
                raise HttpError("VALIDATION_ERROR", "; ".join(problems))
        body = self._body(route, event, headers)
        request = Request(
            method=method,
            path=str(event.get("path", resource)),
            params=params,
            headers=headers,
            body=body,
            request_id=str((event.get("requestContext") or {}).get("requestId", "")),
        )
        return route, request

    def _body(self, route: Route, event: Mapping[str, Any], headers: Mapping[str, str]) -> Any:
        raw = event.get("body")
        if raw is None or raw == "":
            if route.body is None:
                return None
            raise HttpError("BAD_JSON", "this request needs a JSON body")
        data = base64.b64decode(raw) if event.get("isBase64Encoded") else str(raw).encode()
        if len(data) > config.MAX_BODY_BYTES:
            raise HttpError(
                "PAYLOAD_TOO_LARGE", f"the body must be at most {config.MAX_BODY_BYTES} bytes"
            )
        if route.body is None:
            raise HttpError("BAD_REQUEST", f"{route.method} {route.path} takes no body")
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise HttpError("UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HttpError("BAD_JSON", "the body is not UTF-8") from exc
        body = parse_json(text)
        problems = schema.errors(route.body, body)
        if problems:
            raise HttpError("VALIDATION_ERROR", "; ".join(problems))
        return body

    # -- running -------------------------------------------------------------------------------

    def _run(self, route: Route, request: Request) -> Response:
        key = request.header("Idempotency-Key")
        if key is None:
            return self._guarded(route, request)
        # issue 13.6: a key on a route that cannot honour it is refused, never silently ignored
        # (two keyed reservations used to hold twice the units).
        if not route.idempotent or self._idempotency_store is None:
            raise HttpError("BAD_REQUEST", "this route does not accept an Idempotency-Key")
        if not IDEMPOTENCY_KEY_PATTERN.fullmatch(key):
            raise HttpError("BAD_REQUEST", "Idempotency-Key must be 1-128 visible ASCII characters")
        store = self._idempotency_store()
        # issue 13 (IAM): records are partitioned per function (the path's first segment), and
        # each function's role may only touch the records of its own partitions.
        scope = idempotency.record_id(
            idempotency.partition_of(route.path), f"{request.method} {request.path}#{key}"
        )
        fingerprint = idempotency.fingerprint(request.method, request.path, request.body)
        try:
            return self._keyed(route, request, store, scope, fingerprint)
        except (retry.OutcomeUnknown, retry.RetriesExhausted) as exc:
            # the idempotency store itself is unavailable: an outage, not a bug
            return self._outage(exc)

    def _keyed(
        self,
        route: Route,
        request: Request,
        store: idempotency.IdempotencyStore,
        scope: str,
        fingerprint: str,
    ) -> Response:
        try:
            begun = store.begin(scope, fingerprint)
        except idempotency.KeyReused as exc:
            raise HttpError(
                "IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was used for a different request"
            ) from exc
        except idempotency.StillRunning as exc:
            raise HttpError(
                "IDEMPOTENCY_IN_PROGRESS",
                "the first request with this Idempotency-Key is still running; retry shortly",
            ) from exc
        if isinstance(begun, idempotency.Replay):
            # issue 8.2: the first answer's status, body and its Location / ETag headers
            return Response(
                begun.status_code, begun.body, {**begun.headers, "Idempotent-Replayed": "true"}
            )
        claimed = Request(**{**request.__dict__, "claim": begun})
        response = self._guarded(route, claimed)
        code = response.body.get("error") if isinstance(response.body, dict) else None
        if response.status < 400:
            try:
                store.complete(begun, response.status, response.body, response.headers)
            except (retry.OutcomeUnknown, retry.RetriesExhausted):
                # The action's answer stands: it happened. Only its replay is not stored; the
                # claim lapses and a retry meets the domain's own conditions (already exists...).
                logger.warning("could not store the answer for an Idempotency-Key")
        elif response.status < 500 or code in RELEASED_OUTAGES:
            # issue 13.4/13.5: a refusal or a throttle changed nothing, so nothing is stored: the
            # claim is given back and a retry with the key runs again (LOCKED, CONFLICT... are
            # temporary; a stored 404 would outlive the product created a moment later).
            try:
                store.release(begun)
            except (retry.OutcomeUnknown, retry.RetriesExhausted):
                # issue 8.2: the release is down too. Still the action's answer, never a 500;
                # the claim lapses at lockedUntil, so tell the client when a retry can run.
                metrics.count("ClaimReleaseFailed", pattern="idempotency")
                logger.warning("could not release an Idempotency-Key after a refusal")
                wait_ms = begun.locked_until - int(store.clock() * 1000)
                response.headers["Retry-After"] = str(max(1, math.ceil(wait_ms / 1000)))
        # OUTCOME_UNKNOWN (and a 500) keep the claim until it lapses: the write may have landed.
        return response

    def _guarded(self, route: Route, request: Request) -> Response:
        """Run the action; turn domain errors and outages into responses (so they can be stored)."""
        try:
            return route.action(request)
        except DomainError as exc:
            return self._domain_error(exc)
        except (retry.OutcomeUnknown, retry.RetriesExhausted) as exc:
            return self._outage(exc)
        except transact.Cancelled as exc:
            logger.warning("transaction cancelled", extra={"reasons": str(exc)})
            return self._error("CONFLICT", "a concurrent request changed the same data; retry")

    def _outage(self, exc: retry.OutcomeUnknown | retry.RetriesExhausted) -> Response:
        if isinstance(exc, retry.OutcomeUnknown):
            return self._error(
                "OUTCOME_UNKNOWN",
                "the database did not confirm the write; it may or may not have been applied. "
                "Read the resource before retrying, or retry with an Idempotency-Key.",
            )
        response = self._error("THROTTLED", "the database is busy; retry shortly")
        response.headers["Retry-After"] = "1"
        return response

    def _domain_error(self, exc: DomainError) -> Response:
        response = self._error(exc.code, exc.message, **exc.details)
        retry_after = exc.details.get("retryAfterSeconds")
        if retry_after is not None:
            response.headers["Retry-After"] = str(max(1, math.ceil(float(retry_after))))
        return response

    @staticmethod
    def _error(code: str, message: str, **details: Any) -> Response:
        status = STATUS.get(code)
        if status is None:
            logger.error("error code without an HTTP status", extra={"code": code})
            status = 500
        return Response(status, error_body(code, message, **details))


def created(body: Any, location: str | None = None, etag: int | None = None) -> Response:
    headers: dict[str, str] = {}
    if location:
        headers["Location"] = location
    if etag is not None:
        headers["ETag"] = f'"{etag}"'
    return Response(201, body, headers)


def accepted(body: Any, location: str) -> Response:
    return Response(202, body, {"Location": location})


def no_content() -> Response:
    return Response(204)


def ok(body: Any, etag: int | None = None) -> Response:
    return Response(200, body, {"ETag": f'"{etag}"'} if etag is not None else {})
