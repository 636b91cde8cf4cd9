"""A lease table whose partition key is not ``resource`` (``Leases(key_attr=...)``: key
names configurable per table): plain and queued acquisitions, renew, release, the critical-section
guard and a waiter's tombstone all address the table by its own key, on DynamoDB Local."""

from __future__ import annotations

from typing import Any

import pytest

from turnstile_ddb import codec, lease, retry
from turnstile_ddb.lease_queue import LeaseQueue, QueueSettings, WaitTimedOut

pytestmark = pytest.mark.integration

QUICK = QueueSettings(heartbeat_ms=100, expiry_ms=2_000, poll_ms=20, margin_ms=100)


@pytest.fixture
def locks(ddb: Any, unique: str) -> Any:
    """A table of its own, keyed ``lockId`` (deleted afterwards)."""
    name = f"locks-{unique}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "lockId", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "lockId", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield name
    ddb.delete_table(TableName=name)


def stored(ddb: Any, table: str, lock_id: str) -> dict[str, Any] | None:
    response = ddb.get_item(
        TableName=table, Key=codec.encode_item({"lockId": lock_id}), ConsistentRead=True
    )
    return codec.decode_item(response.get("Item"))


def test_plain_and_queued_leases_use_the_tables_own_key(ddb, locks, unique):
    leases = lease.Leases(
        client=ddb, table=locks, backoff=retry.Backoff(attempts=4), key_attr="lockId"
    )
    # A plain acquisition writes the item under lockId, renews and releases it there
    first = leases.acquire(f"job-{unique}", "a", 5_000)
    leases.release(leases.renew(first, 5_000))
    item = stored(ddb, locks, f"job-{unique}")
    assert item is not None and (item["owner"], item["fence"]) == ("a", 1) and "releasedAt" in item
    # A held lease refuses a second plain acquisition by its condition on the same key
    second = leases.acquire(f"job-{unique}", "b", 5_000)
    with pytest.raises(lease.Held):
        leases.acquire(f"job-{unique}", "c", 5_000)
    # A queued waiter whose deadline passes leaves a tombstone keyed lockId too
    queue = LeaseQueue(leases, QUICK)
    with pytest.raises(WaitTimedOut):
        queue.acquire(f"job-{unique}", "w", wait_ms=300)
    rows = [codec.decode_item(row) for row in ddb.scan(TableName=locks)["Items"]]
    assert {row["lockId"] for row in rows if row} >= {f"job-{unique}", f"job-{unique}#q#1"}
    # And once released, the queue serves the next waiter with the next fence
    leases.release(second)
    served = queue.acquire(f"job-{unique}", "q", wait_ms=5_000)
    assert served.fence == 3
    leases.release(served)
