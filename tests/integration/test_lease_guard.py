"""The lease guard refuses a holder that released or outlived its lease, and fences
keep counting forever (lease items are never purged)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import Clock, item
from turnstile_ddb import codec, lease


def put(table: str, key: str) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": codec.encode_item({"resource": key, "v": "x"})}}


def test_the_guard_refuses_a_holder_that_released_its_lease(ddb, tables, unique):
    # Given a holder that released its lease (nobody took it since: owner and fence still match)
    table, clock = tables["leases"], Clock(8_000_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    held = leases.acquire(f"rel-{unique}", "A", 10_000)
    leases.release(held)
    # When it writes through the guard
    with pytest.raises(lease.LeaseLost):
        leases.transact(held, [put(table, f"data-rel-{unique}")])
    # Then nothing was written
    assert item(ddb, table, f"data-rel-{unique}") is None


def test_the_guard_refuses_a_holder_past_its_expiry(ddb, tables, unique):
    # Given a holder paused past its lease's end, with nobody taking the lease over
    table, clock = tables["leases"], Clock(8_100_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    held = leases.acquire(f"exp-{unique}", "A", 10_000)
    clock.now += 11
    # When it writes through the guard, it is refused and nothing is written
    with pytest.raises(lease.LeaseLost):
        leases.transact(held, [put(table, f"data-exp-{unique}")])
    assert item(ddb, table, f"data-exp-{unique}") is None


def test_a_live_holder_still_writes_through_the_guard(ddb, tables, unique):
    table, clock = tables["leases"], Clock(8_200_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    held = leases.acquire(f"live-{unique}", "A", 10_000)
    leases.transact(held, [put(table, f"data-live-{unique}")])
    assert item(ddb, table, f"data-live-{unique}") is not None


def test_lease_items_carry_no_ttl_attribute_so_fences_are_never_reset(ddb, tables, unique):
    # Given a lease taken, renewed and released many times
    table, clock = tables["leases"], Clock(8_300_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    fences = []
    for _ in range(3):
        held = leases.acquire(f"keep-{unique}", "A", 1_000)
        held = leases.renew(held, 1_000)
        leases.release(held)
        fences.append(held.fence)
    # Then the item never carries a TTL attribute that could purge it and restart the fence
    stored = item(ddb, table, f"keep-{unique}")
    assert stored is not None and "purgeAt" not in stored
    assert fences == [1, 2, 3]
