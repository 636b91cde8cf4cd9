"""Each API function's Powertools ``APIGatewayRestResolver``, its routes taken from the declarations
(``service.api.routes``), and the one place where exceptions become HTTP answers.

A handler module builds ``app = Resolver("products")``, decorates each route function with
``@app.declared`` (the function's name picks its declaration: rule, method, summary, responses,
middlewares) and serves ``app.resolve(event, context)``. Validation is Powertools' own, against the
strict models of ``service.api.models``; :func:`answer` and the exception handlers registered in
:class:`Resolver` map domain errors, the HTTP layer's own refusals, validation errors and outages
to the contract's ``{"error", "message"}`` bodies. A client error never becomes a 5xx; a 5xx
means an outage (503, ``Retry-After`` where a retry helps) or a bug (500).

Where the resolver must reach past Powertools' public API (per-request state for threads, the two
steps of resolving, middleware stacks built once), it goes through one adapter module,
:mod:`service.api.powertools_adapter`, which says why and is tested against the locked version.

Before Powertools sees a request, :func:`service.api.envelope.problem` checks its envelope (size,
media type, a body where none is taken), so nothing a client puts in ``Content-Type`` reaches
Powertools' own body parsing (a multipart type without a boundary used to be a 500).

What each route answers, for the OpenAPI document (:func:`responses`: an error model per route,
the success models of ``service.api.answers``), is built only when the document is asked for:
the resolver that serves requests registers its routes without it, and
:meth:`Resolver.get_openapi_schema` registers the same route functions, with their responses, on
a second resolver that only documents. Serving never reads them (Powertools would build a
pydantic schema of each on a route's first request), so neither the cold start nor a first
request pays for them.
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Annotated, Any, TypeVar

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Header, Path
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.json_schema import SkipJsonSchema

from service import policy, runtime
from service.api import envelope, keyed, models, routes
from service.api import powertools_adapter as adapter
from service.api.errors import (
    EXAMPLES,
    STATUS,
    UNMAPPED_STATUS,
    HttpError,
    details_of,
    error_body,
)
from service.domain.errors import DomainError
from turnstile_ddb import claims, errors, retry, transact

logger = Logger()

F = TypeVar("F", bound=Callable[..., Any])

# A path segment that names an item: the same pattern as ids in bodies.
Id = Annotated[str, Path(min_length=1, max_length=128, pattern=models.ID_PATTERN)]

# The optional ``Idempotency-Key`` header of every route declared ``idempotent``: ``declared``
# adds it to the route's parameters, so the OpenAPI document lists it and Powertools validates it
# (the middleware of ``service.api.keyed`` reads it and checks it again, on every route).
# ``str``, default None: a header is a string or absent, never JSON null, so the document says
# ``type: string`` and an absent header is the default, not validated.
IdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=keyed.KEY_MAX_LENGTH,
        pattern=keyed.KEY_SCHEMA_PATTERN,
        description=keyed.KEY_DESCRIPTION,
    ),
]
_KEY_PARAMETER = "idempotency_key"


# -- answers -----------------------------------------------------------------------------------


def refusal(code: str, message: str, details: Mapping[str, Any] | None = None) -> Response:
    status = STATUS.get(code)
    if status is None:
        logger.error("error code without an HTTP status", extra={"code": code})
        status = UNMAPPED_STATUS
    headers: dict[str, str] = {}
    retry_after = (details or {}).get("retryAfterSeconds")
    if retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(float(retry_after))))
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=error_body(code, message, **(details or {})),
        headers=headers,
    )


def answer(exc: Exception) -> Response | None:
    """The response for an exception a route may raise; None for a bug (500)."""
    if isinstance(exc, DomainError | HttpError):
        return refusal(exc.code, exc.message, exc.details)
    if isinstance(exc, retry.OutcomeUnknown):
        return refusal(
            "OUTCOME_UNKNOWN",
            "the database did not confirm the write; it may or may not have been applied. "
            "Read the resource before retrying, or retry with an Idempotency-Key.",
        )
    if isinstance(exc, claims.ClaimHoldLapsed):
        # Before RetriesExhausted, which it is: the request outlasted its own hold, so nothing
        # is held for it (its units, if its claim landed, were given back).
        return refusal(
            "HOLD_LAPSED",
            "the reservation's hold ended before it could be answered; nothing is held for it: "
            "retry",
            {"retryAfterSeconds": 1},
        )
    if isinstance(exc, retry.RetriesExhausted | errors.AwsRetryable):
        return refusal("THROTTLED", "the database is busy; retry shortly", {"retryAfterSeconds": 1})
    if isinstance(exc, transact.Cancelled):
        logger.warning("transaction cancelled", extra={"reasons": str(exc)})
        return refusal("CONFLICT", "a concurrent request changed the same data; retry")
    return None


def _validation_message(errors: list[dict[str, Any]]) -> str:
    parts = []
    for error in errors:
        where = ".".join(str(part) for part in error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', error.get('type', 'invalid'))}")
    return "; ".join(parts) or "the request is not valid"


_IF_MATCH = ("header", "if-match")
_IDEMPOTENCY_KEY = ("header", "idempotency-key")


# -- success -----------------------------------------------------------------------------------


def _json(status: int, body: Any, headers: dict[str, str]) -> Response:
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers
    )


def _etag(etag: int | None) -> dict[str, str]:
    return {"ETag": f'"{etag}"'} if etag is not None else {}


def ok(body: Any, etag: int | None = None) -> Response:
    return _json(200, body, _etag(etag))


def created(body: Any, location: str | None = None, etag: int | None = None) -> Response:
    headers = _etag(etag)
    if location:
        headers["Location"] = location
    return _json(201, body, headers)


def accepted(body: Any, location: str) -> Response:
    return _json(202, body, {"Location": location})


def no_content() -> Response:
    return Response(status_code=204, content_type=None, body="")


# -- OpenAPI -----------------------------------------------------------------------------------


def _codes(route: routes.Route) -> list[str]:
    """Every error code ``route`` can answer. Every route needs an ID token (docs/identity.md):
    without a valid one it is 401, and a caller the policy or the gateway refuses gets 403.
    ``BAD_REQUEST`` on every route: an Idempotency-Key where none is taken (or a malformed one),
    a body where none is taken, a malformed If-Match. ``NOT_FOUND`` where the route's domain
    answers it (``route.errors``) and on every route with a path id (an id Powertools' route
    pattern does not match, such as ``%C3%97``, is answered 404 by the function); never on a
    route without one."""
    codes = ["VALIDATION_ERROR", "BAD_REQUEST", "UNAUTHORIZED", "FORBIDDEN"]
    codes += [*(["NOT_FOUND"] if route.params else []), *route.errors]
    codes += ["INTERNAL", "THROTTLED"]
    if route.body is not None:
        codes += ["BAD_JSON", "PAYLOAD_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE"]
    if route.method != "GET":
        codes += ["OUTCOME_UNKNOWN", "CONFLICT"]
    if route.idempotent:
        codes += ["IDEMPOTENCY_KEY_REUSED", "IDEMPOTENCY_IN_PROGRESS"]
    return list(dict.fromkeys(codes))


def _camel(operation: str) -> str:
    return "".join(part.title() for part in operation.split("_"))


def error_model(route: routes.Route) -> type[BaseModel]:
    """The error body of ``route``: ``error`` one of the codes it answers (an enum of its own,
    ``<Operation>ErrorCode``), ``message``, and the details those codes carry as optional, typed
    properties (``service.api.errors.details_of``); nothing else."""
    codes = _codes(route)
    name = f"{_camel(route.operation)}Error"
    code_enum = Enum(f"{name}Code", {code: code for code in codes}, type=str)  # type: ignore[misc]
    fields: dict[str, Any] = {
        "error": (code_enum, Field(description="what went wrong: a stable code")),
        "message": (str, Field(description="a sentence for people")),
    }
    kinds: dict[str, Any] = {}
    said: dict[str, dict[str, list[str]]] = {}  # field -> description -> the codes saying it
    for code in codes:
        for field, (kind, description) in details_of(route.function, code).items():
            if kinds.setdefault(field, kind) != kind:
                raise TypeError(f"{route.operation}: {field} has two types")
            said.setdefault(field, {}).setdefault(description, []).append(code)
    for field, kind in kinds.items():
        description = "; ".join(f"{text} ({', '.join(by)})" for text, by in said[field].items())
        optional = kind | SkipJsonSchema[None]  # type: ignore[misc]  # a type built at runtime
        fields[field] = (optional, models.absent(description))
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


# What each response header the server sends says (the OpenAPI document declares each on the
# responses that send it).
HEADERS: dict[str, dict[str, Any]] = {
    "ETag": {
        "description": 'the version as an entity tag, "<version>": send it back as If-Match',
        "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
    },
    "Location": {
        "description": "the path of what the request created (or of where its outcome will be)",
        "schema": {"type": "string", "format": "uri-reference"},
    },
    "Retry-After": {
        "description": "seconds to wait before retrying; on a refusal of a route taking an "
        "Idempotency-Key also when its claim could not be given back (a retry waits for it)",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    },
    keyed.REPLAYED_HEADER: {
        "description": "`true` on the replay of a first success for the same "
        "Idempotency-Key (this answer is that success's, not a new run); absent otherwise",
        "schema": {"type": "string", "enum": ["true"]},
    },
}


def _retrying(route: routes.Route, codes: list[str]) -> set[int]:
    """The error statuses of ``route`` that may send ``Retry-After``: a code whose details say
    when to retry, and on a keyed route every refusal its route raised after claiming the key
    (its domain's, the handler's ownership rules, a cancelled transaction, a released outage:
    ``keyed._settle`` says when the claim lapses if it cannot give it back)."""
    found = {STATUS[c] for c in codes if "retryAfterSeconds" in details_of(route.function, c)}
    if route.idempotent:
        settled = (*route.errors, "FORBIDDEN", "CONFLICT", *keyed.RELEASED_OUTAGES)
        found |= {STATUS[code] for code in codes if code in settled}
    return found


def _example(route: routes.Route, code: str) -> dict[str, Any]:
    """The sample answer of ``code`` on ``route``: only the details it carries there."""
    carried = details_of(route.function, code)
    sample = {k: v for k, v in EXAMPLES[code].items() if k == "message" or k in carried}
    return {"error": code, **sample}


def responses(route: routes.Route) -> dict[int, Any]:
    """The OpenAPI responses of ``route``: its success and every status it can answer."""
    codes = _codes(route)
    by_status: dict[int, list[str]] = {}
    for code in codes:
        by_status.setdefault(STATUS[code], []).append(code)
    success: dict[str, Any] = {"description": "success"}
    if route.status == 204:
        success = {"description": "done: no body", "content": {}}
    else:
        success["content"] = {content_types.APPLICATION_JSON: {"model": route.answer}}
    links = routes.links(route)
    if links:
        success["links"] = links
    sent = [*route.sends, *([keyed.REPLAYED_HEADER] if route.idempotent else [])]
    if sent:
        success["headers"] = {name: HEADERS[name] for name in sent}
    documented: dict[int, Any] = {route.status: success}
    errors = error_model(route)
    retrying = _retrying(route, codes)
    for status, at_status in sorted(by_status.items()):
        documented[status] = {
            "description": " or ".join(at_status),
            "content": {
                content_types.APPLICATION_JSON: {
                    "model": errors,
                    "examples": {code: {"value": _example(route, code)} for code in at_status},
                }
            },
        }
        if status in retrying:
            documented[status]["headers"] = {"Retry-After": HEADERS["Retry-After"]}
    return documented


def _single_valued(result: dict[str, Any]) -> dict[str, Any]:
    """Powertools answers REST events with ``multiValueHeaders``; turnstile sets no header twice
    (no cookies), and clients, tests and the bridge read plain ``headers``, as before."""
    multi = result.pop("multiValueHeaders", None) or {}
    result["headers"] = {**{name: ", ".join(values) for name, values in multi.items()}}
    return result


def _taking_the_key(func: F) -> Callable[..., Any]:
    """``func`` as Powertools sees a keyed route: its own parameters plus the optional
    ``Idempotency-Key`` header (``IdempotencyKey``), which is dropped before ``func`` runs (the
    keyed middleware already read it). Powertools takes a route's parameters from its signature,
    so the header is declared, and validated, where the route is, without each handler taking a
    parameter it does not use."""
    signature = inspect.signature(func, eval_str=True)
    key = inspect.Parameter(
        _KEY_PARAMETER, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=IdempotencyKey
    )

    @functools.wraps(func)
    def serve(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop(_KEY_PARAMETER, None)
        return func(*args, **kwargs)

    serve.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), key]
    )
    return serve


# -- the resolver ------------------------------------------------------------------------------


class Resolver(adapter.RequestState, APIGatewayRestResolver):
    """One API function's routes, validation, middlewares and exception handlers."""

    def __init__(
        self,
        function: str,
        idempotency_store: Callable[[], Any] = lambda: runtime.idempotency.get(),
        *,
        documenting: bool = False,
    ) -> None:
        adapter.RequestState.__init__(self, function)  # before Powertools sets self.context
        APIGatewayRestResolver.__init__(
            self, enable_validation=True, json_body_deserializer=envelope.parse_json
        )
        self.function = function
        self.declarations = {route.operation: route for route in routes.of(function)}
        self._by_resource = {(r.method, r.path): r for r in self.declarations.values()}
        self._idempotency_store = idempotency_store
        self._ready = False
        self._ready_lock = threading.Lock()
        self._documenting = documenting  # a resolver that only builds the OpenAPI document
        self._served: list[Callable[..., Any]] = []  # the route functions, as declared
        self._document: Resolver | None = None
        self._document_lock = threading.Lock()
        self.exception_handler([DomainError, HttpError, retry.OutcomeUnknown])(self._answer)
        self.exception_handler([retry.RetriesExhausted, errors.AwsRetryable, transact.Cancelled])(
            self._answer
        )
        self.exception_handler(
            [RequestValidationError, RequestUnsupportedContentType, UnicodeDecodeError]
        )(self._invalid)
        self.not_found(self._not_found)
        self.exception_handler(Exception)(self._bug)

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        self._build_stacks()
        with self.serving(envelope.normalized(dict(event)), context, envelope.parse_json):
            refused = self._admit(event)
            if refused is None:
                refused = self._envelope()
            built = ResponseBuilder(refused) if refused is not None else adapter.route(self)
            return _single_valued(adapter.build(self, built))

    def _admit(self, event: Mapping[str, Any]) -> Response | None:
        """Who is calling, before anything else runs (validation included, as API Gateway's
        authorizer runs before its validator): no verified claims is 401; a route the policy
        refuses the caller (``service.policy.admit``) 403. None when the request may go on."""
        try:
            caller = policy.caller_from_event(event)
            policy.admit(
                caller, str(event.get("httpMethod") or ""), str(event.get("resource") or "")
            )
        except DomainError as exc:
            return refusal(exc.code, exc.message, exc.details)
        self.request_caller = caller
        return None

    def _envelope(self) -> Response | None:
        """The refusal of a request whose body is wrong before its content is looked at (413,
        415, a body where none is taken), as API Gateway decides before its validator."""
        event = self.current_event
        route = self._by_resource.get((event.http_method.upper(), event.resource))
        problem = envelope.problem(event, route)
        return refusal(problem.code, problem.message) if problem is not None else None

    def caller(self) -> policy.Caller:
        """The verified caller of the request being served."""
        found: policy.Caller | None = self.request_caller
        if found is None:  # pragma: no cover - resolve() admits before any route runs
            raise RuntimeError("no caller: the request was not admitted by resolve()")
        return found

    def _build_stacks(self) -> None:
        if self._ready:
            return
        with self._ready_lock:
            if not self._ready:
                adapter.build_stacks(self)
                self._ready = True

    # Routes.
    def declared(self, func: F) -> F:
        """Register ``func`` as the route declared under its name for this function."""
        route = self.declarations[func.__name__]
        annotations = {
            name: param.annotation
            for name, param in inspect.signature(func, eval_str=True).parameters.items()
        }
        if route.body is not None and route.body not in annotations.values():
            raise TypeError(f"{func.__name__} must take a {route.body.__name__} body")
        missing = [name for name in route.params if name not in annotations]
        if missing:
            raise TypeError(f"{func.__name__} must take the path parameters {missing}")
        if _KEY_PARAMETER in annotations:
            raise TypeError(f"{func.__name__}: {_KEY_PARAMETER} is the resolver's parameter")
        middlewares = [keyed.middleware(route, self._idempotency_store, answer, self.caller)]
        self.route(
            route.rule,
            route.method,
            summary=route.summary,
            description=f"Who may call: {policy.access_of(route) or 'nobody (no rule)'}.",
            operation_id=route.operation,
            tags=[self.function],
            responses=responses(route) if self._documenting else None,
            middlewares=middlewares,
        )(_taking_the_key(func) if route.idempotent else func)
        self._served.append(func)
        return func

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        """Powertools' OpenAPI document of this function's routes, with each route's responses:
        from the documenting resolver (built on the first call, then kept), which has them."""
        if self._documenting:
            return super().get_openapi_schema(*args, **kwargs)
        with self._document_lock:
            if self._document is None:
                document = Resolver(self.function, self._idempotency_store, documenting=True)
                for func in self._served:
                    document.declared(func)
                self._document = document
        return self._document.get_openapi_schema(*args, **kwargs)

    def claim(self, answer: Callable[[Any], Response] | None = None) -> Any:
        """The in-progress record of this request's Idempotency-Key, for routes that commit its
        answer themselves; ``answer`` is how the route answers its domain's result."""
        return keyed.claim_of(self, answer)

    # Exception handlers: every answer goes through ``refusal``.
    def _answer(self, exc: Exception) -> Response:
        found = answer(exc)
        return found if found is not None else self._bug(exc)

    def _invalid(self, exc: Exception) -> Response:
        if isinstance(exc, RequestUnsupportedContentType):
            return refusal("UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")
        if isinstance(exc, UnicodeDecodeError):
            return refusal("BAD_JSON", "the body is not UTF-8")
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        if any(error.get("type") == "json_invalid" for error in errors):
            return refusal("BAD_JSON", "the body is not valid JSON")
        # a malformed Idempotency-Key alone at fault: 400, as the middleware answers it
        if errors and all(tuple(e.get("loc", ()))[:2] == _IDEMPOTENCY_KEY for e in errors):
            return refusal("BAD_REQUEST", keyed.KEY_MALFORMED)
        # If-Match alone at fault: missing is 428 (the contract's precondition), malformed 400
        if errors and all(tuple(e.get("loc", ()))[:2] == _IF_MATCH for e in errors):
            if any(e.get("type") == "missing" for e in errors):
                return refusal(
                    "PRECONDITION_REQUIRED", 'send If-Match: "<version>" from the ETag you read'
                )
            return refusal("BAD_REQUEST", 'If-Match must be an ETag such as "3", or *')
        return refusal("VALIDATION_ERROR", _validation_message(list(errors)))

    def _not_found(self, exc: Exception) -> Response:
        event = self.current_event
        return refusal("NOT_FOUND", f"no route for {event.http_method} {event.path}")

    def _bug(self, exc: Exception) -> Response:
        logger.exception("unhandled error", extra={"path": self.current_event.path})
        return refusal("INTERNAL", "internal error")
