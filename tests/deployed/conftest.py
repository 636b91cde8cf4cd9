"""The post-deploy tier: the e2e scenarios (``tests/scenarios.py``) against a stack, known only by
its outputs file (``--outputs FILE``; ``infra.outputs``: ``ApiUrl``, ``UserPoolId``,
``UserPoolClientId``). It runs through one entry point, ``make test-deployed``:

* ``make test-deployed STACK=<name>``: the deployed stack's outputs, written by
  ``python -m infra.outputs``; users are created in its Cognito pool with the caller's AWS
  credentials (``AdminCreateUser``, ``AdminSetUserPassword``, ``AdminAddUserToGroup``,
  ``AdminInitiateAuth``) and deleted at the end (``AdminDeleteUser``).
* ``make test-deployed LOCAL=1``: a running ``make local``'s outputs file, same keys plus
  ``IdentityEndpoint`` (where its Cognito answers). ``make test`` runs exactly that against a
  local stack of its own (``tests/e2e/test_make_targets.py``); a plain ``pytest`` run leaves this
  folder out (``tests/conftest.py``), having no stack to point it at.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from infra import outputs
from local.identity import AuthConfig, cognito_client
from local.issue_token import id_token


class Person(requests.Session):
    """A person of the stack's user pool: every request sends their ID token."""

    def __init__(self, username: str, token: str, sub: str) -> None:
        super().__init__()
        self.username = username
        self.sub = sub
        self.headers["Authorization"] = f"Bearer {token}"


@pytest.fixture(scope="package")
def stack_outputs(request: pytest.FixtureRequest) -> dict[str, str]:
    given = request.config.getoption("--outputs")
    if not given:
        raise pytest.UsageError(
            "tests/deployed needs a stack's outputs: make test-deployed STACK=<name> "
            "(a deployed stack) or LOCAL=1 (a running make local), or --outputs FILE"
        )
    return outputs.load(Path(given))


@pytest.fixture(scope="package")
def api(stack_outputs: dict[str, str]) -> str:
    return stack_outputs[outputs.API_URL]


@pytest.fixture(scope="package")
def pool(stack_outputs: dict[str, str]) -> tuple[AuthConfig, Any]:
    """The stack's pool as a token client sees it, and a ``cognito-idp`` client for it (the
    region is the pool id's prefix; the local stack names its own endpoint)."""
    pool_id = stack_outputs[outputs.USER_POOL_ID]
    region = pool_id.split("_", 1)[0]
    endpoint = stack_outputs.get(outputs.IDENTITY_ENDPOINT)
    client = (
        cognito_client(endpoint, region)
        if endpoint
        else boto3.client("cognito-idp", region_name=region)
    )
    auth = AuthConfig(endpoint or "", region, pool_id, stack_outputs[outputs.USER_POOL_CLIENT_ID])
    return auth, client


@pytest.fixture(scope="package")
def run_tag() -> str:
    """Names every user and item this run creates."""
    return f"deployed-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="package")
def people(pool: tuple[AuthConfig, Any], run_tag: str) -> Iterator[dict[str, Person]]:
    """An administrator and an ordinary user, created for this run and deleted after it."""
    auth, client = pool
    created: list[str] = []
    try:
        found = {}
        for role, admin in (("admin", True), ("user", False)):
            username = f"{run_tag}-{role}"
            created.append(username)
            token = id_token(auth, username, admin=admin, client=client)
            attributes = client.admin_get_user(UserPoolId=auth.user_pool_id, Username=username)[
                "UserAttributes"
            ]
            sub = next(a["Value"] for a in attributes if a["Name"] == "sub")
            found[role] = Person(username, token, sub)
        yield found
    finally:
        for username in created:
            client.admin_delete_user(UserPoolId=auth.user_pool_id, Username=username)
