"""``Idempotency-Key``: the first request with a key runs, every retry of it gets the first answer.

A middleware of every route (after validation: a refused body never claims a key); a key sent
to a route not declared ``idempotent`` is refused (400), never silently ignored. On the routes
declared ``idempotent`` the header is also a parameter of the OpenAPI document, so Powertools'
validation refuses a malformed key first, with the same 400 (``service.api.resolver``).

The store and its guarantees are ``turnstile_ddb.idempotency``; this module is only the HTTP
side: the key's syntax, its scope (method, path, key) inside its function's partition of the
store, the fingerprint of the request, the in-progress record handed to the route
(``app.context["claim"]``, for routes that commit their answer in their own transaction), which
answers are stored, and what an HTTP answer is to the store: the opaque answer it keeps is
``{"statusCode", "body", "headers"}`` (:func:`stored`, only the headers a replay repeats), which
is also the shape records written by turnstile-ddb 0.3 replay as, so both replay alike.

Powertools' own idempotency utility is not used: it cannot commit the stored answer inside the
route's own DynamoDB transaction (exactly-once purchases and top-ups need that), and it would make
a second store next to ``turnstile_ddb.idempotency``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import APIGatewayRestResolver

from service import config, policy
from service.api.errors import HttpError
from service.api.routes import Route, partition_of
from turnstile_ddb import errors, idempotency, metrics, retry

# The idempotency store (or the database) is unavailable, not wrong: an outage the client may
# retry, answered by ``resolver.answer`` (503), never a 500. ``AwsRetryable``: a throttle or a
# connection the library did not retry itself (``turnstile_ddb.errors``).
OUTAGES = (retry.OutcomeUnknown, retry.RetriesExhausted, errors.AwsRetryable)

logger = Logger()

# The key's syntax, one definition for the check below and the OpenAPI document
# (``service.api.resolver``): 1-128 visible ASCII characters (0x21 "!" to 0x7e "~", no space).
KEY_MAX_LENGTH = 128
KEY_SCHEMA_PATTERN = f"^[!-~]{{1,{KEY_MAX_LENGTH}}}$"
KEY_PATTERN = re.compile(KEY_SCHEMA_PATTERN)  # used with fullmatch
KEY_MALFORMED = f"Idempotency-Key must be 1-{KEY_MAX_LENGTH} visible ASCII characters"
KEY_DESCRIPTION = (
    f"Optional: 1-{KEY_MAX_LENGTH} visible ASCII characters (400 BAD_REQUEST otherwise), "
    "scoped to the caller, the method and the path. The first request with a key runs; a "
    "retry with the same key and the same body gets the first success again (its status, "
    "body, Location and ETag) with `Idempotent-Replayed: true`, without running again. A "
    "refusal or a throttle is not stored: a retry runs afresh. While the first request runs "
    "(or for 30 s after an unknown outcome): 409 IDEMPOTENCY_IN_PROGRESS. The same key with "
    "another body: 422 IDEMPOTENCY_KEY_REUSED. Successes are kept 24 h."
)
REPLAYED_HEADER = "Idempotent-Replayed"
CLAIM = "claim"

# 5xx answers that promise nothing was applied: the Idempotency-Key's claim is given back.
RELEASED_OUTAGES = frozenset({"THROTTLED", "PAYMENT_FAILED"})

Next = Callable[[APIGatewayRestResolver], Response]


def middleware(
    route: Route,
    store: Callable[[], idempotency.IdempotencyStore],
    answer: Callable[[Exception], Response | None],
    caller: Callable[[], policy.Caller],
) -> Callable[[APIGatewayRestResolver, Next], Response]:
    """``answer`` turns an exception into its response (``service.api.resolver.answer``), so
    refusals and outages can be stored and replayed like any other answer; ``caller`` is the
    request's verified caller, as the resolver admitted it (a key is scoped to it)."""

    def guarded(app: APIGatewayRestResolver, next_middleware: Next) -> Response:
        try:
            return next_middleware(app)
        except Exception as exc:
            response = answer(exc)
            if response is None:
                raise
            return response

    def keyed(app: APIGatewayRestResolver, next_middleware: Next) -> Response:
        event = app.current_event
        key = event.headers.get("idempotency-key")
        if key is None:
            return next_middleware(app)
        # A key on a route that cannot honour it is refused, never silently ignored
        # (two keyed reservations used to hold twice the units).
        if not route.idempotent:
            raise HttpError("BAD_REQUEST", "this route does not accept an Idempotency-Key")
        if not KEY_PATTERN.fullmatch(key):
            raise HttpError("BAD_REQUEST", KEY_MALFORMED)
        # Records are partitioned per function (the path's first segment), and
        # each function's role may only touch the records of its own partitions. And a key
        # is its caller's, so two users' same key are two requests and never share an answer.
        scope = idempotency.record_id(
            partition_of(route.path),
            policy.idempotency_scope(caller(), f"{event.http_method} {event.path}#{key}"),
        )
        fingerprint = idempotency.fingerprint(event.http_method, event.path, _request(route, event))
        try:
            records = store()
            try:
                begun = records.begin(scope, fingerprint)
            except idempotency.KeyReused as exc:
                raise HttpError(
                    "IDEMPOTENCY_KEY_REUSED",
                    "this Idempotency-Key was used for a different request",
                ) from exc
            except idempotency.StillRunning as exc:
                raise HttpError(
                    "IDEMPOTENCY_IN_PROGRESS",
                    "the first request with this Idempotency-Key is still running; retry shortly",
                ) from exc
            if isinstance(begun, idempotency.Replay):
                return _replay(begun)
            app.append_context(**{CLAIM: begun})
            response = guarded(app, next_middleware)
            _settle(records, begun, response)
            return response
        except OUTAGES as exc:
            # the idempotency store itself is unavailable: an outage, not a bug
            outage = answer(exc)
            if outage is None:  # pragma: no cover - answer() maps every outage
                raise
            return outage

    return keyed


def _request(route: Route, event: Any) -> Any:
    """What the request asks, as its fingerprint reads it: the validated body (the middleware
    runs after validation), so two bodies the contract reads alike are the same request
    (``1.0`` is the integer 1; a field sent with its default value is the field left out). A body
    written the plain way (integers as integers, no defaults spelt out) reads as it did when the
    raw JSON was hashed, so the records of such requests still match their retries."""
    body = event.json_body
    model = route.body
    if model is None or body is None:
        return body
    return model.model_validate(body).model_dump(mode="json", exclude_defaults=True)


def claim_of(
    app: APIGatewayRestResolver, answer: Callable[[Any], Response] | None = None
) -> idempotency.InProgress | None:
    """The in-progress record of this request's key, if it came with one. ``answer`` is how the
    route answers its domain's result: a domain that commits the stored answer in its own
    transaction stores that answer (:func:`stored`) for its result."""
    found: idempotency.InProgress | None = app.context.get(CLAIM)
    if found is not None and answer is not None:
        found.answer_for = lambda result: stored(answer(result))
    return found


def stored(response: Response) -> dict[str, Any]:
    """The answer a key's record keeps for ``response``: its status, its body and the headers
    a replay repeats (``config.IDEMPOTENCY_REPLAYED_HEADERS``)."""
    headers = response.headers
    return {
        "statusCode": response.status_code,
        "body": response.body,
        "headers": {
            name: headers[name]
            for name in config.IDEMPOTENCY_REPLAYED_HEADERS
            if isinstance(headers.get(name), str)
        },
    }


def _replay(replay: idempotency.Replay) -> Response:
    # A replay: the first answer's status, body and its Location / ETag headers; a record of
    # the library's 0.3 replays in this same shape (and may lack "headers")
    answer = replay.answer
    return Response(
        status_code=int(answer["statusCode"]),
        content_type=content_types.APPLICATION_JSON,
        body=answer["body"],
        headers={**(answer.get("headers") or {}), REPLAYED_HEADER: "true"},
    )


def _settle(
    records: idempotency.IdempotencyStore, begun: idempotency.InProgress, response: Response
) -> None:
    body = response.body
    code = body.get("error") if isinstance(body, dict) else None
    if response.status_code < 400:
        try:
            records.complete(begun, stored(response))
        except OUTAGES:
            # The action's answer stands: it happened. Only its replay is not stored; the
            # claim lapses and a retry meets the domain's own conditions (already exists...).
            logger.warning("could not store the answer for an Idempotency-Key")
    elif response.status_code < 500 or code in RELEASED_OUTAGES:
        # A refusal or a throttle changed nothing, so nothing is stored: the
        # claim is given back and a retry with the key runs again (LOCKED, CONFLICT... are
        # temporary; a stored 404 would outlive the product created a moment later).
        try:
            records.release(begun)
        except OUTAGES:
            # The release is down too. Still the action's answer, never a 500;
            # the claim lapses at lockedUntil, so tell the client when a retry can run.
            metrics.count("ClaimReleaseFailed", pattern="idempotency")
            logger.warning("could not release an Idempotency-Key after a refusal")
            wait_ms = begun.locked_until - int(records.clock() * 1000)
            response.headers["Retry-After"] = str(max(1, math.ceil(wait_ms / 1000)))
    # OUTCOME_UNKNOWN (and a 500) keep the claim until it lapses: the write may have landed.
