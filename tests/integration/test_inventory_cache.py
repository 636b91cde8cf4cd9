"""Reservations from remembered units (:class:`turnstile_ddb.claims.UnitCache`) on DynamoDB Local: a
unit a process saw in an earlier read is taken in one call (no Query); a remembered unit someone
else took meanwhile fails its condition and is replaced from a read; a refusal never comes from
what is remembered; threads sharing one cache hold no unit twice (history and table). Guessed
units are off here (``guess=False``): these tests are of what a read leaves to remember."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from local.creator import create_to_ready
from service.domain.errors import OutOfStock
from service.domain.inventory import pool_names, unit_id
from tests.helpers import (
    Faults,
    check_table,
    hold_as_rival,
    metric_totals,
    storm,
    units_in_table,
)
from tests.helpers import patient_client as client_of
from tests.helpers import pooled_service as service
from turnstile_ddb import claims, metrics

pytestmark = pytest.mark.integration


@pytest.fixture
def tally() -> Iterator[metrics.Tally]:
    with metric_totals() as counted:
        yield counted


def test_a_remembered_unit_is_reserved_in_one_call(dynamodb_local, tables, unique, tally):
    client = client_of(dynamodb_local)
    inventory = service(client, tables, unit_cache=claims.UnitCache(), guess=False)
    create_to_ready(inventory, unique, 40, pools=1)
    # Given one reservation that read the pool (and saw more units than it took)
    calls = Faults(client)
    inventory.reserve(unique, 1)
    # (one Query, or two when its random pivot fell so late in the ticket order that the read
    # went on from the start: about one run in eight with 40 units; CI met it)
    assert calls.sent["UpdateItem"] == 1 and calls.sent["Query"] in (1, 2)
    assert set(calls.sent) == {"Query", "UpdateItem"}
    # When the next reservations come from the same process
    for quantity, write in ((1, "UpdateItem"), (3, "TransactWriteItems")):
        calls = Faults(client)
        reservation = inventory.reserve(unique, quantity)
        # Then each is one write and nothing else: no Query
        assert calls.sent == {write: 1}, quantity
        assert len(reservation["units"]) == quantity
    assert tally.get("claims", "ClaimCacheHit") == 2
    assert tally.get("claims", "ClaimCacheMiss") == 1
    held = [u for u in units_in_table(client, tables["inventory"], unique) if u["status"] == "held"]
    assert len(held) == 5


def test_a_remembered_unit_taken_by_another_falls_back_and_still_reserves(
    dynamodb_local, tables, unique, tally
):
    client = client_of(dynamodb_local)
    cache = claims.UnitCache()
    inventory = service(client, tables, unit_cache=cache, guess=False)
    create_to_ready(inventory, unique, 10, pools=1)
    (pool,) = pool_names(unique, 1)
    units = units_in_table(client, tables["inventory"], unique)
    # Given a remembered unit that a rival has taken since
    stale = {"sku": units[0]["sku"], "sk": units[0]["sk"]}
    hold_as_rival(client, tables["inventory"], stale)
    cache.learn(inventory.units, pool, [stale])
    calls = Faults(client)
    # When a unit is reserved
    reservation = inventory.reserve(unique, 1)
    # Then the remembered one was tried, lost, and another one found by a read was reserved
    assert reservation["units"] != [unit_id(stale["sk"])]
    assert calls.sent["UpdateItem"] == 2
    assert calls.sent["Query"] >= 1
    assert tally.get("claims", "ClaimCacheHit") == 1
    assert tally.get("claims", "ClaimCacheStale") == 1
    assert tally.get("claims", "ClaimLost") == 1
    holders = {
        u["sk"]: u.get("holder") for u in units_in_table(client, tables["inventory"], unique)
    }
    assert holders[stale["sk"]] == "rival"
    assert holders[f"unit#{reservation['units'][0]}"] == reservation["reservationId"]


def test_a_refusal_never_comes_from_the_cache(dynamodb_local, tables, unique, tally):
    client = client_of(dynamodb_local)
    cache = claims.UnitCache()
    inventory = service(client, tables, unit_cache=cache, guess=False)
    create_to_ready(inventory, unique, 3, pools=1)
    (pool,) = pool_names(unique, 1)
    keys = [
        {"sku": u["sku"], "sk": u["sk"]}
        for u in units_in_table(client, tables["inventory"], unique)
    ]
    # Given all 3 units remembered, 2 of them held by a rival since
    hold_as_rival(client, tables["inventory"], keys[0])
    hold_as_rival(client, tables["inventory"], keys[1])
    cache.learn(inventory.units, pool, keys)
    # When 2 are asked for: the remembered run loses, and the read shows only 1 free
    calls = Faults(client)
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 2)
    # Then the refusal came after a read of the pool
    assert calls.sent.get("Query", 0) >= 1
    assert tally.get("claims", "ClaimRefused") == 1
    # And the 1 free unit is still there for a reservation of 1 (the refusal was not sticky)
    cache.learn(inventory.units, pool, keys[:2])  # remembered, but both held
    reservation = inventory.reserve(unique, 1)
    assert reservation["units"] == [unit_id(keys[2]["sk"])]
    # And with nothing free, a full remembered cache still leads to a read before the refusal
    cache.learn(inventory.units, pool, keys)
    calls = Faults(client)
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 1)
    assert calls.sent.get("Query", 0) >= 1


def test_remembered_units_are_bounded_and_age_out() -> None:
    now = [0.0]
    cache = claims.UnitCache(per_pool=3, pools=2, max_age_seconds=5.0, clock=lambda: now[0])
    units = claims.UnitTable(table="t", index="claimable", key_attrs=("sku", "sk"))
    keys = [{"sku": "s", "sk": f"unit#{n}"} for n in range(5)]
    cache.learn(units, "s#0", keys)
    # at most 3 per pool, the newest kept; one pool's units are never handed out for another's
    assert cache.take(units, ["s#1"], 1, None, lambda: 0.0) is None
    assert cache.take(units, ["s#0"], 3, None, lambda: 0.0) == ("s#0", keys[2:])
    assert cache.take(units, ["s#0"], 1, None, lambda: 0.0) is None  # handed out once
    cache.learn(units, "s#0", keys[:2])
    now[0] = 5.5
    assert cache.take(units, ["s#0"], 1, None, lambda: 0.0) is None  # too old
    cache.learn(units, "a", keys[:1])
    cache.learn(units, "b", keys[:1])
    cache.learn(units, "c", keys[:1])  # at most 2 pools: "a" forgotten
    assert cache.take(units, ["a"], 1, None, lambda: 0.0) is None
    assert cache.take(units, ["b"], 1, lambda key: False, lambda: 0.0) is None  # not eligible
    assert cache.take(units, ["c"], 1, None, lambda: 0.0) == ("c", keys[:1])


def test_threads_sharing_a_cache_hold_no_unit_twice(dynamodb_local, tables, unique, tally):
    client = client_of(dynamodb_local)
    inventory = service(client, tables, unit_cache=claims.UnitCache(), guess=False)
    create_to_ready(inventory, unique, 90, pools=3)
    # When 12 threads reserve 3 units 15 times each (180 asked for, 90 there)
    history = storm(inventory, unique, quantity=3, attempts=180, workers=12)
    # Then no error, every unit handed out exactly once, and the refusals came only after
    assert history.errors == []
    units = [u for r in history.succeeded for u in r["units"]]
    assert Counter(units).most_common(1)[0][1] == 1
    assert len(units) == 90
    assert len(history.succeeded) == 30 and history.out_of_stock == 150
    # the table agrees: 30 holders of 3 units each, every lead lists its own
    holders = check_table(client, tables, unique, 3)
    assert sorted(holders) == sorted(r["reservationId"] for r in history.succeeded)
    # and the cache was used (the race is real: some remembered units were taken meanwhile)
    assert tally.get("claims", "ClaimCacheHit") > 0
    assert tally.get("claims", "ClaimRefused") == 150
