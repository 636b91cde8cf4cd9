"""The scenarios the post-deploy tier runs (``tests/scenarios.py``), here against the in-process
server of the e2e tier, with its administrator and alice."""

from __future__ import annotations

import pytest

from tests.scenarios import SCENARIOS, Scenario


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_scenario_over_http(scenario: Scenario, api_url, admin, alice, unique):
    scenario(api_url, admin, alice, f"e2e-{unique}")
