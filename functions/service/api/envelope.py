"""What a request's body must be before its content is looked at: size (413), media type (415),
present when the route takes one and absent when it does not, UTF-8, and JSON without NaN,
Infinity or numbers out of float range (400 BAD_JSON).

Powertools validates bodies against their models but has no size limit, parses a body sent
without a Content-Type (and a form) as if it were JSON, and accepts ``NaN`` in JSON. So these
checks are one small function, :func:`problem`, that the resolver runs in two places: as the
first middleware of every route (a request whose body passed validation) and in the exception
handlers of validation errors (a request whose body did not), so a 413 or a 415 wins over a 400
exactly as API Gateway would decide it. :func:`parse_json` is the resolver's JSON deserializer.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import APIGatewayRestResolver
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from service import config
from service.api.errors import HttpError
from service.api.routes import Route


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError("number out of range")
    return value


def parse_json(text: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and 1e400; errors are ``JSONDecodeError`` so
    Powertools reports them as a validation error of type ``json_invalid`` (400 BAD_JSON)."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_parse_float)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise json.JSONDecodeError(str(exc), text, 0) from exc


def problem(event: BaseProxyEvent, route: Route | None) -> HttpError | None:
    """What is wrong with the body of ``event`` for ``route``, before its content is read."""
    if route is None:
        return None
    raw = event.body
    if raw is None or raw == "":
        if route.body is None:
            return None
        return HttpError("BAD_JSON", "this request needs a JSON body")
    try:
        data = base64.b64decode(raw, validate=True) if event.is_base64_encoded else raw.encode()
    except (binascii.Error, ValueError):
        return HttpError("BAD_REQUEST", "the body is not valid base64")
    if len(data) > config.MAX_BODY_BYTES:
        return HttpError(
            "PAYLOAD_TOO_LARGE", f"the body must be at most {config.MAX_BODY_BYTES} bytes"
        )
    if route.body is None:
        return HttpError("BAD_REQUEST", f"{route.method} {route.path} takes no body")
    media_type = (event.headers.get("content-type") or "").split(";")[0].strip().lower()
    if media_type != "application/json":
        return HttpError("UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return HttpError("BAD_JSON", "the body is not UTF-8")
    return None


def middleware(route: Route) -> Callable[[APIGatewayRestResolver, Callable[..., Response]], Any]:
    """The check as the first middleware of ``route`` (its body already passed validation)."""

    def envelope(app: APIGatewayRestResolver, next_middleware: Callable[..., Response]) -> Any:
        refusal = problem(app.current_event, route)
        if refusal is not None:
            raise refusal
        return next_middleware(app)

    return envelope
