"""What a request's body must be before its content is looked at: size (413), media type (415),
present when the route takes one and absent when it does not, UTF-8, and JSON without NaN,
Infinity or numbers out of float range (400 BAD_JSON).

Powertools validates bodies against their models but has no size limit, parses a body sent
without a Content-Type (and a form) as if it were JSON, fails on a multipart type without a
boundary, compares media types case-sensitively, and accepts ``NaN`` in JSON. So these checks are
one small function, :func:`problem`, that the resolver runs before Powertools sees the request,
so a 413 or a 415 wins over a 400 exactly as API Gateway would decide it, and nothing a client
puts in ``Content-Type`` reaches Powertools' own parsing (:func:`normalized` hands it the
canonical ``application/json``). :func:`parse_json` is the resolver's JSON deserializer.

Media types (RFC 9110 8.3.1): the type and subtype are case-insensitive, so are parameter names;
``application/json`` takes no parameter of its own, and ``charset`` is tolerated when it says
UTF-8 (RFC 8259 8.1: JSON between systems is UTF-8), refused (415) when it names another.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from typing import Any

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


def json_media_type(content_type: str | None) -> bool:
    """Whether ``content_type`` is ``application/json`` (any case, optional UTF-8 charset)."""
    if not content_type:
        return False
    media_type, *parameters = content_type.split(";")
    if media_type.strip().lower() != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower().replace("_", "-")
            if charset not in ("utf-8", "utf8"):
                return False
    return True


def content_type(headers: Mapping[str, Any] | None) -> str | None:
    for name, value in (headers or {}).items():
        if name.lower() == "content-type":
            return str(value)
    return None


def normalized(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` with a JSON ``Content-Type`` spelled ``application/json``, as Powertools
    compares it (exactly); other values are left as they are (:func:`problem` refuses them)."""
    if not json_media_type(content_type(event.get("headers"))):
        return event
    event = dict(event)
    for field, canonical in (("headers", "application/json"), ("multiValueHeaders", None)):
        headers = event.get(field)
        if not headers:
            continue
        event[field] = {
            name: (value if name.lower() != "content-type" else canonical or ["application/json"])
            for name, value in headers.items()
        }
    return event


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
    if not json_media_type(content_type(event.headers)):
        return HttpError("UNSUPPORTED_MEDIA_TYPE", "send the body as application/json")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return HttpError("BAD_JSON", "the body is not UTF-8")
    return None
