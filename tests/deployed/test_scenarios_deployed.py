"""Every e2e scenario against the stack named by its outputs (see conftest: a deployed stack with
``--outputs FILE``, ``make local``'s otherwise)."""

from __future__ import annotations

import pytest

from tests.scenarios import SCENARIOS, Scenario

pytestmark = pytest.mark.deployed


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_scenario_against_the_stack(scenario: Scenario, api, people, run_tag):
    scenario(api, people["admin"], people["user"], f"{run_tag}-{scenario.__name__}")


def test_an_anonymous_request_is_refused(api):
    # The stack's authorizer is there: no token, no product
    import requests

    response = requests.get(api.rstrip("/") + "/products/anything", timeout=30)
    assert response.status_code == 401
    assert response.json()["error"] == "UNAUTHORIZED"
