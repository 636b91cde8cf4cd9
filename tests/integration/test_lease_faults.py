"""Faults DynamoDB Local never produces (throttling, TransactionConflict, a lost answer), injected
with botocore event hooks on a client of its own, against the real database underneath."""

from __future__ import annotations

import types
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from local.dynamodb_local import DynamoDBLocal
from turnstile_ddb import codec, lease, retry


@pytest.fixture
def faulty(dynamodb_local: DynamoDBLocal) -> Iterator[Any]:
    """A fresh client (hooks stay off the session's shared one)."""
    client = dynamodb_local.client(config=retry.client_config())
    yield client
    client.close()


def fail_first(client: Any, operation: str, times: int, error: dict[str, Any]) -> list[str]:
    """Answer the first ``times`` calls of ``operation`` with ``error`` without sending them;
    returns a log of "faked"/"sent" per call."""
    log: list[str] = []

    def hook(**_: Any) -> Any:
        if log.count("faked") < times:
            log.append("faked")
            return types.SimpleNamespace(status_code=400, headers={}), error
        log.append("sent")
        return None

    client.meta.events.register(
        f"before-call.dynamodb.{operation}", hook, unique_id=uuid.uuid4().hex
    )
    return log


def quick() -> retry.Backoff:
    return retry.Backoff(attempts=5, base=0.001, cap=0.002)


def test_throttled_acquire_is_retried_and_applied_once(faulty, ddb, tables, unique):
    # Given the first two UpdateItem calls are throttled
    log = fail_first(
        faulty,
        "UpdateItem",
        2,
        {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
    )
    leases = lease.Leases(client=faulty, table=tables["leases"], backoff=quick())
    # When a lease is acquired
    held = leases.acquire(f"throttled-{unique}", "me", 10_000)
    # Then it was retried until sent once, and the database counted exactly one acquisition
    assert log == ["faked", "faked", "sent"]
    stored = codec.decode_item(
        ddb.get_item(
            TableName=tables["leases"],
            Key=codec.encode_item({"resource": f"throttled-{unique}"}),
            ConsistentRead=True,
        )["Item"]
    )
    assert held.fence == 1 and stored is not None and stored["fence"] == 1


def test_acquire_whose_answer_is_lost_is_not_resent(faulty, ddb, tables, unique):
    # Given the database applies the acquire but the answer never arrives
    calls: list[str] = []

    def lose_answer(**_: Any) -> None:
        calls.append("applied")
        raise ReadTimeoutError(endpoint_url="dynamodb-local")

    faulty.meta.events.register(
        "after-call.dynamodb.UpdateItem", lose_answer, unique_id=uuid.uuid4().hex
    )
    leases = lease.Leases(client=faulty, table=tables["leases"], backoff=quick())
    # When a lease is acquired
    with pytest.raises(retry.OutcomeUnknown):
        leases.acquire(f"lost-{unique}", "me", 10_000)
    # Then the caller is told the outcome is unknown instead of a blind resend: one call, and
    # the fence moved once (a resend would have been refused, or worse, counted twice)
    assert calls == ["applied"]
    stored = codec.decode_item(
        ddb.get_item(
            TableName=tables["leases"],
            Key=codec.encode_item({"resource": f"lost-{unique}"}),
            ConsistentRead=True,
        )["Item"]
    )
    assert stored is not None and stored["fence"] == 1


def test_fenced_transaction_retries_a_transaction_conflict(faulty, ddb, tables, unique):
    # Given a held lease and a first TransactWriteItems cancelled by a TransactionConflict
    table = tables["leases"]
    leases = lease.Leases(client=faulty, table=table, backoff=quick())
    held = leases.acquire(f"conflict-{unique}", "me", 10_000)
    log = fail_first(
        faulty,
        "TransactWriteItems",
        1,
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
            "CancellationReasons": [{"Code": "TransactionConflict"}, {"Code": "None"}],
        },
    )
    data = f"conflict-data-{unique}"
    put = {"Put": {"TableName": table, "Item": codec.encode_item({"resource": data, "v": 1})}}
    # When a fenced write goes through the lease guard
    leases.transact(held, [put])
    # Then it was resent and applied once
    assert log == ["faked", "sent"]
    stored = ddb.get_item(
        TableName=table, Key=codec.encode_item({"resource": data}), ConsistentRead=True
    )
    assert codec.decode_item(stored["Item"]) == {"resource": data, "v": 1}


def test_release_after_a_throttle_still_frees_the_lease(faulty, tables, unique):
    # Given a held lease, and a release whose first call is throttled
    leases = lease.Leases(client=faulty, table=tables["leases"], backoff=quick())
    first = leases.acquire(f"rel-{unique}", "one", 30_000)
    log = fail_first(
        faulty, "UpdateItem", 1, {"Error": {"Code": "ThrottlingException", "Message": "slow"}}
    )
    # When it is released
    leases.release(first)
    # Then the resend applied, and the next owner gets it at once with the next fence
    assert log == ["faked", "sent"]
    assert leases.acquire(f"rel-{unique}", "two", 30_000).fence == first.fence + 1
