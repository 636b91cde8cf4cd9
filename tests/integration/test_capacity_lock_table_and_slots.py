"""The library's other two ways to materialize the lock, on DynamoDB Local with threads.

* The "extra lock table": the counter lives in a table of its own, the members in another table
  whose layout is not ours to change. :mod:`turnstile_ddb.capacity` is table-agnostic, so the same
  join
  spans both tables in one transaction.
* Pre-created slot rows: every slot exists before anyone claims it (:mod:`turnstile_ddb.slots`).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import pytest

from turnstile_ddb import capacity, codec, retry, slots

pytestmark = pytest.mark.integration

BACKOFF = retry.Backoff(attempts=6, base=0.005, cap=0.05)


def make_table(ddb: Any, name: str, partition: str, sort: str | None = None) -> str:
    attributes = [{"AttributeName": partition, "AttributeType": "S"}]
    keys = [{"AttributeName": partition, "KeyType": "HASH"}]
    if sort:
        attributes.append({"AttributeName": sort, "AttributeType": "S"})
        keys.append({"AttributeName": sort, "KeyType": "RANGE"})
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=attributes,
        KeySchema=keys,
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def run_together(workers: int, work: Any) -> None:
    barrier = threading.Barrier(workers)

    def start(index: int) -> None:
        barrier.wait()
        work(index)

    threads = [threading.Thread(target=start, args=(index,)) for index in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_the_counter_can_live_in_a_separate_lock_table(ddb, unique):
    # Given a lock table holding a counter (limit 10) and a separate members table
    locks = make_table(ddb, f"locks-{unique}", "lockId")
    members = make_table(ddb, f"members-{unique}", "groupId", "memberId")
    ddb.put_item(
        TableName=locks,
        Item=codec.encode_item({"lockId": "group-1", "count": 0, "limit": 10, "version": 1}),
    )
    counter = capacity.CapacityRow(table=locks, key={"lockId": "group-1"})
    history: list[tuple[str, str]] = []
    lock = threading.Lock()

    def join(index: int) -> None:
        member = capacity.Member(
            table=members,
            key={"groupId": "group-1", "memberId": f"m{index}"},
            item={"joinedBy": f"thread-{index}"},
        )
        try:
            capacity.join(ddb, counter, member, backoff=BACKOFF)
            outcome = "joined"
        except capacity.Full:
            outcome = "full"
        with lock:
            history.append((f"m{index}", outcome))

    # When 50 threads try to join at once
    run_together(50, join)
    # Then exactly 10 joined, the members table holds exactly them, and the counter says 10
    assert Counter(outcome for _, outcome in history) == {"joined": 10, "full": 40}
    stored = ddb.query(
        TableName=members,
        KeyConditionExpression="groupId = :g",
        ExpressionAttributeValues=codec.values(g="group-1"),
        ConsistentRead=True,
    )["Items"]
    assert sorted(codec.decode_item(item)["memberId"] for item in stored) == sorted(  # type: ignore[index]
        member for member, outcome in history if outcome == "joined"
    )
    current = codec.decode_item(
        ddb.get_item(TableName=locks, Key=codec.encode_item(counter.key), ConsistentRead=True)[
            "Item"
        ]
    )
    assert current == {"lockId": "group-1", "count": 10, "limit": 10, "version": 11}
    # And the refusals say exactly why: a member again, or a counter that does not exist
    first = next(member for member, outcome in history if outcome == "joined")
    with pytest.raises(capacity.AlreadyMember) as already:
        capacity.join(
            ddb,
            counter,
            capacity.Member(members, {"groupId": "group-1", "memberId": first}, {}),
            backoff=BACKOFF,
        )
    assert already.value.member is not None and already.value.member["memberId"] == first
    with pytest.raises(capacity.NoCounter):
        capacity.join(
            ddb,
            capacity.CapacityRow(table=locks, key={"lockId": "nobody"}),
            capacity.Member(members, {"groupId": "nobody", "memberId": "x"}, {}),
            backoff=BACKOFF,
        )
    # And leaving across the two tables frees the place
    capacity.leave(
        ddb,
        counter,
        capacity.Member(members, {"groupId": "group-1", "memberId": first}),
        backoff=BACKOFF,
    )
    with pytest.raises(capacity.NotMember):
        capacity.leave(
            ddb,
            counter,
            capacity.Member(members, {"groupId": "group-1", "memberId": first}),
            backoff=BACKOFF,
        )


def test_each_pre_created_slot_is_claimed_by_exactly_one_holder(ddb, unique):
    # Given a meeting room with its eight hourly slots created in advance
    table = make_table(ddb, f"slots-{unique}", "roomId", "hour")
    hours = [f"{hour:02d}:00" for hour in range(9, 17)]
    keys = [{"roomId": "room-1", "hour": hour} for hour in hours]
    assert slots.create(ddb, table, keys, backoff=BACKOFF) == 8
    assert slots.create(ddb, table, keys, backoff=BACKOFF) == 0  # creating again is harmless
    claims: list[tuple[str, str | None]] = []
    lock = threading.Lock()

    def claim(index: int) -> None:
        order = keys[:]
        random.Random(index).shuffle(order)
        won = slots.book_any(ddb, table, order, f"holder-{index}", backoff=BACKOFF)
        with lock:
            claims.append((f"holder-{index}", None if won is None else won["hour"]))

    # When 64 people try to book any free hour at once
    run_together(64, claim)
    # Then exactly eight won, each a different hour, and the table names the same holders
    won = {holder: hour for holder, hour in claims if hour is not None}
    assert len(won) == 8 and sorted(won.values()) == hours
    stored = ddb.query(
        TableName=table,
        KeyConditionExpression="roomId = :r",
        ExpressionAttributeValues=codec.values(r="room-1"),
        ConsistentRead=True,
    )["Items"]
    by_hour = {item["hour"]: item for item in map(codec.decode_item, stored) if item}
    assert {by_hour[hour]["holder"]: hour for hour in hours} == won
    assert all(by_hour[hour]["version"] == 2 for hour in hours)  # claimed once, never stolen
    # And a holder resending its claim (a lost answer) still owns the slot; anyone else is refused
    holder, hour = next(iter(won.items()))
    key = {"roomId": "room-1", "hour": hour}
    assert slots.book(ddb, table, key, holder, backoff=BACKOFF)["holder"] == holder
    with pytest.raises(slots.SlotTaken) as taken:
        slots.book(ddb, table, key, "intruder", backoff=BACKOFF)
    assert taken.value.slot["holder"] == holder
    with pytest.raises(slots.NotHolder):
        slots.release(ddb, table, key, "intruder", backoff=BACKOFF)
    with pytest.raises(slots.NoSuchSlot):
        slots.book(ddb, table, {"roomId": "room-1", "hour": "23:00"}, holder, backoff=BACKOFF)
    # And once released the slot can be claimed by someone else
    slots.release(ddb, table, key, holder, backoff=BACKOFF)
    assert slots.book(ddb, table, key, "latecomer", backoff=BACKOFF)["holder"] == "latecomer"
