"""Products over HTTP, as a client calls the local server (same handlers as Lambda)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests


def new_product(api_url: str, stock: int) -> str:
    product_id = f"p-{uuid.uuid4().hex[:10]}"
    response = requests.post(
        f"{api_url}/products",
        json={"productId": product_id, "name": "Tea", "stock": stock},
        timeout=10,
    )
    assert response.status_code == 201
    assert response.headers["ETag"] == '"1"'
    assert response.headers["Location"] == f"/products/{product_id}"
    return product_id


def test_read_then_conditional_update_with_etags(api_url):
    product_id = new_product(api_url, 5)
    read = requests.get(f"{api_url}/products/{product_id}", timeout=10)
    assert read.status_code == 200 and read.json()["version"] == 1
    # Given two clients that read the same ETag
    etag = read.headers["ETag"]
    first = requests.patch(
        f"{api_url}/products/{product_id}",
        json={"stock": 9},
        headers={"If-Match": etag},
        timeout=10,
    )
    # When the second writes with the now-stale ETag
    second = requests.patch(
        f"{api_url}/products/{product_id}",
        json={"stock": 1},
        headers={"If-Match": etag},
        timeout=10,
    )
    # Then the first wins, the second gets 412 with the current version, and no update was lost
    assert first.status_code == 200 and first.headers["ETag"] == '"2"'
    assert second.status_code == 412 and second.json()["currentVersion"] == 2
    assert requests.get(f"{api_url}/products/{product_id}", timeout=10).json()["stock"] == 9
    missing = requests.patch(f"{api_url}/products/{product_id}", json={"stock": 1}, timeout=10)
    assert missing.status_code == 428 and missing.json()["error"] == "PRECONDITION_REQUIRED"


def test_purchases_with_both_strategies_and_out_of_stock(api_url):
    product_id = new_product(api_url, 3)
    url = f"{api_url}/products/{product_id}/purchases"
    atomic = requests.post(url, json={"quantity": 2}, timeout=10)
    assert atomic.status_code == 201
    assert atomic.json() | {"purchaseId": "-"} == {
        "purchaseId": "-",
        "productId": product_id,
        "quantity": 2,
        "remainingStock": 1,
        "version": 2,
    }
    versioned = requests.post(url, json={"quantity": 1, "strategy": "versioned"}, timeout=10)
    assert versioned.status_code == 201 and versioned.json()["remainingStock"] == 0
    refused = requests.post(url, json={"quantity": 1}, timeout=10)
    assert refused.status_code == 409
    assert refused.json() == {
        "error": "OUT_OF_STOCK",
        "message": refused.json()["message"],
        "available": 0,
    }


def test_client_mistakes_are_4xx_over_http(api_url):
    product_id = new_product(api_url, 3)
    url = f"{api_url}/products/{product_id}/purchases"
    cases = [
        (dict(data="{not json", headers={"Content-Type": "application/json"}), 400, "BAD_JSON"),
        (dict(data='{"quantity": 1}', headers={"Content-Type": "text/plain"}), 415, None),
        (dict(json={"quantity": "1"}), 400, "VALIDATION_ERROR"),
        (dict(json={"quantity": 1, "x": "y" * 20_000}), 413, "PAYLOAD_TOO_LARGE"),
    ]
    for kwargs, status, code in cases:
        response = requests.post(url, timeout=10, **kwargs)
        assert response.status_code == status, (kwargs, response.text)
        assert code is None or response.json()["error"] == code
    assert requests.get(f"{api_url}/products/{product_id}", timeout=10).json()["stock"] == 3
    assert (
        requests.post(
            f"{api_url}/products/nope/purchases", json={"quantity": 1}, timeout=10
        ).status_code
        == 404
    )


def test_idempotency_key_over_http(api_url):
    product_id = new_product(api_url, 3)
    url = f"{api_url}/products/{product_id}/purchases"
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = requests.post(url, json={"quantity": 1}, headers=headers, timeout=10)
    retry = requests.post(url, json={"quantity": 1}, headers=headers, timeout=10)
    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json() and retry.headers["Idempotent-Replayed"] == "true"
    assert requests.get(f"{api_url}/products/{product_id}", timeout=10).json()["stock"] == 2


def test_many_keep_alive_clients_at_once_never_oversell(api_url):
    # Given 20 units and 100 clients, each on its own keep-alive connection
    product_id = new_product(api_url, 20)
    url = f"{api_url}/products/{product_id}/purchases"
    barrier = threading.Barrier(100)

    def client(index: int) -> list[int]:
        session = requests.Session()
        barrier.wait()
        strategy = "versioned" if index % 2 else "atomic"
        return [
            session.post(url, json={"quantity": 1, "strategy": strategy}, timeout=30).status_code
            for _ in range(3)
        ]

    # When they make 300 purchase attempts at once
    with ThreadPoolExecutor(100) as pool:
        statuses = Counter(s for part in pool.map(client, range(100)) for s in part)
    # Then exactly 20 were sold, the rest refused cleanly, and the stock is 0 at version 21
    assert statuses == {201: 20, 409: 280}, statuses
    final = requests.get(f"{api_url}/products/{product_id}", timeout=10).json()
    assert (final["stock"], final["version"]) == (0, 21)
