"""The HTTP inventory bench (``bench.http_inventory``) at a short size against the e2e tier's
stack (the functions in their workers, as ``make local`` runs them): its rounds check their own
answers, and here the rows are checked again. No timing is asserted."""

from __future__ import annotations

from bench import http_inventory


def test_http_inventory_rounds_are_correct_at_a_short_size(api_url, admin, users):
    # Given 12 units and 10 users making 60 requests per round
    people = users(10)
    target = http_inventory.Target(api_url, admin.token, [p.token for p in people])
    # When one round of each variant runs (purchases and reservations, q = 1 and 3)
    rows = http_inventory.rounds_against(target, attempts=60, workers=10, units=12, rounds=1)
    by_name = {row["strategy"]: row for row in rows}
    # Then every variant answered only successes and OUT_OF_STOCK, and sold out exactly
    assert set(by_name) == {
        "HTTP purchases q=1",
        "HTTP reservations q=1",
        "HTTP purchases q=3",
        "HTTP reservations q=3",
    }
    for quantity in (1, 3):
        for kind in ("purchases", "reservations"):
            row = by_name[f"HTTP {kind} q={quantity}"]
            assert row["errors"] == 0 and row["client_5xx"] == 0, row
            assert set(row["outcomes"]) <= {"ok", "OUT_OF_STOCK"}, row
            assert row["outcomes"]["ok"] == 12 // quantity, row
        # And no unit was held twice, each reservation held q units, the exact counts agree
        reservations = by_name[f"HTTP reservations q={quantity}"]
        assert reservations["units_held_twice"] == 0
        assert reservations["wrong_size"] == 0
        assert reservations["reserved_exact"] == 12 // quantity * quantity
        assert reservations["available_exact"] == 12 - 12 // quantity * quantity
        assert reservations["over_purchases"] > 0
