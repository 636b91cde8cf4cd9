"""End-to-end tier: HTTP against the local server, started in-process on a free port, on the
session's DynamoDB Local and the local identity provider, exactly as ``make local`` wires them:
every function runs from its synthesized asset and the layer in a worker of its own, its role's
policy enforced (``functions``, started once per session).

Every route but the documentation needs an ID token (docs/identity.md), so tests call the API as a
person:

* ``admin``: a member of ``admins`` (catalogue writes, acting on others' behalf);
* ``alice``, ``bob``: ordinary users;
* ``users(n)``: ``n`` distinct ordinary users, created through the provider's ``cognito-idp`` API.

Each is a :class:`Person`: a ``requests.Session`` that sends the person's token, with ``sub`` (the
identity the handlers see) and ``session()`` for a fresh one (a thread of its own). Tokens are
fetched once, up front (a ``mock_aws`` elsewhere in the process would reset moto's users; tokens
already issued stay verifiable, the signing key is fixed) and live an hour, longer than the tier.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from local import bridge, run, workers
from local.dynamodb_local import DynamoDBLocal
from local.identity import AuthConfig, IdentityProvider, cognito_client
from local.issue_token import id_token
from local.tokens import TokenVerifier
from service import config
from tests.helpers import Person, table_environment


@pytest.fixture(scope="session")
def identity(template: dict[str, Any]) -> Iterator[AuthConfig]:
    """The local identity provider, provisioned from the synthesized template."""
    with IdentityProvider() as provider:
        yield provider.provision(template)


@pytest.fixture(scope="session")
def verifier(identity: AuthConfig) -> TokenVerifier:
    return identity.verifier()


def person(
    auth: AuthConfig, verifier: TokenVerifier, username: str, admin: bool, client: Any = None
) -> Person:
    token = id_token(auth, username, admin=admin, client=client)
    return Person(username, token, verifier.verify_claims(token)["sub"])


@pytest.fixture(scope="session")
def admin(identity: AuthConfig, verifier: TokenVerifier) -> Person:
    return person(identity, verifier, "e2e-admin", admin=True)


@pytest.fixture(scope="session")
def alice(identity: AuthConfig, verifier: TokenVerifier) -> Person:
    return person(identity, verifier, "e2e-alice", admin=False)


@pytest.fixture(scope="session")
def bob(identity: AuthConfig, verifier: TokenVerifier) -> Person:
    return person(identity, verifier, "e2e-bob", admin=False)


@pytest.fixture(scope="session")
def users(identity: AuthConfig, verifier: TokenVerifier) -> Callable[[int], list[Person]]:
    """``users(n)``: the first ``n`` of one session-wide crowd of ordinary users (created once)."""
    crowd: list[Person] = []
    client = cognito_client(identity.endpoint, identity.region)

    def first(n: int) -> list[Person]:
        while len(crowd) < n:
            name = f"e2e-user-{len(crowd):04d}"
            crowd.append(person(identity, verifier, name, admin=False, client=client))
        return crowd[:n]

    return first


@pytest.fixture(scope="session")
def functions(
    dynamodb_local: DynamoDBLocal, tables: config.Tables, template: dict[str, Any], assembly: Any
) -> Iterator[workers.Workers]:
    """Every function of the synthesized stack, each in its worker as ``make local`` runs it:
    its asset, the layer, the template's environment, its role's policy enforced. Started once."""
    with workers.running(
        template, Path(assembly.directory), dynamodb_local.environment()
    ) as running:
        yield running


@pytest.fixture(scope="session")
def api_url(
    dynamodb_local: DynamoDBLocal,
    tables: config.Tables,
    template: dict[str, Any],
    verifier: TokenVerifier,
    functions: workers.Workers,
) -> Iterator[str]:
    environment = {**dynamodb_local.environment(), **table_environment(template)}
    verifying = bridge.CachedVerifier(verifier)  # as make local serves it
    with run.exported(environment):
        server = bridge.serve(
            bridge.Bridge(verifier=verifying, functions=functions), "127.0.0.1", 0
        )
        try:
            yield f"http://127.0.0.1:{server.server_port}"
        finally:
            server.shutdown()
