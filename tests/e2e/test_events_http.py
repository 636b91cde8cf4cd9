"""Events over HTTP against the local stack, as a client calls it (decider pumped explicitly)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from local.pump import StreamPump
from tests.helpers import Person

DECIDER = "service.handlers.registration_consumer.handler"
CAPACITY = 100  # capped signup: 1000 registrations from 100 threads for 100 seats
ATTEMPTS = 1000
THREADS = 100


def test_signup_flow_over_http(api_url, unique, admin):
    # Given an event with one seat (the administrator acts on ann's and bob's behalf)
    created = admin.post(
        f"{api_url}/events", json={"eventId": unique, "name": "Demo", "capacity": 1}, timeout=10
    )
    assert created.status_code == 201
    # When ann registers, bob is turned away, ann cancels and bob tries again
    ann = admin.post(f"{api_url}/events/{unique}/registrations", json={"userId": "ann"}, timeout=10)
    bob = admin.post(f"{api_url}/events/{unique}/registrations", json={"userId": "bob"}, timeout=10)
    gone = admin.delete(f"{api_url}/events/{unique}/registrations/ann", timeout=10)
    bob_again = admin.post(
        f"{api_url}/events/{unique}/registrations", json={"userId": "bob"}, timeout=10
    )
    # Then the answers follow the contract
    assert ann.status_code == 201 and ann.json()["userId"] == "ann"
    assert bob.status_code == 409 and bob.json()["error"] == "EVENT_FULL"
    assert gone.status_code == 204
    assert bob_again.status_code == 201
    event = admin.get(f"{api_url}/events/{unique}", timeout=10).json()
    assert event["registered"] == 1 and event["version"] == 4


def test_registration_request_is_decided_by_the_stream_consumer(
    api_url, unique, ddb, streams, tables, admin, functions
):
    # Given an event with one seat and two registration requests
    admin.post(
        f"{api_url}/events", json={"eventId": unique, "name": "Async", "capacity": 1}, timeout=10
    )
    first = admin.post(
        f"{api_url}/events/{unique}/registration-requests", json={"userId": "ann"}, timeout=10
    )
    second = admin.post(
        f"{api_url}/events/{unique}/registration-requests", json={"userId": "bob"}, timeout=10
    )
    assert first.status_code == 202 and first.json()["status"] == "PENDING"
    # When the stream is pumped through the consumer (make local runs this pump in a thread)
    StreamPump(
        dynamodb=ddb,
        streams=streams,
        table=tables["registration_requests"],
        handler=functions[DECIDER],
    ).drain(timeout=300)
    # Then the first is accepted, the second rejected as full, readable at their Location
    decided = [
        admin.get(f"{api_url}{response.headers['Location']}", timeout=10).json()
        for response in (first, second)
    ]
    assert [item["status"] for item in decided] == ["ACCEPTED", "REJECTED"]
    assert decided[1]["reason"] == "EVENT_FULL"
    listed = admin.get(f"{api_url}/users/ann/registrations", timeout=10).json()["items"]
    assert unique in {item["eventId"] for item in listed}


Answer = tuple[str, int, dict[str, Any]]


def register_concurrently(
    api_url: str, event_id: str, attempts: list[tuple[Person, str]]
) -> list[Answer]:
    """Each of ``THREADS`` threads sends its share of ``attempts`` (who sends, which userId) on a
    connection of its own, all starting together; returns (userId, status, body) per attempt."""
    url = f"{api_url}/events/{event_id}/registrations"
    barrier = threading.Barrier(THREADS)

    def worker(share: list[tuple[Person, str]]) -> list[Answer]:
        with requests.Session() as session:
            barrier.wait()
            answers = []
            for sender, user_id in share:
                response = session.post(
                    url, json={"userId": user_id}, headers=sender.authorization, timeout=60
                )
                answers.append((user_id, response.status_code, response.json()))
            return answers

    shares = [attempts[w::THREADS] for w in range(THREADS)]
    with ThreadPoolExecutor(THREADS) as pool:
        return [answer for part in pool.map(worker, shares) for answer in part]


def registered_user_ids(ddb: Any, tables: Any, event_id: str) -> list[str]:
    """The registration items of one event, as the table holds them."""
    items = ddb.query(
        TableName=tables["events"],
        KeyConditionExpression="eventId = :e AND begins_with(sk, :reg)",
        ExpressionAttributeValues={":e": {"S": event_id}, ":reg": {"S": "REG#"}},
        ConsistentRead=True,
    )["Items"]
    return [item["userId"]["S"] for item in items]


def new_event(api_url: str, admin: Person, event_id: str, capacity: int) -> None:
    created = admin.post(
        f"{api_url}/events",
        json={"eventId": event_id, "name": "Load", "capacity": capacity},
        timeout=10,
    )
    assert created.status_code == 201, created.text


def test_1000_registrations_by_100_real_users_fill_100_seats_once_each(
    api_url, unique, admin, users, ddb, tables
):
    # Given 100 seats and 100 distinct users, each registering 10 times with its own token,
    # 10 threads sending the same user's registration at once
    new_event(api_url, admin, unique, CAPACITY)
    crowd = users(THREADS)
    each = ATTEMPTS // THREADS
    assert each * each == THREADS  # so that the 10 rounds of 10 users cover the crowd
    attempts = []
    for step in range(each):  # at round `step`, threads 10j..10j+9 all send user 10*step + j
        for thread in range(THREADS):
            person = crowd[step * each + thread // each]
            attempts.append((person, person.sub))  # naming itself: allowed for anyone
    # When the 1000 registrations arrive
    history = register_concurrently(api_url, unique, attempts)
    # Then the recorded history: every user got exactly one seat, every other answer a clean 409
    accepted = [user for user, status, _ in history if status == 201]
    assert sorted(accepted) == sorted(person.sub for person in crowd)
    refusals = Counter(body.get("error") for _, status, body in history if status != 201)
    assert set(refusals) <= {"ALREADY_REGISTERED", "EVENT_FULL"}, refusals
    assert sum(refusals.values()) == ATTEMPTS - CAPACITY
    # And the event's counter and its registration items agree: 100, no user twice
    event = admin.get(f"{api_url}/events/{unique}", timeout=10).json()
    assert event["registered"] == CAPACITY
    held = registered_user_ids(ddb, tables, unique)
    assert sorted(held) == sorted(accepted)


def test_1000_registrations_on_behalf_of_1000_users_never_exceed_100_seats(
    api_url, unique, admin, ddb, tables
):
    # Given 100 seats, and the administrator registering 1000 distinct users on their behalf
    new_event(api_url, admin, unique, CAPACITY)
    attempts = [(admin, f"load-{unique}-{n:04d}") for n in range(ATTEMPTS)]
    # When they all arrive from 100 threads
    history = register_concurrently(api_url, unique, attempts)
    # Then exactly 100 were accepted, each a different user, and 900 refused as EVENT_FULL
    accepted = [user for user, status, _ in history if status == 201]
    assert len(accepted) == len(set(accepted)) == CAPACITY
    refusals = Counter(body.get("error") for _, status, body in history if status != 201)
    assert refusals == {"EVENT_FULL": ATTEMPTS - CAPACITY}
    event = admin.get(f"{api_url}/events/{unique}", timeout=10).json()
    assert event["registered"] == CAPACITY
    assert sorted(registered_user_ids(ddb, tables, unique)) == sorted(accepted)
