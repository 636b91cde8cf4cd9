"""Inventory reservations on DynamoDB Local with real threads: SKIP LOCKED claims, all-or-nothing,
expiring holds, confirm against reclaim. Invariants are checked from the recorded history AND from
the table itself."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from service.domain.errors import AlreadyConfirmed, Expired, NotFound, OutOfStock
from service.domain.inventory import UNIT
from tests.helpers import Clock, inventory_on, storm, units_in_table

pytestmark = pytest.mark.integration


def test_seed_002_workload_exactly_the_stock_is_reserved_once(ddb, tables, unique):
    # Given 100 units of one sku
    service = inventory_on(ddb, tables)
    service.create(unique, 100)
    # When 100 threads make 1000 reservation attempts of one unit each, all at once
    history = storm(service, unique, quantity=1, attempts=1000, workers=100)
    # Then exactly 100 succeeded, 900 were told OUT_OF_STOCK, and nothing failed otherwise
    assert history.errors == []
    assert len(history.succeeded) == 100
    assert history.out_of_stock == 900
    # And, from the history, no unit went to two reservations
    handed_out = [unit for r in history.succeeded for unit in r["units"]]
    assert len(handed_out) == len(set(handed_out)) == 100
    # And, from the table, every unit is held by exactly the reservation that was told it got it
    owner = {r["units"][0]: r["reservationId"] for r in history.succeeded}
    units = units_in_table(ddb, tables["inventory"], unique)
    assert len(units) == 100
    assert {u["sk"].removeprefix(UNIT): u["holder"] for u in units} == owner
    assert Counter(u["status"] for u in units) == {"held": 100}


def test_quantity_three_is_all_or_nothing_and_leaves_nothing_partial(ddb, tables, unique):
    # Given 100 units of one sku
    service = inventory_on(ddb, tables)
    service.create(unique, 100)
    # When 100 threads make 1000 attempts to reserve three units at once
    history = storm(service, unique, quantity=3, attempts=1000, workers=100)
    # Then at most 33 succeeded, each with three distinct units no other reservation has
    assert history.errors == []
    assert len(history.succeeded) <= 33
    assert len(history.succeeded) + history.out_of_stock == 1000
    handed_out = [unit for r in history.succeeded for unit in r["units"]]
    assert all(len(set(r["units"])) == 3 for r in history.succeeded)
    assert len(handed_out) == len(set(handed_out))
    # And the table holds exactly those units for exactly those reservations: no partial claim
    # of a reservation that was refused is left behind
    owner = {unit: r["reservationId"] for r in history.succeeded for unit in r["units"]}
    units = units_in_table(ddb, tables["inventory"], unique)
    held = {u["sk"].removeprefix(UNIT): u["holder"] for u in units if u["status"] == "held"}
    assert held == owner
    assert sum(u["status"] == "free" for u in units) == 100 - 3 * len(history.succeeded)
    # And what the storm gave back is really claimable: one caller alone gets the rest, to 33
    more = 0
    while True:
        try:
            service.reserve(unique, 3)
        except OutOfStock:
            break
        more += 1
    assert len(history.succeeded) + more == 33


def test_an_expired_hold_is_reclaimed_and_its_confirm_is_refused(ddb, tables, unique):
    # Given two units, both held by a reservation for 10 seconds
    clock = Clock()
    service = inventory_on(ddb, tables, clock)
    service.create(unique, 2)
    first = service.reserve(unique, 2, hold_seconds=10)
    # When another caller tries before the hold lapses
    clock.now += 9.999
    # Then there is nothing to take
    with pytest.raises(OutOfStock):
        service.reserve(unique, 1, hold_seconds=10)
    # When the hold has lapsed, the same attempt takes one of the lapsed units
    clock.now += 0.001
    second = service.reserve(unique, 1, hold_seconds=10)
    assert set(second["units"]) < set(first["units"])
    # And the first reservation can no longer be confirmed, for none of its units
    with pytest.raises(Expired):
        service.confirm(unique, first["reservationId"])
    table = units_in_table(ddb, tables["inventory"], unique)
    units = {u["sk"].removeprefix(UNIT): u for u in table}
    assert units[second["units"][0]]["holder"] == second["reservationId"]
    assert units[second["units"][0]]["status"] == "held"
    assert sum(u["status"] == "sold" for u in units.values()) == 0


def test_a_confirm_after_expiry_is_refused_even_if_nobody_took_the_units(ddb, tables, unique):
    # Given a reservation whose hold lapsed, its units untouched since
    clock = Clock()
    service = inventory_on(ddb, tables, clock)
    service.create(unique, 1)
    reservation = service.reserve(unique, 1, hold_seconds=5)
    clock.now += 5
    # When it is confirmed
    # Then it is EXPIRED and the unit was not sold
    with pytest.raises(Expired):
        service.confirm(unique, reservation["reservationId"])
    (unit,) = units_in_table(ddb, tables["inventory"], unique)
    assert unit["status"] == "held"


def test_confirm_sells_once_and_a_repeat_answers_the_same(ddb, tables, unique):
    # Given a valid reservation of three units
    clock = Clock()
    service = inventory_on(ddb, tables, clock)
    service.create(unique, 5)
    reservation = service.reserve(unique, 3, hold_seconds=60)
    # When it is confirmed twice
    first = service.confirm(unique, reservation["reservationId"])
    clock.now += 3600  # long after the hold would have lapsed
    again = service.confirm(unique, reservation["reservationId"])
    # Then both answers agree and its units, only those, are sold and stay out of reach
    assert first == again
    units = units_in_table(ddb, tables["inventory"], unique)
    assert sorted(u["sk"].removeprefix(UNIT) for u in units if u["status"] == "sold") == sorted(
        reservation["units"]
    )
    with pytest.raises(OutOfStock):
        service.reserve(unique, 3)
    with pytest.raises(AlreadyConfirmed):
        service.release(unique, reservation["reservationId"])


def test_release_frees_the_units_and_forgets_the_reservation(ddb, tables, unique):
    # Given all three units of a sku held by one reservation
    service = inventory_on(ddb, tables)
    service.create(unique, 3)
    reservation = service.reserve(unique, 3)
    # When it is released
    service.release(unique, reservation["reservationId"])
    # Then the units can be reserved again, and the old reservation is gone
    again = service.reserve(unique, 3)
    assert sorted(again["units"]) == sorted(reservation["units"])
    with pytest.raises(NotFound):
        service.confirm(unique, reservation["reservationId"])
    with pytest.raises(NotFound):
        service.release(unique, reservation["reservationId"])


def test_a_confirm_racing_a_reclaim_never_lets_both_win(ddb, tables, unique):
    # Given, in each round, a one-unit reservation at the instant its hold lapses: its owner's
    # clock still says valid (1 ms before), a rival's clock says lapsed (the expiry itself)
    rounds = 40
    outcomes: Counter[str] = Counter()
    for n in range(rounds):
        sku = f"{unique}-{n}"
        start = Clock()
        owner_clock = Clock(start.now + 10 - 0.001)
        rival_clock = Clock(start.now + 10)
        inventory_on(ddb, tables, start).create(sku, 1)
        reservation = inventory_on(ddb, tables, start).reserve(sku, 1, hold_seconds=10)
        owner = inventory_on(ddb, tables, owner_clock)
        rival = inventory_on(ddb, tables, rival_clock)
        results: dict[str, Any] = {}
        barrier = threading.Barrier(2)

        def confirm(
            owner=owner, sku=sku, results=results, barrier=barrier, reservation=reservation
        ) -> None:
            barrier.wait()
            try:
                results["confirm"] = owner.confirm(sku, reservation["reservationId"])
            except Expired as exc:
                results["confirm"] = exc

        def reclaim(rival=rival, sku=sku, results=results, barrier=barrier) -> None:
            barrier.wait()
            try:
                results["reclaim"] = rival.reserve(sku, 1, hold_seconds=10)
            except OutOfStock as exc:
                results["reclaim"] = exc

        # When the owner confirms while the rival reclaims, at the same moment
        threads = [threading.Thread(target=confirm), threading.Thread(target=reclaim)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        confirmed = isinstance(results["confirm"], dict)
        reclaimed = isinstance(results["reclaim"], dict)
        # Then exactly one of them won, and the unit says the same
        assert confirmed != reclaimed, results
        (unit,) = units_in_table(ddb, tables["inventory"], sku)
        if confirmed:
            assert (unit["status"], unit["holder"]) == ("sold", reservation["reservationId"])
            outcomes["confirm won"] += 1
        else:
            assert (unit["status"], unit["holder"]) == ("held", results["reclaim"]["reservationId"])
            outcomes["reclaim won"] += 1
    print("confirm vs reclaim:", dict(outcomes))


def test_unknown_sku_and_duplicate_creation(ddb, tables, unique):
    # Given a sku that exists
    service = inventory_on(ddb, tables)
    service.create(unique, 1)
    # Then creating it again is refused, and an unknown sku is not found
    from service.domain.errors import AlreadyExists

    with pytest.raises(AlreadyExists):
        service.create(unique, 5)
    assert len(units_in_table(ddb, tables["inventory"], unique)) == 1
    with pytest.raises(NotFound):
        service.reserve(f"{unique}-none", 1)


@pytest.mark.parametrize("route", ["confirm", "release"])
def test_a_reservation_id_never_issued_is_404_whatever_expiry_it_names(ddb, tables, unique, route):
    # Given a sku of three units, one held by a real reservation, one sold, one free
    clock = Clock()
    service = inventory_on(ddb, tables, clock)
    service.create(unique, 3)
    held = service.reserve(unique, 1, hold_seconds=60)
    sold = service.reserve(unique, 1, hold_seconds=60)
    service.confirm(unique, sold["reservationId"])
    (free,) = {"000000", "000001", "000002"} - {*held["units"], *sold["units"]}
    now_ms = int(clock.now * 1000)
    # When ids the server never issued are sent, naming each unit (and one that does not exist),
    # with an expiry in the past and in the future
    forged = [
        f"{lead}-{until}-0123456789abcdef"
        for lead in (held["units"][0], sold["units"][0], free, "999999")
        for until in (1, now_ms - 1, now_ms + 60_000)
    ]
    answers = []
    for reservation in forged:
        try:
            getattr(service, route)(unique, reservation)
            answers.append("done")
        except (NotFound, Expired) as exc:
            answers.append(type(exc).__name__)
    # Then every one is 404: only a reservation that was issued can be EXPIRED
    assert answers == ["NotFound"] * len(forged), dict(zip(forged, answers, strict=True))
    # And nothing changed: the real reservation still holds its unit, the sale stands
    table = units_in_table(ddb, tables["inventory"], unique)
    units = {u["sk"].removeprefix(UNIT): u for u in table}
    assert units[held["units"][0]]["holder"] == held["reservationId"]
    assert units[sold["units"][0]]["status"] == "sold"
    assert units[free]["status"] == "free"


def test_a_lapsed_reservation_whose_lead_unit_was_taken_again_is_still_expired(ddb, tables, unique):
    # Given a one-unit reservation whose hold lapsed and whose unit another reservation took
    clock = Clock()
    service = inventory_on(ddb, tables, clock)
    service.create(unique, 1)
    lapsed = service.reserve(unique, 1, hold_seconds=5)
    clock.now += 5
    taker = service.reserve(unique, 1, hold_seconds=60)
    assert taker["units"] == lapsed["units"]
    # Then confirming the lapsed one is EXPIRED (it was issued), not 404, and sells nothing
    with pytest.raises(Expired):
        service.confirm(unique, lapsed["reservationId"])
    # And so it stays after the taker released the unit, long after, whatever the clock says
    service.release(unique, taker["reservationId"])
    clock.now += 3600
    with pytest.raises(Expired):
        service.confirm(unique, lapsed["reservationId"])
    (unit,) = units_in_table(ddb, tables["inventory"], unique)
    assert unit["status"] == "free"
