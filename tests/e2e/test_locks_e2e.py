"""/locks and the FOR UPDATE top-up over HTTP, as a client calls them."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

REQUESTS = 50


def scan(client: Any, table: str) -> list[dict[str, Any]]:
    return [item for page in client.get_paginator("scan").paginate(TableName=table)
            for item in page["Items"]]  # fmt: skip


def test_lock_lifecycle_over_http(api_url, alice, bob):
    # Given a fresh resource, and alice and bob naming themselves as owners (their token's sub)
    url = f"{api_url}/locks/e2e-{uuid.uuid4().hex[:8]}"
    a, b = alice.sub, bob.sub
    # When alice owns it, bob asks, alice renews and releases, then bob asks again
    first = alice.post(url, json={"owner": a, "ttlSeconds": 30}, timeout=10)
    refused = bob.post(url, json={"owner": b, "ttlSeconds": 30}, timeout=10)
    renewed = alice.put(url, json={"owner": a, "fence": 1, "ttlSeconds": 30}, timeout=10)
    zombie = bob.delete(url, json={"owner": b, "fence": 1}, timeout=10)
    released = alice.delete(url, json={"owner": a, "fence": 1}, timeout=10)
    second = bob.post(url, json={"owner": b, "ttlSeconds": 30}, timeout=10)
    # Then every answer has the contract's status, shape and headers
    assert first.status_code == 201 and first.json()["fence"] == 1
    assert refused.status_code == 409 and refused.json()["error"] == "LOCKED"
    assert refused.json()["owner"] == a and int(refused.headers["Retry-After"]) >= 1
    assert renewed.status_code == 200 and renewed.json()["fence"] == 1
    assert zombie.status_code == 409 and zombie.json()["error"] == "LOCK_LOST"
    assert released.status_code == 204
    assert second.status_code == 201 and second.json()["fence"] == 2


def test_a_queued_wait_over_http_is_served_when_the_holder_releases(api_url, alice, bob):
    # Given alice holds a fresh resource
    url = f"{api_url}/locks/e2e-q-{uuid.uuid4().hex[:8]}"
    a, b = alice.sub, bob.sub
    held = alice.post(url, json={"owner": a, "ttlSeconds": 30}, timeout=10).json()
    # When bob waits up to 15 s for it (waitMs) while alice works, then alice releases
    answer: list[requests.Response] = []
    waiting = threading.Thread(
        target=lambda: answer.append(
            bob.post(url, json={"owner": b, "ttlSeconds": 30, "waitMs": 15000}, timeout=30)
        )
    )
    waiting.start()
    short = alice.post(url, json={"owner": a, "ttlSeconds": 30, "waitMs": 0}, timeout=10)
    released = alice.delete(url, json={"owner": a, "fence": held["fence"]}, timeout=10)
    waiting.join()
    # Then bob's one request answers 201 with the next fence and the ticket it was served on,
    # and a zero wait behind a live holder was 409 LOCKED with its place in the queue
    assert released.status_code == 204
    assert answer[0].status_code == 201, answer[0].text
    assert answer[0].json()["fence"] == held["fence"] + 1 and answer[0].json()["ticket"] >= 1
    assert short.status_code == 409 and short.json()["error"] == "LOCKED"
    assert short.json()["queuePosition"] >= 0


def test_openapi_lists_the_lock_and_wallet_routes(api_url):  # the document needs no token
    paths = requests.get(f"{api_url}/openapi.json", timeout=10).json()["paths"]
    assert set(paths["/locks/{resource}"]) == {"post", "put", "delete"}
    assert set(paths["/wallets/{walletId}/top-ups"]) == {"post"}
    assert "409" in paths["/locks/{resource}"]["post"]["responses"]


def test_concurrent_top_ups_charge_once_per_accepted_request(api_url, alice, ddb, tables):
    # Given alice topping up her own wallet from 50 connections (the wallets function runs as
    # deployed, in its own process: what it charged is read back from its charge# records)
    wallet = f"e2e-{uuid.uuid4().hex[:8]}"
    start = threading.Barrier(REQUESTS)

    def top_up(amount: int) -> tuple[int, int, dict[str, Any], str | None]:
        with alice.session() as session:
            start.wait()
            response = session.post(
                f"{api_url}/wallets/{wallet}/top-ups", json={"amount": amount}, timeout=60
            )
        return amount, response.status_code, response.json(), response.headers.get("Retry-After")

    # When 50 top-ups of distinct amounts arrive at once
    with ThreadPoolExecutor(REQUESTS) as pool:
        answers = list(pool.map(top_up, range(1, REQUESTS + 1)))

    # Then each was either accepted or refused as LOCKED (with Retry-After), nothing else
    accepted = [(amount, body) for amount, status, body, _ in answers if status == 201]
    refused = [(body, retry) for _, status, body, retry in answers if status == 409]
    assert len(accepted) + len(refused) == REQUESTS, answers
    assert accepted
    assert all(body["error"] == "LOCKED" and retry for body, retry in refused)
    # And exactly one charge was recorded per accepted request, none for refused ones, and
    # none was refunded
    charges = [
        item
        for item in scan(ddb, tables["wallets"])
        if item["walletId"]["S"].startswith("charge#") and item["wallet"]["S"] == wallet
    ]
    assert {c["status"]["S"] for c in charges} == {"CREDITED"}
    assert sorted(c["topUpId"]["S"] for c in charges) == sorted(b["topUpId"] for _, b in accepted)
    assert sorted(int(c["amount"]["N"]) for c in charges) == sorted(a for a, _ in accepted)
    # And the balance is exactly the sum of the accepted charges
    wallet_now = alice.get(f"{api_url}/wallets/{wallet}", timeout=10).json()
    assert wallet_now == {
        "walletId": wallet,
        "balance": sum(amount for amount, _ in accepted),
        "topUps": len(accepted),
        "owner": alice.sub,  # whoever made its first top-up
    }
