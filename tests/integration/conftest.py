"""Integration tier helpers: handlers wired to DynamoDB Local, and fault injection."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from service import runtime
from tests.helpers import table_environment


@pytest.fixture
def wired(
    monkeypatch: pytest.MonkeyPatch, template: dict[str, Any], tables: Any, ddb: Any
) -> Iterator[Callable[[Any], None]]:
    """Handlers see DynamoDB Local's tables; ``wired(client)`` swaps in a client (with faults)."""
    for key, value in table_environment(template).items():
        monkeypatch.setenv(key, value)
    runtime.Lazy.reset_all()
    runtime.dynamodb.set(ddb)

    def use(client: Any) -> None:
        runtime.Lazy.reset_all()
        runtime.dynamodb.set(client)

    yield use
    runtime.Lazy.reset_all()


@pytest.fixture
def stream_table(ddb: Any, unique: str) -> str:
    """A table with a NEW_AND_OLD_IMAGES stream, for the stream pump's tests."""
    name = f"pump-{unique}"
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    return name
