"""Inventory over HTTP against the local server, as a client calls it: the administrator creates
the sku, an ordinary user reserves, confirms and releases."""

from __future__ import annotations


def test_reserve_confirm_release_over_http(api_url, unique, admin, alice):
    # Given a sku of three units
    created = admin.post(f"{api_url}/inventory", json={"sku": unique, "units": 3}, timeout=30)
    assert created.status_code == 201
    base = f"{api_url}/inventory/{unique}"
    # When two are reserved and confirmed, and the last one reserved and released
    first = alice.post(f"{base}/reservations", json={"quantity": 2}, timeout=30)
    assert first.status_code == 201
    rid = first.json()["reservationId"]
    confirmed = alice.post(f"{base}/reservations/{rid}/confirm", timeout=30)
    second = alice.post(f"{base}/reservations", json={"quantity": 1, "holdSeconds": 30}, timeout=30)
    released = alice.delete(f"{base}/reservations/{second.json()['reservationId']}", timeout=30)
    # Then the answers follow the contract and the exact counts agree
    assert confirmed.status_code == 200
    assert released.status_code == 204
    exact = admin.get(f"{base}/exact", timeout=30).json()  # administrators only
    assert (exact["available"], exact["reserved"], exact["sold"]) == (1, 0, 2)
    summary = alice.get(base, timeout=30)
    assert summary.status_code == 200 and summary.json()["consistency"] == "eventual"
    # And asking for more than is left is OUT_OF_STOCK
    short = alice.post(f"{base}/reservations", json={"quantity": 2}, timeout=30)
    assert (short.status_code, short.json()["error"]) == (409, "OUT_OF_STOCK")


def test_bad_input_over_http_is_4xx_in_contract_shape(api_url, unique, admin):
    # When the body is cut short, or is a valid creation sent with the wrong content type, or
    # asks for more units than allowed (each naming the sku that must not come to exist)
    bad_json = admin.post(
        f"{api_url}/inventory",
        data=f'{{"sku": "{unique}", "units": 3',
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    wrong_type = admin.post(
        f"{api_url}/inventory",
        data=f'{{"sku": "{unique}", "units": 3}}',
        headers={"Content-Type": "text/plain"},
        timeout=30,
    )
    too_many = admin.post(
        f"{api_url}/inventory", json={"sku": unique, "units": 100_001}, timeout=30
    )
    assert (too_many.status_code, too_many.json()["error"]) == (400, "VALIDATION_ERROR")
    # Then 400 and 415 with {"error","message"}, and the sku does not exist afterwards
    assert (bad_json.status_code, bad_json.json()["error"]) == (400, "BAD_JSON")
    assert wrong_type.status_code == 415 and wrong_type.json()["message"]
    assert admin.get(f"{api_url}/inventory/{unique}", timeout=30).status_code == 404


def test_openapi_lists_the_inventory_routes(api_url, alice):
    paths = alice.get(f"{api_url}/openapi.json", timeout=10).json()["paths"]
    assert set(paths) >= {
        "/inventory",
        "/inventory/{sku}",
        "/inventory/{sku}/reservations",
        "/inventory/{sku}/reservations/{reservationId}/confirm",
        "/inventory/{sku}/reservations/{reservationId}",
    }
