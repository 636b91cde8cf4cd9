"""Products over HTTP, as a client calls the local server (same handlers as Lambda): the
administrator keeps the catalogue, ordinary users buy."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from tests.helpers import Person

ATTEMPTS = (
    1000  # the flash-sale workload: 1000 purchase attempts of one unit, 100 threads, stock 100
)
CLIENTS = 100
STOCK = 100


def new_product(api_url: str, admin: requests.Session, stock: int) -> str:
    product_id = f"p-{uuid.uuid4().hex[:10]}"
    response = admin.post(
        f"{api_url}/products",
        json={"productId": product_id, "name": "Tea", "stock": stock},
        timeout=10,
    )
    assert response.status_code == 201
    assert response.headers["ETag"] == '"1"'
    assert response.headers["Location"] == f"/products/{product_id}"
    return product_id


def test_read_then_conditional_update_with_etags(api_url, admin, alice):
    product_id = new_product(api_url, admin, 5)
    read = alice.get(f"{api_url}/products/{product_id}", timeout=10)
    assert read.status_code == 200 and read.json()["version"] == 1
    # Given two clients that read the same ETag
    etag = read.headers["ETag"]
    first = admin.patch(
        f"{api_url}/products/{product_id}",
        json={"stock": 9},
        headers={"If-Match": etag},
        timeout=10,
    )
    # When the second writes with the now-stale ETag
    second = admin.patch(
        f"{api_url}/products/{product_id}",
        json={"stock": 1},
        headers={"If-Match": etag},
        timeout=10,
    )
    # Then the first wins, the second gets 412 with the current version, and no update was lost
    assert first.status_code == 200 and first.headers["ETag"] == '"2"'
    assert second.status_code == 412 and second.json()["currentVersion"] == 2
    assert alice.get(f"{api_url}/products/{product_id}", timeout=10).json()["stock"] == 9
    missing = admin.patch(f"{api_url}/products/{product_id}", json={"stock": 1}, timeout=10)
    assert missing.status_code == 428 and missing.json()["error"] == "PRECONDITION_REQUIRED"


def test_purchases_with_both_strategies_and_out_of_stock(api_url, admin, alice):
    product_id = new_product(api_url, admin, 3)
    url = f"{api_url}/products/{product_id}/purchases"
    atomic = alice.post(url, json={"quantity": 2}, timeout=10)
    assert atomic.status_code == 201
    assert atomic.json() | {"purchaseId": "-"} == {
        "purchaseId": "-",
        "productId": product_id,
        "quantity": 2,
        "remainingStock": 1,
        "version": 2,
    }
    versioned = alice.post(url, json={"quantity": 1, "strategy": "versioned"}, timeout=10)
    assert versioned.status_code == 201 and versioned.json()["remainingStock"] == 0
    refused = alice.post(url, json={"quantity": 1}, timeout=10)
    assert refused.status_code == 409
    assert refused.json() == {
        "error": "OUT_OF_STOCK",
        "message": refused.json()["message"],
        "available": 0,
    }


def test_client_mistakes_are_4xx_over_http(api_url, admin, alice):
    product_id = new_product(api_url, admin, 3)
    url = f"{api_url}/products/{product_id}/purchases"
    cases: list[tuple[dict[str, Any], int, str | None]] = [
        (dict(data="{not json", headers={"Content-Type": "application/json"}), 400, "BAD_JSON"),
        (dict(data='{"quantity": 1}', headers={"Content-Type": "text/plain"}), 415, None),
        (dict(json={"quantity": "1"}), 400, "VALIDATION_ERROR"),
        (dict(json={"quantity": 1, "x": "y" * 20_000}), 413, "PAYLOAD_TOO_LARGE"),
    ]
    for kwargs, status, code in cases:
        response = alice.post(url, timeout=10, **kwargs)
        assert response.status_code == status, (kwargs, response.text)
        assert code is None or response.json()["error"] == code
    assert alice.get(f"{api_url}/products/{product_id}", timeout=10).json()["stock"] == 3
    assert (
        alice.post(
            f"{api_url}/products/nope/purchases", json={"quantity": 1}, timeout=10
        ).status_code
        == 404
    )


def test_idempotency_key_over_http(api_url, admin, alice):
    product_id = new_product(api_url, admin, 3)
    url = f"{api_url}/products/{product_id}/purchases"
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = alice.post(url, json={"quantity": 1}, headers=headers, timeout=10)
    retry = alice.post(url, json={"quantity": 1}, headers=headers, timeout=10)
    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json() and retry.headers["Idempotent-Replayed"] == "true"
    assert alice.get(f"{api_url}/products/{product_id}", timeout=10).json()["stock"] == 2


def test_seed_002_load_with_tokens_sells_exactly_the_stock(api_url, admin, users):
    # Given 100 units (the administrator's product) and 100 ordinary users, each with its own
    # token on its own keep-alive connection
    product_id = new_product(api_url, admin, STOCK)
    url = f"{api_url}/products/{product_id}/purchases"
    barrier = threading.Barrier(CLIENTS)

    def client(person: Person, index: int) -> list[tuple[int, dict]]:
        session = person.session()
        barrier.wait()
        strategy = "versioned" if index % 2 else "atomic"
        return [
            (response.status_code, response.json())
            for response in (
                session.post(url, json={"quantity": 1, "strategy": strategy}, timeout=60)
                for _ in range(ATTEMPTS // CLIENTS)
            )
        ]

    # When they make 1000 purchase attempts at once
    with ThreadPoolExecutor(CLIENTS) as pool:
        history = [
            answer for part in pool.map(client, users(CLIENTS), range(CLIENTS)) for answer in part
        ]
    # Then exactly 100 were sold and the rest were told the stock is gone: no purchase was
    # answered CONFLICT while units remained, however slow the bridge (lost races bound a
    # versioned purchase, not seconds)
    statuses = Counter(status for status, _ in history)
    assert statuses == {201: STOCK, 409: ATTEMPTS - STOCK}, statuses
    refusals = Counter(body["error"] for status, body in history if status == 409)
    assert refusals == {"OUT_OF_STOCK": ATTEMPTS - STOCK}, refusals
    # And every sale saw a stock of its own (no two sales decremented from the same state)
    sold = [body for status, body in history if status == 201]
    assert sorted(body["remainingStock"] for body in sold) == list(range(STOCK))
    assert len({body["purchaseId"] for body in sold}) == STOCK
    final = admin.get(f"{api_url}/products/{product_id}", timeout=10).json()
    assert (final["stock"], final["version"]) == (0, STOCK + 1)
