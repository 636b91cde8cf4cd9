"""docs/identity.md's rules through the real handlers, with two users (alice, bob) and an
administrator: who may call, who may act for whom, whose items are whose, whose keys are whose.

moto stands in for DynamoDB (API shape only, no concurrency). The claims are what API Gateway's
Cognito authorizer hands the handler after verifying a token; the token checks themselves are
``tests/unit/test_token_verification.py`` and the HTTP tier's. Every refusal is also checked to
write nothing: every table is scanned before and after.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from local.bridge import Bridge
from service import policy
from service.api import routes
from service.domain.payments import FakeProvider
from service.handlers import wallets
from tests.helpers import ADMIN, ALICE, BOB, proxy_event, scan_all


@pytest.fixture(scope="module")
def bridge() -> Bridge:
    return Bridge()  # only its routing: which handler, which resource, which parameters


@pytest.fixture
def api(moto_ddb: Any, moto_tables: Any, bridge: Bridge) -> Api:
    return Api(bridge, moto_ddb, moto_tables)


class Api:
    """Calls the handler API Gateway would call, as ``caller`` (claims; None: no authorizer)."""

    def __init__(self, bridge: Bridge, client: Any, tables: Any) -> None:
        self.bridge, self.client, self.tables = bridge, client, tables

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        caller: dict[str, str] | None = ALICE,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        found = self.bridge.match(method, path)
        assert found is not None, f"no route for {method} {path}"
        target, params = found
        event = proxy_event(
            method,
            target.path,
            path,
            body=None if body is None else json.dumps(body),
            headers={"Content-Type": "application/json", **(headers or {})},
            params=params or None,
            caller=caller,
        )
        response = target.handler(event, None)
        return response["statusCode"], json.loads(response["body"]) if response["body"] else None

    def everything(self) -> dict[str, list[dict[str, Any]]]:
        return {
            name: sorted(scan_all(self.client, table), key=repr)
            for name, table in self.tables.names.items()
        }

    def refused(
        self, status: int, method: str, path: str, body: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Assert ``status`` with the contract's error body and that no table changed."""
        before = self.everything()
        got, answer = self(method, path, body, **kwargs)
        assert got == status, answer
        assert set(answer) >= {"error", "message"}
        assert answer["error"] == {401: "UNAUTHORIZED", 403: "FORBIDDEN"}.get(
            status, answer["error"]
        )
        assert self.everything() == before
        return answer


def concrete(path: str) -> str:
    return re.sub(r"{(\w+)}", r"x-\1", path)


def sub(claims: dict[str, str]) -> str:
    return claims["sub"]


# --- 401: no verified caller, on every route --------------------------------------------------


@pytest.mark.parametrize("route", routes.ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_refuses_a_request_without_claims_and_writes_nothing(api, route):
    # A route added later without the authorizer must not become anonymous: the handler refuses
    # too. The body is valid for the route where it matters, so the refusal is about identity.
    bodies = {
        "CreateProductRequest": {"productId": "p", "name": "n", "stock": 1},
        "CreateEventRequest": {"eventId": "e", "name": "n", "capacity": 1},
        "CreateInventoryRequest": {"sku": "s", "units": 1},
        "PurchaseRequest": {"quantity": 1},
        "TopUpRequest": {"amount": 5},
        "LockAcquireRequest": {"ttlSeconds": 5},
    }
    body = bodies.get(route.body.__name__, {}) if route.body is not None else None
    api.refused(401, route.method, concrete(route.path), body, caller=None)


def test_claims_without_a_subject_are_unauthorized(api):
    api.refused(401, "GET", "/products/p1", caller={"token_use": "id", "cognito:groups": "admins"})


# --- catalogue writes: administrators only -----------------------------------------------------


# The policy's catalogue writes are its Access.ADMINISTRATORS routes (service.policy.ACCESS); which
# they are is pinned, written out, in tests/unit/test_policy.py.


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/products", {"productId": "p1", "name": "n", "stock": 3}),
        ("/events", {"eventId": "e1", "name": "n", "capacity": 3}),
        ("/inventory", {"sku": "s1", "units": 3}),
    ],
)
def test_only_administrators_create_catalogue_items(api, path, body):
    for user in (ALICE, BOB):
        api.refused(403, "POST", path, body, caller=user)
    assert api("POST", path, body, caller=ADMIN)[0] == 201


def test_only_administrators_change_a_product(api):
    assert api("POST", "/products", {"productId": "p1", "name": "n", "stock": 3}, ADMIN)[0] == 201
    if_match = {"If-Match": '"1"'}
    api.refused(403, "PATCH", "/products/p1", {"stock": 9}, caller=ALICE, headers=if_match)
    status, product = api("PATCH", "/products/p1", {"stock": 9}, caller=ADMIN, headers=if_match)
    assert (status, product["stock"]) == (200, 9)
    # everyone signed in may buy
    assert api("POST", "/products/p1/purchases", {"quantity": 1}, caller=BOB)[0] == 201


def test_only_administrators_restock_a_product(api):
    # A customer restocking a sold-out product and buying what they added: 403, nothing written.
    assert api("POST", "/products", {"productId": "p1", "name": "n", "stock": 1}, ADMIN)[0] == 201
    assert api("POST", "/products/p1/purchases", {"quantity": 1}, caller=ALICE)[0] == 201
    for user in (ALICE, BOB):
        api.refused(403, "POST", "/products/p1/restocks", {"units": 1_000_000_000}, caller=user)
    api.refused(409, "POST", "/products/p1/purchases", {"quantity": 1}, caller=ALICE)
    status, product = api("POST", "/products/p1/restocks", {"units": 2}, caller=ADMIN)
    assert (status, product["stock"]) == (200, 2)


# --- registrations: identity from the token, on behalf of others only for administrators ------


@pytest.fixture
def event(api) -> str:
    assert api("POST", "/events", {"eventId": "e1", "name": "n", "capacity": 5}, ADMIN)[0] == 201
    return "e1"


@pytest.mark.parametrize("kind", ["registrations", "registration-requests"])
def test_a_registration_is_the_callers_own_unless_an_administrator_names_someone(api, event, kind):
    path = f"/events/{event}/{kind}"
    # left out: the caller's sub
    status, answer = api("POST", path, {}, caller=ALICE)
    if kind == "registrations":
        assert (status, answer["userId"]) == (201, sub(ALICE))
    else:
        assert status == 202
        asked = api("GET", f"{path}/{answer['requestId']}", caller=ALICE)[1]
        assert asked["userId"] == sub(ALICE)
    # someone else's: 403 for a user, nothing written
    api.refused(403, "POST", path, {"userId": sub(ALICE)}, caller=BOB)
    # an administrator acts on bob's behalf
    status, _ = api("POST", path, {"userId": sub(BOB)}, caller=ADMIN)
    assert status in (201, 202)
    if kind == "registrations":
        _, listed = api("GET", f"/users/{sub(BOB)}/registrations", caller=BOB)
        assert [item["eventId"] for item in listed["items"]] == [event]


def test_a_registration_request_is_read_by_its_user_or_an_administrator(api, event):
    status, pending = api("POST", f"/events/{event}/registration-requests", {}, caller=ALICE)
    assert status == 202
    path = f"/events/{event}/registration-requests/{pending['requestId']}"
    assert api("GET", path, caller=ALICE)[1]["userId"] == sub(ALICE)
    assert api("GET", path, caller=ADMIN)[0] == 200
    api.refused(403, "GET", path, caller=BOB)


def test_paths_naming_a_user_are_their_own_or_an_administrators(api, event):
    assert api("POST", f"/events/{event}/registrations", {}, caller=ALICE)[0] == 201
    mine = f"/users/{sub(ALICE)}/registrations"
    assert api("GET", mine, caller=ALICE)[0] == 200
    assert api("GET", mine, caller=ADMIN)[0] == 200
    api.refused(403, "GET", mine, caller=BOB)
    seat = f"/events/{event}/registrations/{sub(ALICE)}"
    api.refused(403, "DELETE", seat, caller=BOB)
    assert api("DELETE", seat, caller=ALICE)[0] == 204
    assert api("POST", f"/events/{event}/registrations", {}, caller=ALICE)[0] == 201
    assert api("DELETE", seat, caller=ADMIN)[0] == 204  # on alice's behalf
    assert api("GET", f"/events/{event}", caller=BOB)[1]["registered"] == 0


# --- leases: the owner is the caller ---------------------------------------------------------


def test_a_lease_is_its_callers_and_someone_elses_is_lock_lost(api):
    status, held = api("POST", "/locks/r1", {"ttlSeconds": 30}, caller=ALICE)
    assert (status, held["owner"]) == (201, sub(ALICE))
    fence = held["fence"]
    # bob, as himself, does not hold it: exactly as for a stale holder
    for method, body in (("PUT", {"fence": fence, "ttlSeconds": 30}), ("DELETE", {"fence": fence})):
        status, answer = api(method, "/locks/r1", body, caller=BOB)
        assert (status, answer["error"]) == (409, "LOCK_LOST")
    # bob naming alice as the owner: 403, nothing written
    api.refused(
        403, "PUT", "/locks/r1", {"owner": sub(ALICE), "fence": fence, "ttlSeconds": 30}, caller=BOB
    )
    api.refused(403, "DELETE", "/locks/r1", {"owner": sub(ALICE), "fence": fence}, caller=BOB)
    api.refused(403, "POST", "/locks/r2", {"owner": sub(ALICE), "ttlSeconds": 30}, caller=BOB)
    # alice renews and releases her own; an administrator may act for an owner
    assert api("PUT", "/locks/r1", {"fence": fence, "ttlSeconds": 30}, caller=ALICE)[0] == 200
    assert api("DELETE", "/locks/r1", {"owner": sub(ALICE), "fence": fence}, caller=ALICE)[0] == 204
    status, held = api("POST", "/locks/r1", {"owner": sub(BOB), "ttlSeconds": 30}, caller=ADMIN)
    assert (status, held["owner"]) == (201, sub(BOB))
    assert api("DELETE", "/locks/r1", {"fence": held["fence"]}, caller=BOB)[0] == 204


# --- reservations: confirmed and released by whoever made them -------------------------------


def test_a_reservation_is_confirmed_or_released_only_by_whoever_made_it(api):
    assert api("POST", "/inventory", {"sku": "s1", "units": 4}, caller=ADMIN)[0] == 201
    status, held = api("POST", "/inventory/s1/reservations", {"quantity": 2}, caller=ALICE)
    assert status == 201
    path = f"/inventory/s1/reservations/{held['reservationId']}"
    lead = [
        unit
        for unit in api.everything()["inventory"]
        if unit.get("holder", {}).get("S") == held["reservationId"] and "members" in unit
    ]
    assert [unit["owner"]["S"] for unit in lead] == [sub(ALICE)]  # recorded on its record
    for someone in (BOB, ADMIN):  # administrators may read; these are writes
        api.refused(403, "POST", f"{path}/confirm", caller=someone)
        api.refused(403, "DELETE", path, caller=someone)
    assert api("POST", f"{path}/confirm", caller=ALICE)[0] == 200


def test_a_released_reservation_leaves_no_owner_on_its_units(api):
    assert api("POST", "/inventory", {"sku": "s2", "units": 2}, caller=ADMIN)[0] == 201
    _, held = api("POST", "/inventory/s2/reservations", {"quantity": 2}, caller=BOB)
    assert (
        api("DELETE", f"/inventory/s2/reservations/{held['reservationId']}", caller=BOB)[0] == 204
    )
    units = [u for u in api.everything()["inventory"] if u["sk"]["S"].startswith("unit#")]
    assert units and not [unit for unit in units if "owner" in unit]


# --- wallets: whoever made the first top-up ---------------------------------------------------


def test_a_wallet_is_its_first_top_ups_callers(api):
    status, _ = api("POST", "/wallets/w1/top-ups", {"amount": 100}, caller=ALICE)
    assert status == 201
    assert api("GET", "/wallets/w1", caller=ALICE)[1]["owner"] == sub(ALICE)
    # bob may neither credit nor read it; an administrator reads but does not top up
    api.refused(403, "POST", "/wallets/w1/top-ups", {"amount": 5}, caller=BOB)  # not even a lease
    api.refused(403, "GET", "/wallets/w1", caller=BOB)
    api.refused(403, "POST", "/wallets/w1/top-ups", {"amount": 5}, caller=ADMIN)
    status, wallet = api("GET", "/wallets/w1", caller=ADMIN)
    assert (status, wallet["balance"]) == (200, 100)


def test_the_owner_rule_is_asked_again_under_the_lease(monkeypatch, api):
    # bob's first top-up lands between alice's plain read and her lease: the read under the
    # lease decides, so alice is refused before any charge.
    provider = FakeProvider()
    wallets.provider.set(provider)
    wallets.wallets.set(None)
    asked: list[str | None] = []
    real = policy.wallet_owner

    def wallet_owner(caller: policy.Caller, current: str | None) -> str:
        asked.append(current)
        if caller.sub == sub(ALICE) and len(asked) == 1:
            assert api("POST", "/wallets/w9/top-ups", {"amount": 7}, caller=BOB)[0] == 201
        return real(caller, current)

    monkeypatch.setattr(policy, "wallet_owner", wallet_owner)
    status, answer = api("POST", "/wallets/w9/top-ups", {"amount": 100}, caller=ALICE)
    assert (status, answer["error"]) == (403, "FORBIDDEN")
    assert asked[0] is None and asked[-1] == sub(BOB)
    assert [call.wallet_id for call in provider.calls("charge")] == ["w9"]  # bob's only
    assert [call.amount for call in provider.calls("charge")] == [7]
    assert api("GET", "/wallets/w9", caller=BOB)[1]["balance"] == 7


# --- Idempotency-Key: scoped to its caller ----------------------------------------------------


def test_the_same_key_from_two_users_is_two_requests_and_a_replay_is_never_anothers(api):
    assert api("POST", "/products", {"productId": "p7", "name": "n", "stock": 5}, ADMIN)[0] == 201
    key = {"Idempotency-Key": "shared-key-1"}
    buy = {"quantity": 1}
    status_a, first = api("POST", "/products/p7/purchases", buy, caller=ALICE, headers=key)
    status_b, second = api("POST", "/products/p7/purchases", buy, caller=BOB, headers=key)
    assert (status_a, status_b) == (201, 201)
    assert first["purchaseId"] != second["purchaseId"]
    _, again = api("POST", "/products/p7/purchases", buy, caller=ALICE, headers=key)
    assert again == first  # alice's own replay
    assert api("GET", "/products/p7", caller=BOB)[1]["stock"] == 3
