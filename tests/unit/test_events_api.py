"""Events API shape on moto (no concurrency claims here): answers, status codes, and every 4xx
path writing nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.handlers import events
from tests.helpers import proxy_event, scan_all

E = "/events/{eventId}"
REG = "/events/{eventId}/registrations"
REQ = "/events/{eventId}/registration-requests"


def call(method: str, resource: str, path: str, body: Any = None, **kwargs: Any) -> dict:
    params = kwargs.pop("params", None)
    raw = body if isinstance(body, str) or body is None else json.dumps(body)
    response = events.handler(
        proxy_event(method, resource, path, body=raw, params=params, **kwargs), None
    )
    response["json"] = json.loads(response["body"]) if response["body"] else None
    return response


def create(event_id: str = "e1", capacity: int = 2) -> dict:
    return call(
        "POST", "/events", "/events", {"eventId": event_id, "name": "N", "capacity": capacity}
    )


def register(user: str, event_id: str = "e1") -> dict:
    return call(
        "POST",
        REG,
        f"/events/{event_id}/registrations",
        {"userId": user},
        params={"eventId": event_id},
    )


def test_create_and_read_an_event(moto_ddb, moto_tables):
    # When an event is created and read back
    created = create()
    read = call("GET", E, "/events/e1", params={"eventId": "e1"})
    # Then both answers have the contract's shape
    assert created["statusCode"] == 201
    assert created["headers"]["Location"] == "/events/e1"
    expected = {"eventId": "e1", "name": "N", "capacity": 2, "registered": 0, "version": 1}
    assert created["json"] == expected
    assert read["statusCode"] == 200 and read["json"] == expected
    # And a second create is refused
    assert create()["json"]["error"] == "ALREADY_EXISTS"


def test_register_full_already_registered_and_unknown_event(moto_ddb, moto_tables):
    # Given an event with two seats
    create(capacity=2)
    # When three users register, one of them twice
    first = register("ann")
    second = register("bob")
    full = register("cy")
    again = register("ann")
    # Then the answers are exact
    assert first["statusCode"] == 201
    assert set(first["json"]) == {"eventId", "userId", "registeredAt"}
    assert second["statusCode"] == 201
    assert (full["statusCode"], full["json"]["error"]) == (409, "EVENT_FULL")
    assert full["json"]["capacity"] == 2 and full["json"]["registered"] == 2
    assert (again["statusCode"], again["json"]["error"]) == (409, "ALREADY_REGISTERED")
    # And an unknown event is a 404 that writes nothing
    before = scan_all(moto_ddb, moto_tables["events"])
    missing = register("ann", event_id="nope")
    assert (missing["statusCode"], missing["json"]["error"]) == (404, "NOT_FOUND")
    assert scan_all(moto_ddb, moto_tables["events"]) == before


def test_delete_frees_the_seat_and_user_registrations_are_listed(moto_ddb, moto_tables):
    # Given a full event of one seat, and ann registered for another event too
    create("e1", capacity=1)
    create("e2", capacity=5)
    register("ann", "e1")
    register("ann", "e2")
    # When ann cancels e1
    deleted = call(
        "DELETE",
        f"{REG}/{{userId}}",
        "/events/e1/registrations/ann",
        params={"eventId": "e1", "userId": "ann"},
    )
    # Then 204, the seat is free and a second delete is 404
    assert deleted["statusCode"] == 204 and deleted["body"] == ""
    assert call("GET", E, "/events/e1", params={"eventId": "e1"})["json"]["registered"] == 0
    again = call(
        "DELETE",
        f"{REG}/{{userId}}",
        "/events/e1/registrations/ann",
        params={"eventId": "e1", "userId": "ann"},
    )
    assert again["statusCode"] == 404
    assert register("bob", "e1")["statusCode"] == 201
    # And ann's registrations list only e2
    listed = call(
        "GET", "/users/{userId}/registrations", "/users/ann/registrations", params={"userId": "ann"}
    )
    assert listed["statusCode"] == 200
    assert [item["eventId"] for item in listed["json"]["items"]] == ["e2"]


def test_registration_request_is_accepted_for_later(moto_ddb, moto_tables):
    # Given an event
    create()
    # When a registration is requested
    response = call(
        "POST", REQ, "/events/e1/registration-requests", {"userId": "ann"}, params={"eventId": "e1"}
    )
    # Then 202 PENDING with a Location that reads back the request
    assert response["statusCode"] == 202
    request_id = response["json"]["requestId"]
    assert response["json"] == {"requestId": request_id, "status": "PENDING"}
    location = response["headers"]["Location"]
    assert location == f"/events/e1/registration-requests/{request_id}"
    read = call(
        "GET", f"{REQ}/{{requestId}}", location, params={"eventId": "e1", "requestId": request_id}
    )
    assert read["json"] == {"requestId": request_id, "userId": "ann", "status": "PENDING"}
    # And an unknown event or request is 404, writing nothing
    before = scan_all(moto_ddb, moto_tables["registration_requests"])
    assert (
        call(
            "POST",
            REQ,
            "/events/x/registration-requests",
            {"userId": "ann"},
            params={"eventId": "x"},
        )["statusCode"]
        == 404
    )
    assert (
        call(
            "GET",
            f"{REQ}/{{requestId}}",
            "/events/e1/registration-requests/zz",
            params={"eventId": "e1", "requestId": "zz"},
        )["statusCode"]
        == 404
    )
    assert scan_all(moto_ddb, moto_tables["registration_requests"]) == before


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("{not json", "BAD_JSON"),
        ({"eventId": "e9", "name": "N"}, "VALIDATION_ERROR"),
        ({"eventId": "e9", "name": "N", "capacity": 0}, "VALIDATION_ERROR"),
        ({"eventId": "e9", "name": "N", "capacity": 100_001}, "VALIDATION_ERROR"),
        ({"eventId": "e9", "name": "N", "capacity": True}, "VALIDATION_ERROR"),
        ({"eventId": "e9", "name": "N", "capacity": "5"}, "VALIDATION_ERROR"),
        ({"eventId": "e9", "name": "N", "capacity": 5.5}, "VALIDATION_ERROR"),
        ({"eventId": "e 9", "name": "N", "capacity": 5}, "VALIDATION_ERROR"),
        ({"eventId": "e9", "name": "", "capacity": 5}, "VALIDATION_ERROR"),
        ({"eventId": "e9", "name": "N", "capacity": 5, "extra": 1}, "VALIDATION_ERROR"),
        ([1, 2], "VALIDATION_ERROR"),
    ],
)
def test_bad_event_bodies_are_400_and_write_nothing(moto_ddb, moto_tables, body, code):
    response = call("POST", "/events", "/events", body)
    assert (response["statusCode"], response["json"]["error"]) == (400, code)
    assert set(response["json"]) >= {"error", "message"}
    assert scan_all(moto_ddb, moto_tables["events"]) == []


@pytest.mark.parametrize("route", [REG, REQ])
@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"userId": None}, 400, "VALIDATION_ERROR"),  # left out: the caller; null: refused
        ({"userId": 5}, 400, "VALIDATION_ERROR"),
        ({"userId": "a/b"}, 400, "VALIDATION_ERROR"),
        ({"userId": "x" * 129}, 400, "VALIDATION_ERROR"),
        ({"userId": "ann", "seat": 3}, 400, "VALIDATION_ERROR"),
        ("", 400, "BAD_JSON"),
        ('{"userId": NaN}', 400, "BAD_JSON"),
    ],
)
def test_bad_registration_bodies_are_4xx_and_write_nothing(
    moto_ddb, moto_tables, route, body, status, code
):
    # Given an event
    create()
    before = {
        name: scan_all(moto_ddb, moto_tables[name]) for name in ("events", "registration_requests")
    }
    # When a malformed body is posted
    path = route.replace("{eventId}", "e1")
    response = call("POST", route, path, body, params={"eventId": "e1"})
    # Then a 4xx in the contract's shape, and nothing written
    assert (response["statusCode"], response["json"]["error"]) == (status, code)
    after = {
        name: scan_all(moto_ddb, moto_tables[name]) for name in ("events", "registration_requests")
    }
    assert after == before


def test_wrong_content_type_and_bad_path_ids_are_refused(moto_ddb, moto_tables):
    create()
    wrong_type = call(
        "POST",
        REG,
        "/events/e1/registrations",
        {"userId": "ann"},
        params={"eventId": "e1"},
        headers={"Content-Type": "text/plain"},
    )
    assert (wrong_type["statusCode"], wrong_type["json"]["error"]) == (
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    )
    bad_id = call("GET", E, "/events/%2e%2e", params={"eventId": "../x"})
    assert (bad_id["statusCode"], bad_id["json"]["error"]) == (400, "VALIDATION_ERROR")
    assert call("GET", E, "/events/e1", params={"eventId": "e1"})["json"]["registered"] == 0
