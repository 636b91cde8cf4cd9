"""The end-to-end scenarios, written once: the e2e tier runs them against the in-process server
(``tests/e2e/test_scenarios_http.py``), the post-deploy tier against a stack's outputs
(``tests/deployed``: a deployed stack, or ``make local``'s).

Each takes the API's base URL (a stage URL such as ``https://.../v1/`` or ``http://127.0.0.1:3000/``),
an administrator and an ordinary user (sessions sending their ID token, with ``sub``), and a
``tag`` that makes every id it creates its own. Each undoes what the API lets it undo (the lock
is released, the reservation released, the registration cancelled); products, events, skus and
wallets have no delete route, so they stay, named ``<tag>-...``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

TIMEOUT = 30


class Caller(Protocol):
    """A ``requests.Session`` that sends one person's token, and that person's ``sub``."""

    sub: str

    def get(self, url: str, **kwargs: Any) -> Any: ...
    def post(self, url: str, **kwargs: Any) -> Any: ...
    def delete(self, url: str, **kwargs: Any) -> Any: ...


def at(api: str, path: str) -> str:
    return api.rstrip("/") + path


def product_purchase(api: str, admin: Caller, user: Caller, tag: str) -> None:
    # Given a product of two units, created by the administrator
    product = f"{tag}-product"
    created = admin.post(
        at(api, "/products"),
        json={"productId": product, "name": "Tea", "stock": 2},
        timeout=TIMEOUT,
    )
    assert created.status_code == 201, created.text
    # When the user buys one
    bought = user.post(at(api, f"/products/{product}/purchases"), json={"quantity": 1}, timeout=30)
    # Then the purchase is recorded and one unit is left, as the product now says
    assert bought.status_code == 201, bought.text
    assert bought.json()["remainingStock"] == 1
    read = user.get(at(api, f"/products/{product}"), timeout=TIMEOUT)
    assert read.status_code == 200 and read.json()["stock"] == 1


def event_registration(api: str, admin: Caller, user: Caller, tag: str) -> None:
    # Given an event with one seat
    event = f"{tag}-event"
    created = admin.post(
        at(api, "/events"),
        json={"eventId": event, "name": "Talk", "capacity": 1},
        timeout=TIMEOUT,
    )
    assert created.status_code == 201, created.text
    # When the user registers, then cancels
    registered = user.post(
        at(api, f"/events/{event}/registrations"), json={"userId": user.sub}, timeout=TIMEOUT
    )
    assert registered.status_code == 201, registered.text
    assert registered.json()["userId"] == user.sub
    full = admin.get(at(api, f"/events/{event}"), timeout=TIMEOUT).json()
    cancelled = user.delete(at(api, f"/events/{event}/registrations/{user.sub}"), timeout=30)
    # Then the seat was taken, and is free again
    assert full["registered"] == 1
    assert cancelled.status_code == 204, cancelled.text
    assert admin.get(at(api, f"/events/{event}"), timeout=TIMEOUT).json()["registered"] == 0


def lock_acquire_release(api: str, admin: Caller, user: Caller, tag: str) -> None:
    url = at(api, f"/locks/{tag}-lock")
    # When the user takes the lock, and releases it with its fence
    taken = user.post(url, json={"owner": user.sub, "ttlSeconds": 30}, timeout=TIMEOUT)
    assert taken.status_code == 201, taken.text
    fence = taken.json()["fence"]
    released = user.delete(url, json={"owner": user.sub, "fence": fence}, timeout=TIMEOUT)
    # Then it was held (fence 1 on a fresh resource) and is free: taking it again gives fence 2
    assert fence == 1
    assert released.status_code == 204, released.text
    again = user.post(url, json={"owner": user.sub, "ttlSeconds": 30}, timeout=TIMEOUT)
    assert again.status_code == 201 and again.json()["fence"] == 2
    gone = user.delete(url, json={"owner": user.sub, "fence": 2}, timeout=TIMEOUT)
    assert gone.status_code == 204


def reservation(api: str, admin: Caller, user: Caller, tag: str) -> None:
    # Given a sku of two units
    sku = f"{tag}-sku"
    created = admin.post(at(api, "/inventory"), json={"sku": sku, "units": 2}, timeout=TIMEOUT)
    assert created.status_code == 201, created.text
    # When the user reserves one and releases it
    held = user.post(
        at(api, f"/inventory/{sku}/reservations"),
        json={"quantity": 1, "holdSeconds": 60},
        timeout=TIMEOUT,
    )
    assert held.status_code == 201, held.text
    assert len(held.json()["units"]) == 1
    rid = held.json()["reservationId"]
    released = user.delete(at(api, f"/inventory/{sku}/reservations/{rid}"), timeout=TIMEOUT)
    # Then both units are available again and nothing was sold
    assert released.status_code == 204, released.text
    exact = admin.get(at(api, f"/inventory/{sku}/exact"), timeout=TIMEOUT).json()
    assert (exact["available"], exact["reserved"], exact["sold"]) == (2, 0, 0)


def wallet_top_up(api: str, admin: Caller, user: Caller, tag: str) -> None:
    wallet = f"{tag}-wallet"
    # When the user tops up a new wallet twice
    first = user.post(at(api, f"/wallets/{wallet}/top-ups"), json={"amount": 5}, timeout=30)
    second = user.post(at(api, f"/wallets/{wallet}/top-ups"), json={"amount": 7}, timeout=30)
    # Then both were charged and the wallet is the user's, with the sum
    assert first.status_code == 201, first.text
    assert second.status_code == 201, second.text
    read = user.get(at(api, f"/wallets/{wallet}"), timeout=TIMEOUT)
    assert read.status_code == 200, read.text
    assert read.json() == {"walletId": wallet, "balance": 12, "topUps": 2, "owner": user.sub}


Scenario = Callable[[str, Caller, Caller, str], None]
SCENARIOS: tuple[Scenario, ...] = (
    product_purchase,
    event_registration,
    lock_acquire_release,
    reservation,
    wallet_top_up,
)
