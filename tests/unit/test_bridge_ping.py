"""``GET /_ping``: the local bridge answers it itself (the yardstick of the soak's step mode),
without a token, a verifier or a function."""

from __future__ import annotations

from werkzeug.test import Client

from local.bridge import Bridge


class _RefusingVerifier:
    def verify(self, authorization: str | None) -> dict[str, str]:
        raise AssertionError("the ping must not verify a token")


def test_the_bridge_answers_its_ping_itself() -> None:
    client = Client(Bridge(specs=(), verifier=_RefusingVerifier()))
    answer = client.get("/_ping")
    assert answer.status_code == 200
    assert answer.get_json() == {"ok": True}


def test_the_ping_is_get_only() -> None:
    answer = Client(Bridge(specs=())).post("/_ping")
    assert answer.status_code == 405
    assert answer.headers["Allow"] == "GET"
