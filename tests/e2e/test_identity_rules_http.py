"""The rules of docs/identity.md over HTTP, with real ID tokens of the local identity provider:
two users (alice, bob) and an administrator. Each refusal is checked to have changed nothing the
test can read back. Every rule in detail, with every table scanned before and after:
tests/unit/test_identity_rules.py.
"""

from __future__ import annotations

import uuid


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def refused(response, status: int) -> None:
    assert response.status_code == status, response.text
    assert set(response.json()) >= {"error", "message"}
    assert response.json()["error"] == {401: "UNAUTHORIZED", 403: "FORBIDDEN"}[status]


def test_catalogue_writes_are_for_administrators(api_url, admin, alice):
    product = fresh("p")
    body = {"productId": product, "name": "Lamp", "stock": 5}
    refused(alice.post(f"{api_url}/products", json=body, timeout=30), 403)
    assert admin.get(f"{api_url}/products/{product}", timeout=30).status_code == 404
    assert admin.post(f"{api_url}/products", json=body, timeout=30).status_code == 201
    changed = alice.patch(
        f"{api_url}/products/{product}", json={"stock": 50}, headers={"If-Match": '"1"'}, timeout=30
    )
    refused(changed, 403)
    assert admin.get(f"{api_url}/products/{product}", timeout=30).json()["stock"] == 5


def test_registrations_are_the_callers_own_unless_an_administrator_acts_for_someone(
    api_url, admin, alice, bob
):
    event = fresh("e")
    created = admin.post(
        f"{api_url}/events", json={"eventId": event, "name": "Talk", "capacity": 5}, timeout=30
    )
    assert created.status_code == 201
    seats = f"{api_url}/events/{event}/registrations"
    mine = alice.post(seats, json={}, timeout=30)
    assert (mine.status_code, mine.json()["userId"]) == (201, alice.sub)
    refused(bob.post(seats, json={"userId": alice.sub}, timeout=30), 403)
    refused(bob.delete(f"{seats}/{alice.sub}", timeout=30), 403)
    refused(bob.get(f"{api_url}/users/{alice.sub}/registrations", timeout=30), 403)
    assert admin.post(seats, json={"userId": bob.sub}, timeout=30).status_code == 201
    assert admin.get(f"{api_url}/events/{event}", timeout=30).json()["registered"] == 2


def test_reservations_and_wallets_belong_to_whoever_made_them(api_url, admin, alice, bob):
    sku = fresh("s")
    assert admin.post(f"{api_url}/inventory", json={"sku": sku, "units": 3}, timeout=30).ok
    held = alice.post(f"{api_url}/inventory/{sku}/reservations", json={"quantity": 2}, timeout=30)
    assert held.status_code == 201
    reservation = f"{api_url}/inventory/{sku}/reservations/{held.json()['reservationId']}"
    refused(bob.post(f"{reservation}/confirm", timeout=30), 403)
    refused(bob.delete(reservation, timeout=30), 403)
    assert alice.post(f"{reservation}/confirm", timeout=30).status_code == 200

    wallet = f"{api_url}/wallets/{fresh('w')}"
    assert alice.post(f"{wallet}/top-ups", json={"amount": 40}, timeout=30).status_code == 201
    refused(bob.post(f"{wallet}/top-ups", json={"amount": 1}, timeout=30), 403)
    refused(bob.get(wallet, timeout=30), 403)
    read = admin.get(wallet, timeout=30).json()  # administrators may read
    assert (read["balance"], read["owner"]) == (40, alice.sub)


def test_a_lease_is_its_callers_and_someone_elses_is_lock_lost(api_url, alice, bob):
    lock = f"{api_url}/locks/{fresh('r')}"
    held = alice.post(lock, json={"ttlSeconds": 30}, timeout=30).json()
    assert held["owner"] == alice.sub
    lost = bob.delete(lock, json={"fence": held["fence"]}, timeout=30)
    assert (lost.status_code, lost.json()["error"]) == (409, "LOCK_LOST")
    refused(bob.delete(lock, json={"owner": alice.sub, "fence": held["fence"]}, timeout=30), 403)
    assert alice.delete(lock, json={"fence": held["fence"]}, timeout=30).status_code == 204


def test_an_idempotency_key_is_its_callers(api_url, admin, alice, bob):
    product = fresh("p")
    body = {"productId": product, "name": "Lamp", "stock": 5}
    assert admin.post(f"{api_url}/products", json=body, timeout=30).status_code == 201
    url = f"{api_url}/products/{product}/purchases"
    key = {"Idempotency-Key": fresh("k")}
    first = alice.post(url, json={"quantity": 1}, headers=key, timeout=30)
    other = bob.post(url, json={"quantity": 1}, headers=key, timeout=30)
    again = alice.post(url, json={"quantity": 1}, headers=key, timeout=30)
    assert (first.status_code, other.status_code, again.status_code) == (201, 201, 201)
    assert other.json()["purchaseId"] != first.json()["purchaseId"]
    assert "Idempotent-Replayed" not in other.headers
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert admin.get(f"{api_url}/products/{product}", timeout=30).json()["stock"] == 3
