"""Fixtures shared by every tier.

* ``template``: the stack synthesized once per session (cdk-nag runs as part of it);
  ``assembly``: that synth's cloud assembly (nag's validation report, acknowledgements).
* ``dynamodb_local``: Amazon DynamoDB Local, started once per session on a free port, stopped at
  the end (and killed by the kernel if pytest itself dies).
* ``tables``: the template's tables created in DynamoDB Local; physical names by logical name.
* ``ddb``: a thread-safe low-level client for DynamoDB Local, with turnstile's retry settings.

``claims_of`` / ``ADMIN`` / ``ALICE`` / ``BOB``: verified callers as API Gateway's Cognito
authorizer hands them to a handler (``requestContext.authorizer.claims``), for tiers that call
handlers with events. The HTTP tier uses real tokens of the local identity provider instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from local import template as cfn
from local.dynamodb_local import DynamoDBLocal
from service import config
from turnstile import retry


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--outputs",
        default=None,
        help="a stack's outputs as JSON (python -m infra.outputs): tests/deployed runs against "
        "that stack instead of make local's",
    )


def claims_of(sub: str, *, admin: bool = False) -> dict[str, str]:
    """A caller's claims in API Gateway's REST shape (every value a string, groups joined)."""
    claims = {"sub": sub, "token_use": "id", "cognito:username": sub}
    if admin:
        claims["cognito:groups"] = "admins"
    return claims


ADMIN = claims_of("test-admin", admin=True)
ALICE = claims_of("alice")
BOB = claims_of("bob")


def signed_in(event: dict[str, Any], claims: dict[str, str] | None) -> dict[str, Any]:
    """``event`` as the authorizer passes it on for ``claims`` (``None``: no authorizer ran)."""
    context = dict(event.get("requestContext") or {})
    context.pop("authorizer", None)
    if claims is not None:
        context["authorizer"] = {"claims": claims}
    return {**event, "requestContext": context}


@pytest.fixture(scope="session")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The cloud assembly of one synth (cdk-nag's report and acknowledgements included)."""
    import app

    return app.build(outdir=str(tmp_path_factory.mktemp("cdk.out"))).synth()


@pytest.fixture(scope="session")
def template(assembly: Any) -> dict[str, Any]:
    import app

    return dict(assembly.get_stack_by_name(app.STACK_NAME).template)


def table_environment(template: dict[str, Any]) -> dict[str, str]:
    """The table variables every function gets, with physical name = logical id (as locally)."""
    names = {logical: logical for logical in cfn.resources(template, "AWS::DynamoDB::Table")}
    return cfn.merged_environment(cfn.function_environments(template, names))


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    with DynamoDBLocal() as db:
        yield db


@pytest.fixture(scope="session")
def ddb(dynamodb_local: DynamoDBLocal) -> Any:
    return dynamodb_local.client(config=retry.client_config())


@pytest.fixture(scope="session")
def tables(ddb: Any, template: dict[str, Any]) -> config.Tables:
    cfn.create_tables(ddb, template)
    return config.Tables(cfn.table_names(template))


@pytest.fixture
def unique() -> str:
    """A fresh id, so tests sharing the session's tables never see each other's items."""
    return uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def streams(dynamodb_local: DynamoDBLocal) -> Any:
    """A DynamoDB Streams client for DynamoDB Local."""
    return dynamodb_local.streams_client()
