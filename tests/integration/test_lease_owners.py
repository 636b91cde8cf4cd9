"""What a release may still change on a lease item.

Over HTTP a client may resend ``DELETE`` on a lease it already released; the queue in front of the
lease reads ``releasedAt`` as the moment the lease came free, so only a live lease's release may
write it.
"""

from __future__ import annotations

from tests.helpers import Clock, item
from turnstile_ddb import lease


def test_a_resent_release_does_not_move_the_queues_clocks(ddb, tables, unique):
    # Given a holder that released its lease at t
    table, clock = tables["leases"], Clock(8_500_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    resource = f"resent-release-{unique}"
    held = leases.acquire(resource, "A", 10_000)
    clock.now += 1
    leases.release(held)
    released_at = item(ddb, table, resource)["releasedAt"]  # type: ignore[index]
    # When it sends the release again later (a retry, a client resending DELETE)
    clock.now += 4
    leases.release(held)
    # Then it is answered as done, and the release time the queue passes a dead head by is the first
    current = item(ddb, table, resource)
    assert current is not None
    assert (current["releasedAt"], current["expiresAt"]) == (released_at, 0)


def test_releasing_a_lease_that_ran_out_does_not_move_the_queues_clocks(ddb, tables, unique):
    # Given a holder whose lease ran out at t, nobody having taken it since
    table, clock = tables["leases"], Clock(8_600_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    resource = f"late-release-{unique}"
    held = leases.acquire(resource, "A", 1_000)
    clock.now += 5
    # When it releases (it no longer holds the lease: it is free since t)
    leases.release(held)
    # Then it is answered as done, but the lease item keeps saying it came free at t
    current = item(ddb, table, resource)
    assert current is not None
    assert current["expiresAt"] <= held.expires_at
    assert current.get("releasedAt", 0) <= held.expires_at
