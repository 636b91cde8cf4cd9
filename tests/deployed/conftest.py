"""The post-deploy tier: the e2e scenarios (``tests/scenarios.py``) against a stack, known only by
its outputs (``infra.outputs``: ``ApiUrl``, ``UserPoolId``, ``UserPoolClientId``).

* ``make test-deployed STACK=<name>``: the deployed stack's outputs (``--outputs FILE``, written
  by ``python -m infra.outputs``); users are created in its Cognito pool with the caller's AWS
  credentials (``AdminCreateUser``, ``AdminSetUserPassword``, ``AdminAddUserToGroup``,
  ``AdminInitiateAuth``) and deleted at the end (``AdminDeleteUser``).
* ``make test`` (no ``--outputs``): ``make local``'s stack, started by the same ``local.run``
  code, which writes its outputs file in the same shape; the tier reads that file, nothing else.
"""

from __future__ import annotations

import os
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
def stack_outputs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    given = request.config.getoption("--outputs")
    if given:
        yield outputs.load(Path(given))
        return
    from local import run
    from service import runtime

    assembly = request.getfixturevalue("assembly")
    written = tmp_path_factory.mktemp("local-stack") / "outputs.json"
    saved = dict(os.environ)  # local.run exports the handlers' environment: undo it afterwards
    try:
        with run.running(
            port=0,
            template_path=Path(assembly.directory) / "Turnstile.template.json",
            outputs_file=written,
        ):
            yield outputs.load(written)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.Lazy.reset_all()


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
