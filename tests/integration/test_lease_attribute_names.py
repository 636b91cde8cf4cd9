"""A lease table whose items store every attribute under a name of its own
(``Leases(attributes=LeaseAttributes(...))``), against DynamoDB Local: plain and queued
acquisitions, a waiter that leaves (its tombstone row), renew, a fenced write and release all run,
and nothing is ever stored under a default name. Single-threaded, on virtual time."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from tests.integration.test_lease_queue import FAST, VirtualTime, get
from turnstile_ddb import codec, lease, retry
from turnstile_ddb.lease_queue import LeaseQueue, WaitTimedOut, waiter_key

DEFAULTS = lease.LeaseAttributes()
# Every stored name changed: "x_" before each default
CUSTOM = lease.LeaseAttributes(
    **{f.name: f"x_{getattr(DEFAULTS, f.name)}" for f in fields(DEFAULTS) if f.init}
)
DEFAULT_NAMES = {getattr(DEFAULTS, f.name) for f in fields(DEFAULTS) if f.init}


def stored_names(ddb: Any, table: str, key: str) -> set[str]:
    item = get(ddb, table, key)
    assert item is not None, key
    return set(item) - {"resource"}


def test_every_operation_reads_and_writes_the_tables_own_names(ddb, tables, unique):
    # Given leases and a queue on a table with names of its own
    virtual = VirtualTime()
    leases = lease.Leases(
        client=ddb,
        table=tables["leases"],
        backoff=retry.Backoff(attempts=4),
        clock=virtual.clock,
        attributes=CUSTOM,
    )
    queue = LeaseQueue(leases, FAST, sleep=virtual.sleep, monotonic=virtual.clock)
    resource = f"named-{unique}"

    # When a plain acquisition takes the lease and another is refused
    first = leases.acquire(resource, "first", 60_000)
    with pytest.raises(lease.Held) as refused:
        leases.acquire(resource, "second", 5_000)
    # Then the refusal read the holder from the table's own names
    assert (refused.value.owner, refused.value.expires_at_ms) == ("first", first.expires_at_ms)

    # When a waiter gives up (it leaves a tombstone row) and another is served on the release
    with pytest.raises(WaitTimedOut) as timed_out:
        queue.acquire(resource, "impatient", wait_ms=250)
    assert (timed_out.value.owner, timed_out.value.position) == ("first", 0)
    tombstone = get(ddb, tables["leases"], waiter_key(resource, 1))
    assert tombstone is not None and tombstone["x_expiresAt"] == 0 and "x_reapAt" in tombstone
    assert not DEFAULT_NAMES & set(tombstone)
    virtual.meanwhile(lambda: leases.release(first))
    served = queue.acquire(resource, "served", wait_ms=30_000)
    assert served.fence == first.fence + 1 and served.ticket == 2
    assert served.previous is not None and served.previous["owner"] == "first"
    assert get(ddb, tables["leases"], waiter_key(resource, 1)) is None  # passed over, removed

    # And it renews, writes under its fence, and releases
    renewed = leases.renew(served, 10_000)
    data = f"named-data-{unique}"
    put = {"Put": {"TableName": tables["leases"], "Item": codec.encode_item({"resource": data})}}
    leases.transact(renewed, [put])
    leases.release(renewed)
    with pytest.raises(lease.LeaseLost) as lost:
        leases.transact(renewed, [put])
    assert lost.value.current is not None and lost.value.current["fence"] == served.fence

    # Then the lease item holds only the table's own names, none of the defaults
    names = stored_names(ddb, tables["leases"], resource)
    assert not DEFAULT_NAMES & names, names
    assert {"x_owner", "x_fence", "x_expiresAt", "x_tickets", "x_head", "x_releasedAt"} <= names
