"""The cost bench (``python -m bench --only cost``) at a short size against DynamoDB Local: every
route of the API has a row per contention level, with the fields docs/cost.md and the issue name,
and its units and calls were counted by the functions' own client. No time or CPU figure is
asserted: they are measurements."""

from __future__ import annotations

import json

from bench import cost
from bench.__main__ import run_cost
from service.api.routes import ROUTES

FIELDS = {
    "route",
    "contention",
    "rcu",
    "wcu",
    "floor_rcu",
    "floor_wcu",
    "calls",
    "cpu_ms",
    "bare_cpu_ms",
    "why",
}


def test_a_short_cost_run_counts_every_routes_consumption(
    dynamodb_local, template, tables, tmp_path
):
    # When the section runs small (3 requests at low contention, 12 from 4 users at seed)
    out = tmp_path / "cost.json"
    run_cost(dynamodb_local, template, out, low_requests=3, seed_requests=12, seed_users=4)
    document = json.loads(out.read_text())
    rows = document["routes"]
    # Then every route has a low and a seed row with the named fields
    routes = {f"{route.method} {route.path}" for route in ROUTES}
    assert {(row["route"], row["contention"]) for row in rows} == {
        (route, level) for route in routes for level in (cost.LOW, cost.SEED)
    }
    for row in rows:
        assert set(row) >= FIELDS, row["route"]
        # And every request was answered by the route itself (no 5xx, no setup refusal)
        assert not [label for label in row["outcomes"] if label.startswith(("5", "error"))], row
        # And its DynamoDB calls and units were counted by the function's client
        assert row["calls"] > 0, row
        assert row["rcu"] + row["wcu"] + row["unreported"] > 0, row
        assert row["floor_rcu"] + row["floor_wcu"] > 0 and row["bare_cpu_ms"] > 0, row
        # And a low row above its floor's target says why
        if row["contention"] == cost.LOW and cost.over_floor(row) > cost.UNITS_TARGET:
            assert row["why"] and row["why"] != cost.UNEXPLAINED, row
    assert document["machine"]["load_average"]
