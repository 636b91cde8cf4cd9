"""Integration tier helpers: handlers wired to DynamoDB Local, and fault injection."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ReadTimeoutError

from service import runtime
from tests.conftest import table_environment


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


def invoke(handler: Callable[..., dict[str, Any]], event: dict[str, Any]) -> tuple[int, dict, Any]:
    response = handler(event, None)
    body = json.loads(response["body"]) if response.get("body") else None
    return response["statusCode"], response.get("headers") or {}, body


class Faults:
    """botocore ``before-send`` hooks: decide, per call, what DynamoDB "says".

    ``throttle(op, times)`` answers the next ``times`` calls of ``op`` with a throttling error
    without sending them. ``lose_reply(op, times)`` sends the next ``times`` calls of ``op`` to
    DynamoDB for real (so they are applied) and then raises a read timeout, as if the reply had
    been lost on the way back.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.plans: dict[str, list[str]] = {}
        self.sent: dict[str, int] = {}
        client.meta.events.register("before-send.dynamodb", self._before_send)

    def throttle(self, operation: str, times: int) -> None:
        self.plans.setdefault(operation, []).extend(["throttle"] * times)

    def lose_reply(self, operation: str, times: int = 1) -> None:
        self.plans.setdefault(operation, []).extend(["lose_reply"] * times)

    def _before_send(self, request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        self.sent[operation] = self.sent.get(operation, 0) + 1
        plan = self.plans.get(operation)
        if not plan:
            return None
        action = plan.pop(0)
        if action == "throttle":
            body = json.dumps(
                {
                    "__type": "com.amazonaws.dynamodb.v20120810#"
                    "ProvisionedThroughputExceededException",
                    "message": "injected throttle",
                }
            ).encode()
            raw = _Raw(body)
            return AWSResponse(
                request.url, 400, {"Content-Type": "application/x-amz-json-1.0"}, raw
            )
        # lose_reply: apply it for real, then pretend the answer never came
        requests.post(request.url, data=request.body, headers=dict(request.headers), timeout=10)
        raise ReadTimeoutError(endpoint_url=request.url)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body


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
