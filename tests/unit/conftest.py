"""Unit tier: no network. moto stands in for DynamoDB for API *shape* only (never concurrency:
under threads moto loses conditional updates)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local import template as cfn
from service import config, runtime
from tests.helpers import table_environment
from turnstile_ddb import retry


@pytest.fixture
def moto_env(monkeypatch: pytest.MonkeyPatch, template: dict[str, Any]) -> Iterator[dict[str, str]]:
    """moto only intercepts *.amazonaws.com: drop local endpoints, use fake credentials, and give
    the handlers the template's table variables."""
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
    environment = table_environment(template)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    yield environment


@pytest.fixture
def moto_ddb(moto_env: dict[str, str], template: dict[str, Any]) -> Iterator[Any]:
    """A moto DynamoDB with the template's tables, injected into the handlers."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1", config=retry.client_config())
        cfn.create_tables(client, template)
        runtime.Lazy.reset_all()
        runtime.dynamodb.set(client)
        yield client
        runtime.Lazy.reset_all()


@pytest.fixture
def moto_tables(moto_ddb: Any) -> config.Tables:
    names = [key.removesuffix("_TABLE").lower() for key in os.environ if key.endswith("_TABLE")]
    return config.Tables.from_env(*names)
