"""Lease with fencing: a paused holder wakes up after its lease expired and tries to write.

Acquire is ``attribute_not_exists(resource) OR expiresAt < :now`` with ``ADD fence :one``. The
protected item accepts a write only if ``lastFence < :fence``, so the stale holder's write is
refused even though it still believes it holds the lease.
"""

from __future__ import annotations

from _local import client, create_table

from turnstile_ddb import lease, retry

ddb = client()
leases_table = create_table(ddb, "leases", "resource")
documents = create_table(ddb, "documents", "id")
now = [1_000_000.0]  # an injected clock (epoch seconds), so the example does not sleep
leases = lease.Leases(ddb, leases_table, clock=lambda: now[0])

first = leases.acquire("doc-1", owner="worker-a", ttl_ms=5_000)
try:
    leases.acquire("doc-1", owner="worker-b", ttl_ms=5_000)
except lease.Held as held:
    print(f"worker-b waits: held by {held.owner} with fence {held.fence}")

now[0] += 10  # worker-a pauses past its lease; worker-b takes over with a higher fence
second = leases.acquire("doc-1", owner="worker-b", ttl_ms=5_000)
assert second.fence > first.fence
lease.fenced_update(
    ddb,
    table=documents,
    key={"id": "doc-1"},
    fence=second.fence,
    changes={"body": "from b"},
    backoff=retry.Backoff(),
)
try:
    lease.fenced_update(
        ddb,
        table=documents,
        key={"id": "doc-1"},
        fence=first.fence,
        changes={"body": "from a"},
        backoff=retry.Backoff(),
    )
    raise SystemExit("a stale fence must be refused")
except lease.StaleFence:
    print(f"worker-a's write with fence {first.fence} is refused; fence {second.fence} wrote")
