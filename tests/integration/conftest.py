"""Integration tier helpers: handlers wired to DynamoDB Local, and fault injection.

IAM, as deployed: a handler called through :func:`invoke` acts as its function, and the clients
``wired`` injects check each DynamoDB call against that function's role policy as synthesized
(``local.iam``), so a call the role does not allow fails with AccessDeniedException here as on AWS.
Domain code called directly takes a client with a function's policy from ``role``:
``role("products").attach(client)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from local import iam
from service import catalog, runtime
from tests.helpers import POLICIES, table_environment


@pytest.fixture(scope="session", autouse=True)
def role_policies(template: dict[str, Any]) -> dict[str, iam.RolePolicy]:
    """Every function's role policy, by handler path, for :func:`invoke`."""
    POLICIES.update(iam.by_handler(template))
    return POLICIES


@pytest.fixture
def role(role_policies: dict[str, iam.RolePolicy]) -> Callable[[str], iam.RolePolicy]:
    """``role("products")``: that function's role policy (``.attach(client)`` enforces it)."""
    return lambda name: role_policies[catalog.spec(name).handler]


@pytest.fixture
def wired(
    monkeypatch: pytest.MonkeyPatch, template: dict[str, Any], tables: Any, ddb: Any
) -> Iterator[Callable[[Any], None]]:
    """Handlers see DynamoDB Local's tables; ``wired(client)`` swaps in a client (with faults)."""
    for key, value in table_environment(template).items():
        monkeypatch.setenv(key, value)
    runtime.Lazy.reset_all()
    runtime.dynamodb.set(iam.attach_current(ddb))

    def use(client: Any) -> None:
        runtime.Lazy.reset_all()
        runtime.dynamodb.set(iam.attach_current(client))

    yield use
    runtime.Lazy.reset_all()


@pytest.fixture
def pk_table(ddb: Any, unique: str) -> str:
    """An on-demand table keyed by a string ``pk``, new for each test."""
    name = f"pk-{unique}"
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


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
