"""Every route of the binding contract (../shared/API.md) is served and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

CONTRACT = Path(__file__).resolve().parents[3] / "shared" / "API.md"


def contract_routes() -> set[tuple[str, str]]:
    if not CONTRACT.exists():
        pytest.skip(f"{CONTRACT} is not beside the repository")
    text = CONTRACT.read_text()
    return {
        (method.lower(), path)
        for method, path in re.findall(r"\| `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`", text)
    }


def test_every_contract_route_is_in_the_openapi_document(api_url):
    routes = contract_routes()
    assert len(routes) >= 19  # the contract lists 19; fewer means the parsing broke
    document = requests.get(f"{api_url}/openapi.json", timeout=10).json()
    served = {(method, path) for path, item in document["paths"].items() for method in item}
    assert routes - served == set()


def test_every_contract_route_answers_in_the_contract_shape(api_url):
    # An unknown id on each route: never 5xx, always {"error","message"} or a success.
    for method, path in sorted(contract_routes()):
        url = api_url + re.sub(r"\{[^}]+\}", "nope-123", path)
        response = requests.request(method, url, json={}, timeout=10)
        assert response.status_code < 500, (method, path, response.text)
        if response.status_code >= 400:
            assert set(response.json()) >= {"error", "message"}, (method, path)
