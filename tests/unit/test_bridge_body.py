"""The local bridge refuses a body over its limit having read at most the limit and one byte,
however the body is framed (``Content-Length`` or ``Transfer-Encoding: chunked``)."""

from __future__ import annotations

import io
import json
from typing import Any

from werkzeug.test import EnvironBuilder

from local.bridge import MAX_REQUEST_BYTES, Bridge
from service import catalog

PRODUCTS = next(spec for spec in catalog.API_FUNCTIONS if spec.name == "products")


class CountingBody(io.RawIOBase):
    """``size`` bytes of body, handed out at most ``piece`` bytes a read (as the server's
    dechunker hands out one chunk at a time), counting every byte read."""

    def __init__(self, size: int, piece: int = 64 * 1024) -> None:
        self.left = size
        self.piece = piece
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = min(len(buffer), self.piece, self.left)
        buffer[:size] = b"x" * size
        self.left -= size
        self.read_bytes += size
        return size


class Accepting:
    def verify(self, authorization: str | None) -> dict[str, str]:
        return {"sub": "alice", "cognito:username": "alice"}


def call(body: CountingBody, *, chunked: bool) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """POST /products through the bridge with ``body`` as the input stream, framed as asked; the
    status, the answer and the events the handler was called with."""
    events: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        events.append(event)
        return {"statusCode": 201, "body": "{}"}

    bridge = Bridge((PRODUCTS,), verifier=Accepting(), functions={PRODUCTS.handler: handler})
    headers = [("Authorization", "Bearer t"), ("Content-Type", "application/json")]
    environ = EnvironBuilder("/products", method="POST", headers=headers).get_environ()
    environ["wsgi.input"] = body
    if chunked:  # as Werkzeug's server sets it up for a chunked request: no length, terminated
        environ.pop("CONTENT_LENGTH", None)
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
        environ["wsgi.input_terminated"] = True
    else:
        environ["CONTENT_LENGTH"] = str(body.left)
    statuses: list[str] = []
    answer = b"".join(bridge(environ, lambda status, headers: statuses.append(status)))
    return int(statuses[0].split()[0]), json.loads(answer), events


def test_a_chunked_body_over_the_limit_is_refused_having_read_at_most_the_limit_and_a_byte():
    # Given a chunked body four times the bridge's limit
    body = CountingBody(4 * MAX_REQUEST_BYTES)
    # When it is sent to a route
    status, answer, events = call(body, chunked=True)
    # Then it is refused with 413, the handler never called, and no more than limit + 1 bytes read
    assert (status, answer["error"]) == (413, "PAYLOAD_TOO_LARGE")
    assert events == []
    assert body.read_bytes <= MAX_REQUEST_BYTES + 1


def test_a_chunked_body_within_the_limit_reaches_the_handler_whole():
    body = CountingBody(MAX_REQUEST_BYTES)  # exactly the limit, in many reads
    status, _, events = call(body, chunked=True)
    assert status == 201
    (event,) = events
    assert event["body"] == "x" * MAX_REQUEST_BYTES


def test_a_body_whose_length_is_over_the_limit_is_refused_before_any_byte_is_read():
    body = CountingBody(MAX_REQUEST_BYTES + 1)
    status, answer, events = call(body, chunked=False)
    assert (status, answer["error"], events) == (413, "PAYLOAD_TOO_LARGE", [])
    assert body.read_bytes == 0
