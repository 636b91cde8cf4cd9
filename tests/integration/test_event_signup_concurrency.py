"""Synchronous registration on DynamoDB Local: real threads, invariants checked from the history.

Every attempt's outcome is recorded; the table is then read back and must agree with the history:
exactly ``capacity`` seats taken, ``registered`` equal to the registration items, nobody twice,
and a ``version`` that counts every change of the event item.
"""

from __future__ import annotations

import random
import threading
from collections import Counter, defaultdict
from typing import Any

import pytest

from service.domain.errors import AlreadyRegistered, EventFull, NotFound
from service.domain.events import Events
from tests.helpers import registration_items

pytestmark = pytest.mark.integration

REGISTERED = "REGISTERED"


def attempt_concurrently(
    events: Events, event_id: str, users: list[str], workers: int
) -> list[tuple[str, str]]:
    """Every user in ``users`` tries once; ``workers`` threads start together at a barrier.
    Returns the history as (user, outcome) pairs."""
    history: list[tuple[str, str]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(workers)
    chunks = [users[index::workers] for index in range(workers)]

    def work(chunk: list[str]) -> None:
        barrier.wait()
        for user in chunk:
            try:
                events.register(event_id, user)
                outcome = REGISTERED
            except EventFull:
                outcome = EventFull.code
            except AlreadyRegistered:
                outcome = AlreadyRegistered.code
            with lock:
                history.append((user, outcome))

    threads = [threading.Thread(target=work, args=(chunk,)) for chunk in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return history


@pytest.fixture
def events(ddb: Any, tables: Any) -> Events:
    return Events(client=ddb, table=tables["events"])


def test_1000_attempts_from_100_threads_fill_exactly_100_seats(ddb, tables, events, unique):
    # Given an event with 100 seats and 1000 distinct users
    events.create(unique, "Launch", 100)
    users = [f"user-{index:04d}" for index in range(1000)]
    # When they all try to register at once from 100 threads
    history = attempt_concurrently(events, unique, users, workers=100)
    # Then exactly 100 got a seat and 900 were told the event is full
    outcomes = Counter(outcome for _, outcome in history)
    assert len(history) == 1000
    assert outcomes == {REGISTERED: 100, EventFull.code: 900}
    # And the table agrees with the history: registered = 100, one item per winner, nobody twice
    winners = {user for user, outcome in history if outcome == REGISTERED}
    stored = registration_items(ddb, tables["events"], unique)
    assert sorted(item["userId"] for item in stored) == sorted(winners)
    event = events.get(unique)
    assert event["registered"] == 100
    assert event["version"] == 1 + 100  # every seat taken changed the lock item exactly once
    # And a registered user trying again is told so (not "full", although the event is full)
    with pytest.raises(AlreadyRegistered):
        events.register(unique, next(iter(winners)))
    assert events.get(unique)["registered"] == 100


@pytest.mark.parametrize("capacity", [100, 20])
def test_50_users_each_trying_twice_at_once_get_one_seat_each_at_most(
    ddb, tables, events, unique, capacity
):
    # Given an event and 50 users who each send two registrations at the same moment
    events.create(unique, "Workshop", capacity)
    users = [f"user-{index:02d}" for index in range(50)] * 2
    random.Random(7).shuffle(users)
    # When all 100 attempts start together
    history = attempt_concurrently(events, unique, users, workers=100)
    # Then nobody holds two seats and the seats taken are min(capacity, 50)
    by_user: dict[str, list[str]] = defaultdict(list)
    for user, outcome in history:
        by_user[user].append(outcome)
    seated = {user for user, outcomes in by_user.items() if REGISTERED in outcomes}
    assert all(outcomes.count(REGISTERED) <= 1 for outcomes in by_user.values())
    assert len(seated) == min(capacity, 50)
    for user, outcomes in by_user.items():
        if user in seated:  # the other attempt lost to its twin (or found the event full first)
            assert sorted(outcomes) in (
                sorted([REGISTERED, AlreadyRegistered.code]),
                sorted([REGISTERED, EventFull.code]),
            )
        else:
            assert outcomes == [EventFull.code, EventFull.code]
    if capacity >= 50:  # with room for everyone, the twin can only have lost to its sibling
        assert all(
            sorted(outcomes) == sorted([REGISTERED, AlreadyRegistered.code])
            for outcomes in by_user.values()
        )
    # And the table agrees
    stored = registration_items(ddb, tables["events"], unique)
    assert sorted(item["userId"] for item in stored) == sorted(seated)
    assert events.get(unique)["registered"] == len(seated)


def test_cancelling_frees_the_seat_for_someone_else(ddb, tables, events, unique):
    # Given a full event of 3 seats
    events.create(unique, "Dinner", 3)
    for user in ("ann", "bob", "cy"):
        events.register(unique, user)
    with pytest.raises(EventFull):
        events.register(unique, "dee")
    # When one registration is cancelled
    events.unregister(unique, "bob")
    # Then the count dropped, the version moved on, and the seat can be taken again
    assert events.get(unique)["registered"] == 2
    assert events.get(unique)["version"] == 1 + 3 + 1
    events.register(unique, "dee")
    assert sorted(item["userId"] for item in registration_items(ddb, tables["events"], unique)) == [
        "ann",
        "cy",
        "dee",
    ]
    # And cancelling twice, or for an unknown event, is a clean "not found" that changes nothing
    with pytest.raises(NotFound):
        events.unregister(unique, "bob")
    with pytest.raises(NotFound):
        events.unregister(f"{unique}-none", "ann")
    assert events.get(unique)["registered"] == 3


def test_concurrent_cancellations_and_registrations_keep_the_count_exact(
    ddb, tables, events, unique
):
    # Given a full event of 50 seats
    events.create(unique, "Swap", 50)
    holders = [f"holder-{index}" for index in range(50)]
    for user in holders:
        events.register(unique, user)
    newcomers = [f"new-{index}" for index in range(100)]
    barrier = threading.Barrier(2)
    history: list[tuple[str, str]] = []
    lock = threading.Lock()

    def cancel_half() -> None:
        barrier.wait()
        for user in holders[:25]:
            events.unregister(unique, user)

    def join() -> None:
        barrier.wait()
        for user in newcomers:
            try:
                events.register(unique, user)
                outcome = REGISTERED
            except EventFull:
                outcome = EventFull.code
            with lock:
                history.append((user, outcome))

    # When 25 holders cancel while 100 newcomers try to register
    threads = [threading.Thread(target=cancel_half), threading.Thread(target=join)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then the count equals the registrations held, and never more than the capacity
    stored = registration_items(ddb, tables["events"], unique)
    newcomers_in = sum(1 for _, outcome in history if outcome == REGISTERED)
    assert len(stored) == 25 + newcomers_in
    assert events.get(unique)["registered"] == len(stored) <= 50
