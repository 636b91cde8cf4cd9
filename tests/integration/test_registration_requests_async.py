"""Asynchronous registration through DynamoDB Local's stream and the local pump (which behaves like
the Lambda event source mapping), with the very consumer handler Lambda runs."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from local.dynamodb_local import DynamoDBLocal
from local.pump import StreamPump
from service import runtime
from service.domain.errors import EventFull
from service.domain.events import Events
from service.domain.registration_requests import (
    ACCEPTED,
    PENDING,
    REJECTED,
    RegistrationRequests,
)
from service.handlers import registration_consumer
from tests.helpers import registration_items, table_environment
from turnstile_ddb import codec

pytestmark = pytest.mark.integration


@pytest.fixture
def decider(
    monkeypatch: pytest.MonkeyPatch,
    dynamodb_local: DynamoDBLocal,
    ddb: Any,
    tables: Any,
    template: dict[str, Any],
) -> Iterator[None]:
    """The consumer handler, wired to DynamoDB Local the way the local runner wires it."""
    for key, value in {**dynamodb_local.environment(), **table_environment(template)}.items():
        monkeypatch.setenv(key, value)
    runtime.Lazy.reset_all()
    runtime.dynamodb.set(ddb)
    yield
    runtime.Lazy.reset_all()


def new_pump(ddb: Any, streams: Any, tables: Any) -> StreamPump:
    return StreamPump(
        dynamodb=ddb,
        streams=streams,
        table=tables["registration_requests"],
        handler=registration_consumer.handler,
    )


def submit_concurrently(
    requests: RegistrationRequests, event_id: str, users: list[str], workers: int
) -> list[str]:
    ids: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(workers)

    def work(chunk: list[str]) -> None:
        barrier.wait()
        for user in chunk:
            request_id = requests.submit(event_id, user)["requestId"]
            with lock:
                ids.append(request_id)

    threads = [
        threading.Thread(target=work, args=(users[index::workers],)) for index in range(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return ids


def request_items(ddb: Any, table: str, event_id: str) -> dict[str, dict[str, Any]]:
    items: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "eventId = :e",
        "ExpressionAttributeValues": codec.values(e=event_id),
        "ConsistentRead": True,
    }
    while True:
        response = ddb.query(**kwargs)
        for raw in response["Items"]:
            item = codec.decode_item(raw) or {}
            items[item["requestId"]] = item
        if "LastEvaluatedKey" not in response:
            return items
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def snapshot(ddb: Any, tables: Any, events: Events, event_id: str) -> dict[str, Any]:
    return {
        "event": events.get(event_id),
        "requests": request_items(ddb, tables["registration_requests"], event_id),
        "registrations": sorted(
            (item["userId"], item.get("requestId"))
            for item in registration_items(ddb, tables["events"], event_id)
        ),
    }


@pytest.fixture
def services(ddb: Any, tables: Any) -> tuple[Events, RegistrationRequests]:
    events = Events(client=ddb, table=tables["events"])
    return events, RegistrationRequests(
        client=ddb, table=tables["registration_requests"], events=events
    )


def test_1000_requests_on_100_seats_accept_exactly_100_and_a_replay_changes_nothing(
    ddb, streams, tables, unique, decider, services
):
    # Given an event with 100 seats and 1000 requests submitted from 100 threads (all PENDING)
    events, requests = services
    events.create(unique, "Concert", 100)
    ids = submit_concurrently(requests, unique, [f"fan-{i:04d}" for i in range(1000)], 100)
    assert len(set(ids)) == 1000
    assert {requests.get(unique, request_id)["status"] for request_id in ids[:20]} == {PENDING}
    # When the stream is pumped through the consumer handler
    new_pump(ddb, streams, tables).drain(timeout=600)
    # Then every request is decided, exactly 100 accepted, the rest rejected as full
    stored = request_items(ddb, tables["registration_requests"], unique)
    assert set(stored) == set(ids)
    statuses = Counter(item["status"] for item in stored.values())
    assert statuses == {ACCEPTED: 100, REJECTED: 900}
    assert {item.get("reason") for item in stored.values() if item["status"] == REJECTED} == {
        EventFull.code
    }
    # And the seats are the accepted requests' registrations, counted once each
    before = snapshot(ddb, tables, events, unique)
    accepted = sorted(
        (item["userId"], item["requestId"])
        for item in stored.values()
        if item["status"] == ACCEPTED
    )
    assert before["registrations"] == accepted
    assert before["event"]["registered"] == 100
    assert before["event"]["version"] == 1 + 100
    # When the very same stream records are delivered again from the start (a full replay)
    replayed = new_pump(ddb, streams, tables).drain(timeout=600)
    # Then they were delivered (inserts and the decider's own updates) and nothing changed
    assert replayed >= 2000
    assert snapshot(ddb, tables, events, unique) == before


def test_sync_and_async_together_never_exceed_the_capacity(
    ddb, streams, tables, unique, decider, services
):
    # Given an event with 50 seats, a pump deciding requests as they arrive, and 2 x 100 users
    events, requests = services
    events.create(unique, "Meetup", 50)
    pump = new_pump(ddb, streams, tables)
    stop = threading.Event()
    pumping = threading.Thread(target=pump.run, args=(stop,), kwargs={"interval": 0.05})
    pumping.start()
    sync_outcomes: list[str] = []
    request_ids: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(20)

    def register(chunk: list[str]) -> None:
        barrier.wait()
        for user in chunk:
            try:
                events.register(unique, user)
                outcome = ACCEPTED
            except EventFull:
                outcome = REJECTED
            with lock:
                sync_outcomes.append(outcome)

    def ask(chunk: list[str]) -> None:
        barrier.wait()
        for user in chunk:
            request_id = requests.submit(unique, user)["requestId"]
            with lock:
                request_ids.append(request_id)

    sync_users = [f"sync-{i}" for i in range(100)]
    async_users = [f"async-{i}" for i in range(100)]
    threads = [threading.Thread(target=register, args=(sync_users[i::10],)) for i in range(10)] + [
        threading.Thread(target=ask, args=(async_users[i::10],)) for i in range(10)
    ]
    # When both kinds of registration race, while the decider runs
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        stop.set()
        pumping.join()
    pump.drain(timeout=300)
    # Then every request is decided and sync + async seats add up to exactly the capacity
    stored = request_items(ddb, tables["registration_requests"], unique)
    assert set(stored) == set(request_ids) and len(request_ids) == 100
    assert all(item["status"] in (ACCEPTED, REJECTED) for item in stored.values())
    async_seats = sum(1 for item in stored.values() if item["status"] == ACCEPTED)
    sync_seats = sync_outcomes.count(ACCEPTED)
    assert sync_seats + async_seats == 50
    registrations = registration_items(ddb, tables["events"], unique)
    assert len(registrations) == 50
    assert events.get(unique)["registered"] == 50


def test_a_request_by_a_user_who_already_has_a_seat_is_rejected_with_that_reason(
    ddb, streams, tables, unique, decider, services
):
    # Given a user registered synchronously, who then also asks asynchronously
    events, requests = services
    events.create(unique, "Talk", 5)
    events.register(unique, "ann")
    request_id = requests.submit(unique, "ann")["requestId"]
    # When the decider runs
    new_pump(ddb, streams, tables).drain(timeout=300)
    # Then the request is rejected as ALREADY_REGISTERED and the count is still 1
    assert requests.get(unique, request_id) == {
        "requestId": request_id,
        "userId": "ann",
        "status": REJECTED,
        "reason": "ALREADY_REGISTERED",
    }
    assert events.get(unique)["registered"] == 1
