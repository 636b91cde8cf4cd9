"""Unit tier: no network, no Node, no CDK synth. moto stands in for DynamoDB for API *shape*
only (never concurrency: under threads moto loses conditional updates); its tables are the
stack's, from the checked-in snapshot ``tests/unit/stack_tables.json`` (``tests.tables``), which
the infra tier compares with a real synth.

Two guards keep it that way: a unit test may not ask for the synth fixtures (``template``,
``assembly``, ``tables``: collection fails), and every unit test runs with ``node``, ``npx`` and
``cdk`` on ``PATH`` (and jsii's ``JSII_NODE``) replaced by a stub that fails, so neither an
in-process synth nor a child process reaching for Node can pass unnoticed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from service import config, runtime
from tests import tables as stack_tables
from turnstile_ddb import retry

UNIT = Path(__file__).resolve().parent
# What only a synth gives; the other tiers have them (tests/conftest.py).
SYNTH_FIXTURES = frozenset({"template", "assembly", "tables"})
NODE_COMMANDS = ("node", "npx", "cdk")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse, at collection, a unit test that would synthesize the stack."""
    wanting = [
        f"{item.nodeid} uses {sorted(SYNTH_FIXTURES & set(getattr(item, 'fixturenames', ())))}"
        for item in items
        if item.path.is_relative_to(UNIT)
        and SYNTH_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]
    if wanting:
        raise pytest.UsageError(
            "the unit tier runs without Node or a CDK synth: move these to tests/infra, or use "
            "the tables snapshot (moto_ddb):\n" + "\n".join(wanting)
        )


@pytest.fixture(scope="session")
def no_node(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of stubs named node, npx and cdk that fail, saying who called them."""
    stubs = tmp_path_factory.mktemp("no-node")
    for name in NODE_COMMANDS:
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\necho "the unit tier ran {name} $*" >&2\nexit 97\n')
        stub.chmod(0o755)
    return stubs


@pytest.fixture(autouse=True)
def _without_node(no_node: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every unit test runs with the stubs first on PATH and as jsii's Node."""
    monkeypatch.setenv("PATH", f"{no_node}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("JSII_NODE", str(no_node / "node"))


@pytest.fixture
def moto_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """moto only intercepts *.amazonaws.com: drop local endpoints, use fake credentials, and give
    the handlers the stack's table variables (from the snapshot)."""
    for name in (
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_DYNAMODB",
        "AWS_ENDPOINT_URL_DYNAMODBSTREAMS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    environment: dict[str, str] = stack_tables.load()["environment"]
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    yield environment


@pytest.fixture
def moto_ddb(moto_env: dict[str, str]) -> Iterator[Any]:
    """A moto DynamoDB with the stack's tables (from the snapshot), injected into the handlers."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1", config=retry.client_config())
        stack_tables.create_tables(client, stack_tables.load())
        runtime.Lazy.reset_all()
        runtime.dynamodb.set(client)
        yield client
        runtime.Lazy.reset_all()


@pytest.fixture
def moto_tables(moto_ddb: Any) -> config.Tables:
    names = [key.removesuffix("_TABLE").lower() for key in os.environ if key.endswith("_TABLE")]
    return config.Tables.from_env(*names)
