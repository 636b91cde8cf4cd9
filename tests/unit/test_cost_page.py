"""docs/cost.md's per-route part is what ``python -m bench.cost`` writes from the measurement in
bench/results/cost.json: a new measurement without the page rewritten (or a hand edit of the
table) fails here."""

from __future__ import annotations

import json
from pathlib import Path

from bench import cost
from service.api.routes import ROUTES

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "cost.json"


def test_the_page_shows_the_measurement_as_written_from_it():
    document = json.loads(RESULTS.read_text())
    page = (ROOT / cost.PAGE).read_text()
    # Then the generated part is the section rebuilt from cost.json, character for character
    assert cost.docs_section(document) in page, "run: python -m bench.cost"


def test_the_measurement_has_a_low_and_a_seed_row_for_every_route():
    rows = json.loads(RESULTS.read_text())["routes"]
    routes = {f"{route.method} {route.path}" for route in ROUTES}
    assert {(row["route"], row["contention"]) for row in rows} == {
        (route, level) for route in routes for level in (cost.LOW, cost.SEED)
    }
    assert all(row["calls"] > 0 for row in rows)
