"""``Idempotency-Key``: the first request with a key runs, every retry of it gets the first answer.

A middleware of every route (after validation: a refused body never claims a key); routes not
declared ``idempotent`` ignore the header. The store and its guarantees are
``turnstile.idempotency``; this module is only the HTTP side: the key's syntax, its scope
(method, path, key), the fingerprint of the request, the claim handed to the route
(``app.context["claim"]``, for routes that commit their answer in their own transaction), and
which answers are stored.

Powertools' own idempotency utility is not used: it cannot commit the stored answer inside the
route's own DynamoDB transaction (exactly-once purchases and top-ups need that), and it would make
a second store next to ``turnstile.idempotency``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import APIGatewayRestResolver

from service.api.errors import HttpError
from service.api.routes import Route
from turnstile import idempotency, retry

logger = Logger()

KEY_PATTERN = re.compile(r"[\x21-\x7e]{1,128}")  # used with fullmatch
CLAIM = "claim"

Next = Callable[[APIGatewayRestResolver], Response]


def middleware(
    route: Route,
    store: Callable[[], idempotency.IdempotencyStore],
    answer: Callable[[Exception], Response | None],
) -> Callable[[APIGatewayRestResolver, Next], Response]:
    """``answer`` turns an exception into its response (``service.api.resolver.answer``), so
    refusals and outages can be stored and replayed like any other answer."""

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
        if key is None or not route.idempotent:
            return next_middleware(app)
        if not KEY_PATTERN.fullmatch(key):
            raise HttpError("BAD_REQUEST", "Idempotency-Key must be 1-128 visible ASCII characters")
        scope = f"{event.http_method} {event.path}#{key}"
        fingerprint = idempotency.fingerprint(event.http_method, event.path, event.json_body)
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
        except (retry.OutcomeUnknown, retry.RetriesExhausted) as exc:
            # the idempotency store itself is unavailable: an outage, not a bug
            outage = answer(exc)
            if outage is None:  # pragma: no cover - answer() maps every outage
                raise
            return outage

    return keyed


def claim_of(app: APIGatewayRestResolver) -> idempotency.Claim | None:
    """The claim of this request's key, if it came with one."""
    found: Any = app.context.get(CLAIM)
    return found


def _replay(replay: idempotency.Replay) -> Response:
    return Response(
        status_code=replay.status_code,
        content_type=content_types.APPLICATION_JSON,
        body=replay.body,
        headers={"Idempotent-Replayed": "true"},
    )


def _settle(
    records: idempotency.IdempotencyStore, begun: idempotency.Claim, response: Response
) -> None:
    body = response.body
    if response.status_code < 500:
        try:
            records.complete(begun, response.status_code, body)
        except (retry.OutcomeUnknown, retry.RetriesExhausted):
            # The action's answer stands: it happened. Only its replay is not stored; the
            # claim lapses and a retry meets the domain's own conditions (already exists...).
            logger.warning("could not store the answer for an Idempotency-Key")
    elif isinstance(body, dict) and body.get("error") == "THROTTLED":
        records.release(begun)  # nothing was applied: let a retry run at once
    # OUTCOME_UNKNOWN keeps the claim until it lapses: the write may still land meanwhile.
