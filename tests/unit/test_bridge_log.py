"""The local bridge's request log: one structured line per request, whatever the path holds."""

from __future__ import annotations

import json
import logging

from werkzeug.test import Client

from local.bridge import Bridge

FORGED = "2026-11-24 12:00:00,000 POST /users/alice/wallet/top-ups -> 200 3.1ms wallets"


def test_a_newline_in_the_path_cannot_forge_a_log_line(caplog):
    # Given an unauthenticated request whose path carries an encoded newline and a fake entry
    client = Client(Bridge(specs=()))
    with caplog.at_level(logging.INFO, logger="local"):
        answer = client.get("/nothing%0a" + FORGED.replace(" ", "%20"))
    # Then it is answered (404) and logged as one line, a JSON object holding the path as data
    assert answer.status_code == 404
    (record,) = [r for r in caplog.records if r.name == "local"]
    line = record.getMessage()
    assert "\n" not in line and "\r" not in line
    logged = json.loads(line)
    assert logged["path"] == "/nothing\n" + FORGED
    assert logged["status"] == 404 and logged["method"] == "GET"


def test_the_request_line_carries_method_path_status_and_function(caplog):
    client = Client(Bridge(specs=()))
    with caplog.at_level(logging.INFO, logger="local"):
        client.get("/openapi.json?x=1")
    (record,) = [r for r in caplog.records if r.name == "local"]
    logged = json.loads(record.getMessage())
    assert logged["method"] == "GET"
    assert logged["path"] == "/openapi.json"
    assert logged["query"] == "x=1"
    assert logged["status"] == 200
    assert logged["function"] == "-"
    assert isinstance(logged["ms"], float)


class _BrokenVerifier:
    def verify(self, authorization: str | None) -> dict[str, str]:
        raise OverflowError("timestamp out of range for platform time_t")


def test_a_failure_of_the_bridge_itself_is_logged_and_answered_as_json(caplog):
    # Given a verifier that fails in a way nobody foresaw (as shaping a far-future exp once did)
    bridge = Bridge(specs=(), verifier=_BrokenVerifier())
    bridge.match = lambda method, path: (object(), {})  # type: ignore[method-assign,assignment,return-value]
    client = Client(bridge)
    with caplog.at_level(logging.INFO, logger="local"):
        answer = client.get("/products/p1", headers={"Authorization": "Bearer x"})
    # Then the answer is the contract's JSON body, and the failure and the request are logged
    assert answer.status_code == 500
    assert answer.json == {"error": "INTERNAL", "message": "internal error"}
    messages = [r.getMessage() for r in caplog.records if r.name == "local"]
    assert any("the bridge failed on GET /products/p1" in m for m in messages), messages
    assert json.loads(messages[-1])["status"] == 500
