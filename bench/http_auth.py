"""Section ``http``: the flash-sale products workload over HTTP through the local bridge, with and
without token verification, to show that verifying ID tokens is not the bottleneck (the
goal: with / without <= 1.1).

Both bridges serve the same handlers on the same DynamoDB Local in the same run, each on its own
port; 100 ordinary users of the local identity provider (pool, client and group from the
synthesized template) each buy from their own thread and keep-alive connection, with their own ID
token:

* ``HTTP, every token verified``: ``Bridge(verifier=TokenVerifier)``, every request (RS256
  signature, ``iss``/``aud``/``token_use``/``exp``; the JWKS fetched once and cached);
* ``HTTP, tokens verified, answers kept``: as ``make local`` serves it, the verifier behind
  ``bridge.CachedVerifier`` (a verified answer kept per token for 300 s, never past ``exp``, as the
  deployed authorizer's default ``resultsCacheTtl``): each user's token is verified once per run;
* ``HTTP, claims injected``: a bridge whose "verifier" only looks the token up in a table of claims
  verified beforehand (:class:`InjectedClaims`): the same claims reach the handlers, no crypto.

Each round is 1000 purchase attempts of one unit from 100 threads against a fresh product of 100
units (created by an administrator); the variants alternate for ``rounds`` rounds and the
median round of each is reported, next to the raw-write ceiling of this run (1000 unconditional
puts from 100 threads, straight to DynamoDB, no HTTP). Client threads, server threads and the
verifier share one Python process (and its GIL) on the same cores as DynamoDB Local, so the figure
is what the local server pays per request, not what API Gateway would.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import requests

from bench.harness import Meter, measure, median_row, raw_ceiling, row
from local import bridge, template
from local.dynamodb_local import DynamoDBLocal
from local.identity import AuthConfig, IdentityProvider, cognito_client
from local.issue_token import id_token
from local.run import exported
from local.tokens import raw_token
from service import runtime
from service.domain.errors import Unauthorized

ATTEMPTS = 1000
WORKERS = 100
STOCK = 100
ROUNDS = 3
INJECTED = "HTTP, claims injected"
VERIFIED = "HTTP, every token verified"
KEPT = "HTTP, tokens verified, answers kept"
VARIANTS = (INJECTED, VERIFIED, KEPT)


class InjectedClaims:
    """A stand-in verifier with no cryptography: the claims of tokens verified beforehand."""

    def __init__(self, claims_by_token: dict[str, dict[str, str]]) -> None:
        self._claims = claims_by_token

    def verify(self, authorization: str | None) -> dict[str, str]:
        claims = self._claims.get(raw_token(authorization))
        if claims is None:
            raise Unauthorized("not one of the bench's tokens")
        return claims


@contextmanager
def handler_environment(db: DynamoDBLocal, loaded: dict[str, Any], client: Any) -> Iterator[None]:
    """What ``make local`` puts in the environment for the handlers, and the metered client."""
    physical = {logical: logical for logical in template.resources(loaded, "AWS::DynamoDB::Table")}
    environment = {
        **db.environment(),
        **template.merged_environment(template.function_environments(loaded, physical)),
    }
    with exported(environment):
        runtime.dynamodb.set(client)
        yield


def users(auth: AuthConfig, count: int, *, admin: bool = False) -> list[str]:
    """ID tokens of ``count`` distinct users of the local provider."""
    client = cognito_client(auth.endpoint, auth.region)
    prefix = "bench-admin" if admin else "bench-user"
    return [id_token(auth, f"{prefix}-{n:03d}", admin=admin, client=client) for n in range(count)]


def purchase_round(url: str, admin_token: str, tokens: list[str]) -> Callable[[int], str]:
    """A fresh product of ``STOCK`` units on the server at ``url``; returns the attempt function
    (attempt ``i`` is made by the thread of user ``i % WORKERS``, on that thread's connection)."""
    product_id = f"bench-http-{uuid.uuid4().hex[:8]}"
    created = requests.post(
        f"{url}/products",
        json={"productId": product_id, "name": "bench", "stock": STOCK},
        headers={"Authorization": admin_token},
        timeout=30,
    )
    if created.status_code != 201:
        raise RuntimeError(f"cannot create the product: {created.status_code} {created.text}")
    local = threading.local()

    def attempt(index: int) -> str:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
            session.headers["Authorization"] = f"Bearer {tokens[index % len(tokens)]}"
        response = session.post(
            f"{url}/products/{product_id}/purchases", json={"quantity": 1}, timeout=60
        )
        if response.status_code == 201:
            return "ok"
        return str(response.json().get("error", response.status_code))

    return attempt


def run(
    db: DynamoDBLocal,
    loaded: dict[str, Any],
    client: Any,
    meter: Meter,
    names: dict[str, str],
    *,
    rounds: int = ROUNDS,
) -> list[dict[str, Any]]:
    """The rows of the section: the ceiling, then the median round of each variant."""
    # the provider is a Werkzeug server: one access line per sign-in would bury the table
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with IdentityProvider() as provider, handler_environment(db, loaded, client):
        auth = provider.provision(loaded)
        verifier = auth.verifier()
        (admin_token,) = users(auth, 1, admin=True)
        tokens = users(auth, WORKERS)
        injected = InjectedClaims({t: verifier.verify(t) for t in [admin_token, *tokens]})
        verifiers: dict[str, bridge.Verifier] = {
            INJECTED: injected,
            VERIFIED: verifier,
            KEPT: bridge.CachedVerifier(verifier),
        }
        servers = {
            name: bridge.serve(bridge.Bridge(verifier=verifiers[name]), "127.0.0.1", 0)
            for name in VARIANTS
        }
        quiet = bridge.log.level
        bridge.log.setLevel("WARNING")  # one line per request would drown the table
        try:
            ceiling = raw_ceiling(client, names["products"], "productId", ATTEMPTS, WORKERS)
            results: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
            for n in range(rounds):  # each round in another order: none always runs first
                for name in VARIANTS[n % 3 :] + VARIANTS[: n % 3]:
                    url = f"http://127.0.0.1:{servers[name].server_port}"
                    attempt = purchase_round(url, admin_token, tokens)
                    outcome, snapshot = measure(meter, ATTEMPTS, WORKERS, attempt)
                    result = row(
                        name,
                        outcome,
                        snapshot,
                        ceiling=ceiling,
                        useful=outcome.outcomes.get("ok", 0),
                        requests=ATTEMPTS,
                    )
                    result["requests_per_s"] = round(ATTEMPTS / outcome.wall, 1)
                    results[name].append(result)
        finally:
            bridge.log.setLevel(quiet)
            for server in servers.values():
                server.shutdown()
        assert verifier.fetches == 1, "the JWKS must be fetched once and cached"
    chosen = {
        name: {**median_row(rows), "rounds_wall_s": [r["wall_s"] for r in rows]}
        for name, rows in results.items()
    }
    for name in (VERIFIED, KEPT):
        ratio = chosen[name]["wall_s"] / chosen[INJECTED]["wall_s"]
        chosen[name]["over_injected"] = round(ratio, 3)
    ceiling_row = {
        "strategy": "raw writes (ceiling, no HTTP)",
        "wall_s": round(ceiling, 3),
        "wall_over_ceiling": 1.0,
        "requests_per_s": round(ATTEMPTS / ceiling, 1),
    }
    return [ceiling_row, *(chosen[name] for name in VARIANTS)]
