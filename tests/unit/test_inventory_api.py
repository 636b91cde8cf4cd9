"""Inventory API shape on moto (no concurrency claims here): status codes, bodies, and that every
refused request writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.handlers import inventory
from tests.helpers import ADMIN, ALICE, proxy_event, scan_all

RESERVATIONS = "/inventory/{sku}/reservations"
RESERVATION = "/inventory/{sku}/reservations/{reservationId}"


def call(
    method: str,
    resource: str,
    path: str,
    body: Any = None,
    caller: dict[str, str] = ADMIN,
    **params: str,
) -> dict:
    event = proxy_event(
        method,
        resource,
        path,
        body=None if body is None else (body if isinstance(body, str) else json.dumps(body)),
        params=params or None,
        caller=caller,
    )
    response = inventory.handler(event, None)
    response["json"] = json.loads(response["body"]) if response["body"] else None
    return response


def everything(client: Any, tables: Any) -> list[dict[str, Any]]:
    return scan_all(client, tables["inventory"]) + scan_all(client, tables["inventory_summary"])


def test_create_reserve_confirm_through_the_handler(moto_ddb, moto_tables):
    # Given a sku of four units
    created = call("POST", "/inventory", "/inventory", {"sku": "s1", "units": 4})
    assert created["statusCode"] == 201
    assert created["json"] == {"sku": "s1", "units": 4, "status": "READY", "unitsCreated": 4}
    assert created["headers"]["Location"] == "/inventory/s1"
    # When two are reserved and the reservation confirmed
    reserved = call("POST", RESERVATIONS, "/inventory/s1/reservations", {"quantity": 2}, sku="s1")
    # Then the answers have the contract's shapes
    assert reserved["statusCode"] == 201
    body = reserved["json"]
    assert set(body) == {"reservationId", "sku", "units", "expiresAt"}
    assert len(set(body["units"])) == 2 and isinstance(body["expiresAt"], int)
    rid = body["reservationId"]
    confirmed = call(
        "POST",
        RESERVATION + "/confirm",
        f"/inventory/s1/reservations/{rid}/confirm",
        sku="s1",
        reservationId=rid,
    )
    assert confirmed["statusCode"] == 200
    assert confirmed["json"]["status"] == "confirmed"
    # And the summary route answers with eventual counts (the stream has not run under moto)
    summary = call("GET", "/inventory/{sku}", "/inventory/s1", sku="s1")
    assert summary["statusCode"] == 200
    assert summary["json"]["consistency"] == "eventual"
    assert {"sku", "units", "available", "reserved"} <= set(summary["json"])
    exact = call("GET", "/inventory/{sku}/exact", "/inventory/s1/exact", sku="s1")
    assert exact["json"] == {
        "sku": "s1",
        "units": 4,
        "available": 2,
        "reserved": 0,
        "sold": 2,
        "consistency": "strong",
    }


def test_exact_counts_read_every_unit_so_only_administrators_may_ask(moto_ddb, moto_tables):
    # Given a sku (the exact counts read each of its units: a cost attack in a loop)
    call("POST", "/inventory", "/inventory", {"sku": "s9", "units": 3})
    # When a signed-in customer asks for them, and then an administrator
    customer = call("GET", "/inventory/{sku}/exact", "/inventory/s9/exact", caller=ALICE, sku="s9")
    admin = call("GET", "/inventory/{sku}/exact", "/inventory/s9/exact", sku="s9")
    # Then the customer is refused before anything is read, the administrator answered
    assert (customer["statusCode"], customer["json"].get("error")) == (403, "FORBIDDEN")
    assert (admin["statusCode"], admin["json"]["available"]) == (200, 3)


def test_reserving_on_a_sku_with_no_unit_created_yet_is_409_with_its_progress(
    moto_ddb, moto_tables
):
    # Given a sku too large to be created before the answer (its units follow in the background)
    created = call("POST", "/inventory", "/inventory", {"sku": "big", "units": 40_000})
    assert created["json"]["status"] == "CREATING"
    before = everything(moto_ddb, moto_tables)
    # When a customer reserves a unit before any is offered
    short = call(
        "POST", RESERVATIONS, "/inventory/big/reservations", {"quantity": 1}, ALICE, sku="big"
    )
    # Then it is the contract's 409 OUT_OF_STOCK, saying the sku is being created and when to
    # come back, and nothing was written
    assert (short["statusCode"], short["json"]["error"]) == (409, "OUT_OF_STOCK")
    body = short["json"]
    assert (body["status"], body["unitsCreated"], body["units"]) == ("CREATING", 0, 40_000)
    assert int(short["headers"]["Retry-After"]) == body["retryAfterSeconds"] > 0
    assert everything(moto_ddb, moto_tables) == before


def test_release_is_204_and_then_404(moto_ddb, moto_tables):
    # Given a reservation
    call("POST", "/inventory", "/inventory", {"sku": "s2", "units": 1})
    rid = call("POST", RESERVATIONS, "/inventory/s2/reservations", {"quantity": 1}, sku="s2")[
        "json"
    ]["reservationId"]
    path = f"/inventory/s2/reservations/{rid}"
    # When it is deleted twice
    first = call("DELETE", RESERVATION, path, sku="s2", reservationId=rid)
    second = call("DELETE", RESERVATION, path, sku="s2", reservationId=rid)
    # Then 204 with no body, then 404 in the error shape
    assert first["statusCode"] == 204 and first["body"] == ""
    assert second["statusCode"] == 404 and second["json"]["error"] == "NOT_FOUND"


def test_out_of_stock_and_duplicate_sku_are_409(moto_ddb, moto_tables):
    # Given a sku of two units
    call("POST", "/inventory", "/inventory", {"sku": "s3", "units": 2})
    before = everything(moto_ddb, moto_tables)
    # When three are asked for, and the sku is created again
    short = call("POST", RESERVATIONS, "/inventory/s3/reservations", {"quantity": 3}, sku="s3")
    again = call("POST", "/inventory", "/inventory", {"sku": "s3", "units": 9})
    # Then both are 409 with their codes, and nothing was written
    assert (short["statusCode"], short["json"]["error"]) == (409, "OUT_OF_STOCK")
    assert (again["statusCode"], again["json"]["error"]) == (409, "ALREADY_EXISTS")
    assert everything(moto_ddb, moto_tables) == before


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"sku": "ok"}, "VALIDATION_ERROR"),
        ({"sku": "ok", "units": 0}, "VALIDATION_ERROR"),
        ({"sku": "ok", "units": 100_001}, "VALIDATION_ERROR"),
        ({"sku": "ok", "units": 2.5}, "VALIDATION_ERROR"),
        ({"sku": "ok", "units": True}, "VALIDATION_ERROR"),
        ({"sku": "has space", "units": 2}, "VALIDATION_ERROR"),
        ({"sku": "ok", "units": 2, "extra": 1}, "VALIDATION_ERROR"),
        ("{not json", "BAD_JSON"),
        ("[1, 2]", "VALIDATION_ERROR"),
    ],
)
def test_bad_creation_is_400_and_writes_nothing(moto_ddb, moto_tables, body, code):
    # When a malformed creation arrives
    response = call("POST", "/inventory", "/inventory", body)
    # Then it is refused in the error shape and the tables stay empty
    assert response["statusCode"] == 400
    assert response["json"]["error"] == code and response["json"]["message"]
    assert everything(moto_ddb, moto_tables) == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"quantity": 0},
        {"quantity": 101},
        {"quantity": "1"},
        {"quantity": 1, "holdSeconds": 0},
        {"quantity": 1, "holdSeconds": 86_401},
        {"quantity": 1, "holdSeconds": "10"},
        {"quantity": 1, "unknown": True},
    ],
)
def test_bad_reservation_is_400_and_writes_nothing(moto_ddb, moto_tables, body):
    # Given a sku
    call("POST", "/inventory", "/inventory", {"sku": "s4", "units": 3})
    before = everything(moto_ddb, moto_tables)
    # When a malformed reservation arrives
    response = call("POST", RESERVATIONS, "/inventory/s4/reservations", body, sku="s4")
    # Then 400, and not a single unit changed
    assert response["statusCode"] == 400
    assert response["json"]["error"] == "VALIDATION_ERROR"
    assert everything(moto_ddb, moto_tables) == before


def test_unknown_sku_and_reservation_are_404_and_write_nothing(moto_ddb, moto_tables):
    # Given one sku
    call("POST", "/inventory", "/inventory", {"sku": "s5", "units": 1})
    before = everything(moto_ddb, moto_tables)
    # When an unknown sku or reservation is used
    answers = [
        call("GET", "/inventory/{sku}", "/inventory/nope", sku="nope"),
        call("POST", RESERVATIONS, "/inventory/nope/reservations", {"quantity": 1}, sku="nope"),
        call(
            "POST",
            RESERVATION + "/confirm",
            "/inventory/s5/reservations/r0/confirm",
            sku="s5",
            reservationId="r0",
        ),
        call("DELETE", RESERVATION, "/inventory/s5/reservations/r0", sku="s5", reservationId="r0"),
    ]
    # Then every one is 404 NOT_FOUND and nothing was written
    assert [(a["statusCode"], a["json"]["error"]) for a in answers] == [(404, "NOT_FOUND")] * 4
    assert everything(moto_ddb, moto_tables) == before


def test_confirm_takes_no_body(moto_ddb, moto_tables):
    # When a confirm carries a body
    response = call(
        "POST",
        RESERVATION + "/confirm",
        "/inventory/s6/reservations/r1/confirm",
        {"x": 1},
        sku="s6",
        reservationId="r1",
    )
    # Then it is a 400, not a 500
    assert response["statusCode"] == 400
    assert everything(moto_ddb, moto_tables) == []
