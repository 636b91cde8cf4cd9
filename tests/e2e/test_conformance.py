"""The OpenAPI document is the contract the server keeps: schemathesis, every check and every phase
(examples, coverage, fuzzing, stateful over the document's links), against the local stack as
``make local`` wires it, with an administrator's token and with an ordinary user's. Zero failures,
and nothing a client sends gets a 5xx.

Bounded for ``make test`` (few examples, derandomized with a fixed seed); ``make fuzz`` is the
larger run (``tests/e2e/conformance.py``).

The handlers get a DynamoDB client with a long read timeout here: on a shared, loaded machine
DynamoDB Local can stall for seconds, and a lost reply is rightly answered 503 OUTCOME_UNKNOWN;
that is the emulator's latency, not the contract under test.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from service.api import keyed as keyed_module
from service.api import routes
from tests.e2e import conformance

SEED = 22  # derandomized: the same cases every run


@pytest.mark.parametrize(
    ("who", "phases", "examples"),
    [("admin", conformance.PHASES, 2), ("alice", conformance.PHASES, 2)],
)
def test_the_api_conforms_to_its_openapi_document(
    request: pytest.FixtureRequest,
    api_url: str,
    tmp_path: Path,
    who: str,
    phases: str,
    examples: int,
) -> None:
    person: Any = request.getfixturevalue(who)
    outcome = conformance.run(
        api_url,
        person.token,
        max_examples=examples,
        seed=SEED,
        phases=phases,
        report_dir=tmp_path,
        timeout=1200,
    )
    print(outcome.summary)
    assert outcome.server_errors == 0, outcome.output[-8000:]
    assert outcome.returncode == 0, outcome.output[-8000:]
    # every declared operation was exercised, and the run really sent requests
    assert f"Tested: {len(routes.ROUTES)}" in outcome.summary, outcome.summary
    assert re.search(r"[1-9]\d* generated", outcome.summary), outcome.summary
    the_idempotency_key_was_exercised(conformance.exchanges(tmp_path), who)


def the_idempotency_key_was_exercised(sent: list[conformance.Exchange], who: str) -> None:
    """The run sent ``Idempotency-Key``, valid and malformed, only where the document declares it,
    and the server answered as the document says: a malformed key is 400 (or 403 on a route the
    caller may not call at all: who may call is decided first); a valid one is never refused for
    its syntax."""
    keyed = [e for e in sent if "idempotency-key" in e.headers]
    assert keyed, "the run sent no Idempotency-Key"
    keyed_paths = [
        re.compile("^" + re.sub(r"\{\w+\}", "[^/]+", r.path) + "$")
        for r in routes.ROUTES
        if r.idempotent
    ]
    for exchange in keyed:
        path = "/" + exchange.url.split("//", 1)[1].split("/", 1)[1].split("?")[0]
        assert any(p.match(path) for p in keyed_paths), exchange
    # the run also tries undeclared methods on those paths, with the same headers: 405
    assert all(e.status == 405 for e in keyed if e.method != "POST")
    keyed = [e for e in keyed if e.method == "POST"]
    valid = [e for e in keyed if keyed_module.KEY_PATTERN.fullmatch(e.headers["idempotency-key"])]
    malformed = [e for e in keyed if e not in valid]
    assert valid and malformed, (len(valid), len(malformed))
    for exchange in malformed:
        assert exchange.status in (400, 403), exchange
        if who == "admin":  # an administrator may call every keyed route: never 403
            assert exchange.status == 400, exchange
    assert any(keyed_module.KEY_MALFORMED in e.body for e in malformed), malformed[:3]
    for exchange in valid:
        assert keyed_module.KEY_MALFORMED not in exchange.body, exchange
