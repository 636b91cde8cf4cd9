"""The lease table's TTL attribute (``turnstile_ddb.cdk.LeaseTable``, as synthesized) is one a lease
item never carries once acquired, by a plain acquisition or by the queue, so TTL can only ever
purge the queue's tombstone rows (which carry it), never a lease item and its fence.

Against DynamoDB Local, on the lease table created from the template (TTL enabled as deployed).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from local import template as cfn
from turnstile_ddb import codec, lease, retry
from turnstile_ddb.lease_queue import LeaseQueue, QueueSettings, WaitTimedOut

QUICK = QueueSettings(heartbeat_ms=100, expiry_ms=2_000, poll_ms=20, margin_ms=100)


def ttl_attribute(template: dict[str, Any]) -> str:
    (leases,) = [
        r["Properties"]
        for r in cfn.resources(template, "AWS::DynamoDB::Table").values()
        if r["Properties"]["KeySchema"] == [{"AttributeName": "resource", "KeyType": "HASH"}]
    ]
    return str(leases["TimeToLiveSpecification"]["AttributeName"])


def item(ddb: Any, table: str, resource: str) -> dict[str, Any]:
    response = ddb.get_item(
        TableName=table, Key=codec.encode_item({"resource": resource}), ConsistentRead=True
    )
    found = codec.decode_item(response.get("Item"))
    assert found is not None
    return found


def seed(ddb: Any, table: str, resource: str, ttl: str) -> None:
    """A released lease item at fence 7 that carries the TTL attribute (as an earlier version
    wrote it, or any stray write), an hour ahead so DynamoDB Local does not purge it first."""
    ddb.put_item(
        TableName=table,
        Item=codec.encode_item(
            {
                "resource": resource,
                "owner": "old",
                "fence": 7,
                "expiresAt": 0,
                ttl: int(time.time()) + 3600,
            }
        ),
    )


def test_the_ttl_is_on_and_is_not_an_attribute_the_lease_items_keep(ddb, tables, template):
    ttl = ttl_attribute(template)
    described = ddb.describe_time_to_live(TableName=tables["leases"])["TimeToLiveDescription"]
    assert described["AttributeName"] == ttl
    assert described["TimeToLiveStatus"] == "ENABLED"
    # expiresAt (epoch ms) and fence are what every lease item keeps: never the TTL attribute;
    # nor purgeAt, which lease code before 0.3.0 wrote on lease items
    assert ttl == lease.LeaseAttributes().ttl_attribute
    assert ttl not in {"resource", "owner", "fence", "expiresAt", "acquiredAt", "releasedAt"}
    assert ttl != "purgeAt"


def test_a_plain_acquisition_removes_the_ttl_attribute_and_renew_and_release_never_write_it(
    ddb, tables, template, unique
):
    ttl, table = ttl_attribute(template), tables["leases"]
    seed(ddb, table, f"plain-{unique}", ttl)
    assert ttl in item(ddb, table, f"plain-{unique}")  # Given: it carries it now
    leases = lease.Leases(client=ddb, table=table, backoff=retry.Backoff(attempts=4))
    # When the resource is acquired, renewed and released
    held = leases.acquire(f"plain-{unique}", "a", 5_000)
    after_acquire = item(ddb, table, f"plain-{unique}")
    leases.release(leases.renew(held, 5_000))
    after_release = item(ddb, table, f"plain-{unique}")
    # Then the fence went on from the item's (8), and the item never carries the TTL attribute
    assert held.fence == 8
    assert ttl not in after_acquire and ttl not in after_release
    assert after_release["fence"] == 8


def test_a_queued_acquisition_removes_the_ttl_attribute_too(ddb, tables, template, unique):
    ttl, table = ttl_attribute(template), tables["leases"]
    seed(ddb, table, f"queued-{unique}", ttl)
    leases = lease.Leases(client=ddb, table=table, backoff=retry.Backoff(attempts=4))
    queue = LeaseQueue(leases, QUICK)
    held = queue.acquire(f"queued-{unique}", "q", wait_ms=2_000)
    assert held.fence == 8
    assert ttl not in item(ddb, table, f"queued-{unique}")
    leases.release(held)
    assert ttl not in item(ddb, table, f"queued-{unique}")


def test_a_waiter_that_leaves_writes_a_tombstone_ttl_cleans_up(ddb, tables, template, unique):
    # Given a held lease and a waiter whose deadline is short
    ttl, table = ttl_attribute(template), tables["leases"]
    leases = lease.Leases(client=ddb, table=table, backoff=retry.Backoff(attempts=4))
    held = leases.acquire(f"left-{unique}", "holder", 10_000)
    queue = LeaseQueue(leases, QUICK)
    # When the waiter's deadline passes in the queue
    with pytest.raises(WaitTimedOut):
        queue.acquire(f"left-{unique}", "w", wait_ms=300)
    # Then its tombstone row carries the TTL attribute, a day ahead (TTL's cleanup if nobody
    # passes it over), and the lease item does not
    rows = ddb.scan(
        TableName=table,
        FilterExpression="queueOf = :r",
        ExpressionAttributeValues={":r": {"S": f"left-{unique}"}},
        ConsistentRead=True,
    )["Items"]
    (tombstone,) = [codec.decode_item(row) for row in rows]
    assert tombstone is not None and tombstone[ttl] > time.time() + 3_600
    assert ttl not in item(ddb, table, f"left-{unique}")
    leases.release(held)
