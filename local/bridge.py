"""HTTP request -> API Gateway REST proxy event -> the very handler Lambda runs -> HTTP response.

A WSGI application served by Werkzeug's threaded server (HTTP/1.1 keep-alive, one thread per
connection), so many clients can call at once, as they would call API Gateway. Which function
answers which path comes from the route declarations (``service.api.routes``), as in the deployed
API. Unknown paths get 404 NOT_FOUND, as the deployed gateway gives them (its gateway responses
are set up that way); a known path with a method it does not declare gets 405
``METHOD_NOT_ALLOWED`` with ``Allow`` naming the declared ones (RFC 9110 15.5.6), before any token
is looked at (see docs/http-api.md for what API Gateway does there). ``GET /openapi.json`` and
``GET /swagger`` document every route (``local.docs``); ``GET /_ping`` (local only) answers
``{"ok": true}`` from the bridge itself, the yardstick of ``make soak``'s step mode.

Identity, as API Gateway's Cognito user-pool authorizer does it: every declared route needs a
verified ID token (``Bridge(verifier=...)``, a :class:`local.tokens.TokenVerifier`); the verified
claims go to the handler as ``requestContext.authorizer.claims``. A request without a valid token is
answered 401 ``UNAUTHORIZED`` before its body is read and without calling the handler, so nothing is
written; a JWKS that cannot be fetched (an outage of the identity provider) is 503 ``THROTTLED``
with ``Retry-After``, again without calling the handler. The documentation routes stay open, and an
unknown route stays 404 whether or not a token came with it (the deployed gateway answers unknown
paths with MISSING_AUTHENTICATION_TOKEN, which the stack maps to 404). The event is built here from
the HTTP request, so nothing a client sends can put claims into ``requestContext``. Without a
verifier (``Bridge()``) no claims are handed over, as for a method without an authorizer: the
handlers then refuse the request themselves.

:class:`CachedVerifier` keeps a verified answer per ``Authorization`` value, as the deployed
authorizer does (API Gateway caches a Cognito authorizer's result for its ``resultsCacheTtl``: 300 s
unless the stack sets it), but never past the token's own ``exp``; refusals are not cached.
Hand-written: a dict and a lock, no library does this narrow policy.
"""

from __future__ import annotations

import base64
import calendar
import json
import logging
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request as WsgiRequest
from werkzeug.wrappers import Response as WsgiResponse

from local import docs, init_report
from local.tokens import JwksUnavailable
from service import catalog
from service.api.errors import STATUS, error_body
from service.domain.errors import Unauthorized
from service.lru import LRU

MAX_REQUEST_BYTES = 1024 * 1024  # beyond any body a route accepts; no more than this + 1 is read
JWKS_RETRY_AFTER_SECONDS = 1
AUTHORIZER_CACHE_SECONDS = 300.0  # API Gateway's default resultsCacheTtl for an authorizer
AUTHORIZER_CACHE_ENTRIES = 10_000
DOCUMENT_PATH = "/openapi.json"
PING_PATH = "/_ping"  # local only: answered by the bridge itself (the soak's ceiling, docs/soak.md)
SWAGGER_PATH = "/swagger"

log = logging.getLogger("local")

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass
class LocalContext:
    """The parts of a Lambda context the handlers use."""

    function_name: str
    timeout_seconds: int
    aws_request_id: str
    _deadline: float = 0.0

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass(frozen=True)
class _Target:
    spec: catalog.FunctionSpec
    path: str
    method: str
    pattern: re.Pattern[str]
    handler: Handler


def _compile(path: str) -> re.Pattern[str]:
    regex = re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(path))
    return re.compile(f"^{regex}$")


class Verifier(Protocol):
    """What the bridge needs of a token verifier (``local.tokens.TokenVerifier``): the caller's
    claims as API Gateway hands them over, or ``Unauthorized``; ``JwksUnavailable``: an outage."""

    def verify(self, authorization: str | None) -> dict[str, str]: ...


def expires_at(claims: dict[str, str]) -> float | None:
    """The epoch seconds of ``exp`` in API Gateway's claim shape (``Fri Jul 29 18:52:53 UTC
    2016``); None if it cannot be read."""
    try:
        return float(calendar.timegm(time.strptime(claims["exp"], "%a %b %d %H:%M:%S UTC %Y")))
    except (KeyError, TypeError, ValueError):
        return None


class CachedVerifier:
    """A verifier's answers, kept per ``Authorization`` value for ``ttl_seconds`` and never past
    the token's ``exp`` (see the module docstring), for the ``max_entries`` most recently used
    tokens (the least recently used forgotten first). Thread-safe."""

    def __init__(
        self,
        verifier: Verifier,
        *,
        ttl_seconds: float = AUTHORIZER_CACHE_SECONDS,
        max_entries: int = AUTHORIZER_CACHE_ENTRIES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.verifier = verifier
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._answers: LRU[str, tuple[dict[str, str], float]] = LRU(max_entries)

    def verify(self, authorization: str | None) -> dict[str, str]:
        now = self._clock()
        if authorization is not None:
            kept = self._answers.get(authorization)
            if kept is not None and now < kept[1]:
                return dict(kept[0])
        claims = self.verifier.verify(authorization)  # a refusal raises: never cached
        expires = expires_at(claims)
        if authorization is not None and expires is not None:
            self._answers.put(authorization, (claims, min(now + self.ttl_seconds, expires)))
        return dict(claims)


class Bridge:
    """``functions``: handler path (the template's ``Handler``) -> what runs it, as
    ``local.workers`` starts them from the synthesized assets; without it, the handlers are
    imported into this process (the chaos runner, routing-only tests)."""

    def __init__(
        self,
        specs: Iterable[catalog.FunctionSpec] = catalog.API_FUNCTIONS,
        *,
        verifier: Verifier | None = None,
        functions: Mapping[str, Handler] | None = None,
    ) -> None:
        self.verifier = verifier
        self.targets: list[_Target] = []
        # GET /openapi.json and GET /swagger: built on first request, then the same bytes for
        # every caller for the life of the process (local.docs: they depend on no request).
        self._pages: dict[str, bytes] = {}
        self._pages_lock = threading.Lock()
        for spec in specs:
            handler = (
                functions[spec.handler]
                if functions is not None
                else init_report.load(spec.handler, spec.name)[0]
            )
            for route in spec.routes():  # declared, so the same as API Gateway's methods
                self.targets.append(
                    _Target(spec, route.path, route.method, _compile(route.path), handler)
                )

    def page(self, path: str) -> bytes:
        """The document (``DOCUMENT_PATH``) or Swagger UI (``SWAGGER_PATH``), built once."""
        with self._pages_lock:
            if path not in self._pages:
                if DOCUMENT_PATH not in self._pages:
                    self._pages[DOCUMENT_PATH] = docs.document_bytes()
                if path == SWAGGER_PATH:
                    spec = self._pages[DOCUMENT_PATH]
                    self._pages[SWAGGER_PATH] = docs.swagger_page(spec).encode("utf-8")
            return self._pages[path]

    def match(self, method: str, path: str) -> tuple[_Target, dict[str, str]] | None:
        for target in self.targets:
            found = target.pattern.match(path)
            if found and target.method == method:
                return target, found.groupdict()
        return None

    def allowed(self, path: str) -> list[str]:
        """The methods declared for ``path`` (empty: no such path), for 405's ``Allow``."""
        if path in (DOCUMENT_PATH, SWAGGER_PATH, PING_PATH):
            return ["GET"]
        methods = {target.method for target in self.targets if target.pattern.match(path)}
        return sorted(methods)

    def event(
        self,
        request: WsgiRequest,
        target: _Target,
        params: dict[str, str],
        body: bytes,
        claims: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        headers = {key: value for key, value in request.headers.items()}
        query = {key: request.args.get(key, "") for key in request.args}
        try:
            text: str | None = body.decode("utf-8") if body else None
            encoded = False
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode(), True
        context: dict[str, Any] = {
            "requestId": str(uuid.uuid4()),
            "stage": "local",
            "resourcePath": target.path,
            "httpMethod": request.method,
            "path": request.path,
            "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": request.remote_addr},
        }
        if claims is not None:
            context["authorizer"] = {"claims": claims}
        return {
            "resource": target.path,
            "path": request.path,
            "httpMethod": request.method,
            "headers": headers,
            "multiValueHeaders": {key: [value] for key, value in headers.items()},
            "queryStringParameters": query or None,
            "multiValueQueryStringParameters": {k: request.args.getlist(k) for k in query} or None,
            "pathParameters": params or None,
            "stageVariables": None,
            "requestContext": context,
            "body": text,
            "isBase64Encoded": encoded,
        }

    def authorize(self, request: WsgiRequest) -> tuple[dict[str, str] | None, WsgiResponse | None]:
        """(the verified claims, None), or (None, the refusal); no verifier: (None, None)."""
        if self.verifier is None:
            return None, None
        try:
            return self.verifier.verify(request.headers.get("Authorization")), None
        except Unauthorized as refused:
            return None, _json(STATUS[refused.code], error_body(refused.code, refused.message))
        except JwksUnavailable as outage:
            log.warning("identity provider unavailable: %s", outage)
            message = "the identity provider cannot be reached to verify the token; retry shortly"
            response = _json(STATUS["THROTTLED"], error_body("THROTTLED", message))
            response.headers["Retry-After"] = str(JWKS_RETRY_AFTER_SECONDS)
            return None, response

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = WsgiRequest(environ)
        started = time.perf_counter()
        try:
            response, function = self._respond(request)
        except Exception:  # a bug of the bridge itself: logged, answered in the contract's shape
            log.exception("the bridge failed on %s %s", request.method, request.path)
            response = _json(STATUS["INTERNAL"], error_body("INTERNAL", "internal error"))
            function = "-"
        elapsed_ms = (time.perf_counter() - started) * 1000
        log.info(request_line(request, response.status_code, elapsed_ms, function))
        return response(environ, start_response)

    def _respond(self, request: WsgiRequest) -> tuple[WsgiResponse, str]:
        if request.method == "GET" and request.path == PING_PATH:
            return _json(200, {"ok": True}), "-"
        if request.method == "GET" and request.path == DOCUMENT_PATH:
            document = self.page(DOCUMENT_PATH)
            return WsgiResponse(document, status=200, content_type="application/json"), "-"
        if request.method == "GET" and request.path == SWAGGER_PATH:
            page = self.page(SWAGGER_PATH)
            return WsgiResponse(page, status=200, content_type="text/html; charset=utf-8"), "-"
        found = self.match(request.method, request.path)
        if found is None:
            allowed = self.allowed(request.path)
            if allowed:
                message = f"{request.method} is not a method of {request.path}"
                response = _json(405, error_body("METHOD_NOT_ALLOWED", message))
                response.headers["Allow"] = ", ".join(allowed)
                return response, "-"
            return _json(
                404, error_body("NOT_FOUND", f"no route for {request.method} {request.path}")
            ), "-"
        target, params = found
        claims, refused = self.authorize(request)
        if refused is not None:
            return refused, "authorizer"
        body = read_body(request, MAX_REQUEST_BYTES)
        if body is None:
            return _json(413, error_body("PAYLOAD_TOO_LARGE", "the body is too large")), "-"
        event = self.event(request, target, params, body, claims)
        context = LocalContext(
            target.spec.name, target.spec.timeout_seconds, event["requestContext"]["requestId"]
        )
        try:
            result = target.handler(event, context)
        except Exception:  # the function failed: API Gateway answers 502
            log.exception("%s failed", target.spec.name)
            return _json(502, {"message": "Internal server error"}), target.spec.name
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
        response = WsgiResponse(data, status=int(result["statusCode"]))
        response.headers.clear()
        for key, value in (result.get("headers") or {}).items():
            response.headers[key] = value
        return response, target.spec.name


def read_body(request: WsgiRequest, limit: int) -> bytes | None:
    """The body, or None if it is longer than ``limit`` bytes, having read at most ``limit`` + 1
    of them whatever the framing: a ``Content-Length`` over the limit is refused before reading,
    and a chunked body (no length: Werkzeug's ``get_data()`` would read it whole) is read a piece
    at a time until it ends or passes the limit."""
    if (request.content_length or 0) > limit:
        return None
    stream = request.stream
    pieces: list[bytes] = []
    size = 0
    while size <= limit:
        piece = stream.read(limit + 1 - size)
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    return None if size > limit else b"".join(pieces)


def request_line(request: WsgiRequest, status: int, elapsed_ms: float, function: str) -> str:
    """One request as one JSON object: the path and query are what an unauthenticated client
    chose (decoded, so ``%0a`` is a newline), and JSON escapes them, so they stay data and can
    never start a line of their own."""
    return json.dumps(
        {
            "method": request.method,
            "path": request.path,
            "query": request.query_string.decode("latin-1"),
            "status": status,
            "ms": round(elapsed_ms, 1),
            "function": function,
        }
    )


def _json(status: int, body: Any) -> WsgiResponse:
    return WsgiResponse(json.dumps(body), status=status, content_type="application/json")


class _Handler(WSGIRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: load tests reuse connections

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # the bridge logs one JSON line per request itself (``request_line``)


def serve(bridge: Bridge, host: str, port: int) -> BaseWSGIServer:
    """Start serving in a daemon thread; returns the server (``shutdown()`` to stop)."""
    server = make_server(host, port, bridge, threaded=True, request_handler=_Handler)
    server.daemon_threads = True  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return server


def configure_logging() -> None:
    logging.basicConfig(
        stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(message)s", force=True
    )
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
