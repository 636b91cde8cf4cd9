"""Events over HTTP against the local stack, as a client calls it (decider pumped explicitly)."""

from __future__ import annotations

import requests

from local.pump import StreamPump
from service.handlers import registration_consumer


def test_signup_flow_over_http(api_url, unique):
    # Given an event with one seat
    created = requests.post(
        f"{api_url}/events", json={"eventId": unique, "name": "Demo", "capacity": 1}, timeout=10
    )
    assert created.status_code == 201
    # When ann registers, bob is turned away, ann cancels and bob tries again
    ann = requests.post(
        f"{api_url}/events/{unique}/registrations", json={"userId": "ann"}, timeout=10
    )
    bob = requests.post(
        f"{api_url}/events/{unique}/registrations", json={"userId": "bob"}, timeout=10
    )
    gone = requests.delete(f"{api_url}/events/{unique}/registrations/ann", timeout=10)
    bob_again = requests.post(
        f"{api_url}/events/{unique}/registrations", json={"userId": "bob"}, timeout=10
    )
    # Then the answers follow the contract
    assert ann.status_code == 201 and ann.json()["userId"] == "ann"
    assert bob.status_code == 409 and bob.json()["error"] == "EVENT_FULL"
    assert gone.status_code == 204
    assert bob_again.status_code == 201
    event = requests.get(f"{api_url}/events/{unique}", timeout=10).json()
    assert event["registered"] == 1 and event["version"] == 4


def test_registration_request_is_decided_by_the_stream_consumer(
    api_url, unique, ddb, streams, tables
):
    # Given an event with one seat and two registration requests
    requests.post(
        f"{api_url}/events", json={"eventId": unique, "name": "Async", "capacity": 1}, timeout=10
    )
    first = requests.post(
        f"{api_url}/events/{unique}/registration-requests", json={"userId": "ann"}, timeout=10
    )
    second = requests.post(
        f"{api_url}/events/{unique}/registration-requests", json={"userId": "bob"}, timeout=10
    )
    assert first.status_code == 202 and first.json()["status"] == "PENDING"
    # When the stream is pumped through the consumer (make local runs this pump in a thread)
    StreamPump(
        dynamodb=ddb,
        streams=streams,
        table=tables["registration_requests"],
        handler=registration_consumer.handler,
    ).drain(timeout=300)
    # Then the first is accepted, the second rejected as full, readable at their Location
    decided = [
        requests.get(f"{api_url}{response.headers['Location']}", timeout=10).json()
        for response in (first, second)
    ]
    assert [item["status"] for item in decided] == ["ACCEPTED", "REJECTED"]
    assert decided[1]["reason"] == "EVENT_FULL"
    listed = requests.get(f"{api_url}/users/ann/registrations", timeout=10).json()["items"]
    assert unique in {item["eventId"] for item in listed}
