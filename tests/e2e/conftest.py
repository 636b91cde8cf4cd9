"""End-to-end tier: HTTP against the local server, started in-process on a free port, on the
session's DynamoDB Local, exactly as ``make local`` wires it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from local import bridge
from local.dynamodb_local import DynamoDBLocal
from service import config, runtime
from tests.conftest import table_environment


@pytest.fixture(scope="session")
def api_url(
    dynamodb_local: DynamoDBLocal, tables: config.Tables, template: dict[str, Any]
) -> Iterator[str]:
    environment = {**dynamodb_local.environment(), **table_environment(template)}
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    runtime.Lazy.reset_all()
    server = bridge.serve(bridge.Bridge(), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        runtime.Lazy.reset_all()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
