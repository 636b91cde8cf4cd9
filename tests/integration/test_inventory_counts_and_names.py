"""The inventory domain on DynamoDB Local: each operation counts exactly the metrics it should
(once each: a refusal the library counted is not counted again by the domain), and a unit table
whose attributes are stored under other names works through every operation."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from service import config
from service.domain.errors import AlreadyConfirmed, Expired
from service.domain.inventory import Inventory
from tests.helpers import Clock, inventory_on, metric_totals, units_in_table
from turnstile_ddb import claims

pytestmark = pytest.mark.integration


def emitted(tally: Any) -> Counter[tuple[str, str]]:
    return Counter({key: int(value) for key, value in tally.snapshot().items() if value})


def test_a_confirm_whose_hold_lapsed_counts_confirm_lost_once(ddb, tables, unique):
    # Given one unit held by a reservation whose hold then ran out (nobody took the unit since)
    clock = Clock()
    service = inventory_on(ddb, tables, clock)
    service.create(unique, 1)
    held = service.reserve(unique, 1, hold_seconds=30)
    clock.now += 31
    # When it is confirmed
    with metric_totals() as tally, pytest.raises(Expired):
        service.confirm(unique, held["reservationId"])
    # Then the refusal is counted exactly once, under claims, and nothing else was counted
    assert emitted(tally) == {("claims", "ConfirmLost"): 1}


# A unit table whose unit items store their attributes under other names (the index's keys,
# ``pool`` and ``claimableAt``, stay: the table's index is declared on them).
RENAMED = {
    "status_attr": "state",
    "holder_attr": "heldBy",
    "until_attr": "heldUntil",
    "members_attr": "allUnits",
    "owner_attr": "madeBy",
    "seq_attr": "changes",
    "previous_attr": "heldBefore",
}


def renamed(ddb: Any, tables: Any, clock: Clock) -> Inventory:
    units = claims.UnitTable(
        table=tables["inventory"],
        index=config.INVENTORY_CLAIMABLE_INDEX,
        key_attrs=("sku", "sk"),
        **RENAMED,
    )
    return inventory_on(ddb, tables, clock, unit_table=units)


def test_the_inventory_domain_works_on_a_unit_table_with_other_attribute_names(ddb, tables, unique):
    # Given an inventory whose unit items store their attributes under other names
    clock = Clock()
    service = renamed(ddb, tables, clock)
    service.create(unique, 4)
    # When two reservations are made, one confirmed and one released, and the units counted
    sold = service.reserve(unique, 2, hold_seconds=30, owner="alice")
    given_back = service.reserve(unique, 1, hold_seconds=30, owner="bob")
    assert service.exact(unique) | {"consistency": None} == {
        "sku": unique, "units": 4, "available": 1, "reserved": 3, "sold": 0, "consistency": None,
    }  # fmt: skip
    confirmed = service.confirm(unique, sold["reservationId"])
    assert sorted(confirmed["units"]) == sorted(sold["units"])
    service.confirm(unique, sold["reservationId"])  # a repeat answers the same
    service.release(unique, given_back["reservationId"])
    with pytest.raises(AlreadyConfirmed):
        service.release(unique, sold["reservationId"])
    # Then the counts follow, and the units carry the table's names, never the defaults
    counts = service.exact(unique)
    assert (counts["available"], counts["reserved"], counts["sold"]) == (2, 0, 2)
    units = units_in_table(ddb, tables["inventory"], unique)
    assert len(units) == 4
    assert Counter(unit["state"] for unit in units) == {"sold": 2, "free": 2}
    assert all(not {"status", "holder", "holdUntil", "members"} & set(unit) for unit in units)
    assert {unit["heldBy"] for unit in units if unit["state"] == "sold"} == {sold["reservationId"]}


def test_a_lapsed_reservation_on_a_renamed_table_is_expired_not_found(ddb, tables, unique):
    # Given a one-unit reservation on a renamed table whose hold lapsed and whose unit was taken
    clock = Clock()
    service = renamed(ddb, tables, clock)
    service.create(unique, 1)
    lapsed = service.reserve(unique, 1, hold_seconds=30)
    clock.now += 31
    service.reserve(unique, 1, hold_seconds=30)
    # When the lapsed one is confirmed, Then it is told it expired
    with pytest.raises(Expired):
        service.confirm(unique, lapsed["reservationId"])
