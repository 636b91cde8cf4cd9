"""Reservation pools on DynamoDB Local with real threads: a sku's units spread over N pool
partitions, a throttled pool failed over, refusals exact across pools, expired and released units
back in their own pool, and chunks created in parallel exactly once after a crash in any of them.
Every check reads the recorded history AND the table itself."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from local.creator import create_to_ready
from service.domain.errors import OutOfStock
from service.domain.inventory import unit_id, unit_key
from tests.helpers import (
    Clock,
    Faults,
    check_table,
    claim_one,
    storm,
    summary_of,
    units_in_table,
)
from tests.helpers import patient_client as client_of
from tests.helpers import pooled_service as service
from turnstile_ddb import codec, metrics

pytestmark = pytest.mark.integration


class Crash(Exception):
    """An injected crash: not a DynamoDB error, so nothing retries it."""


def test_units_live_in_their_pools_partitions(dynamodb_local, tables, unique):
    client = client_of(dynamodb_local)
    # Given a sku of 12 units over 4 pools
    create_to_ready(service(client, tables), unique, 12, pools=4)
    # Then unit n is in partition <sku>#(n % 4), and its index key names the same pool
    units = units_in_table(client, tables["inventory"], unique)
    assert len(units) == 12
    for unit in units:
        number = int(unit_id(unit["sk"]))
        assert unit["sku"] == unit["pool"] == f"{unique}#{number % 4}"
    assert service(client, tables).exact(unique)["available"] == 12


def test_a_throttled_pool_fails_over_to_another_pool(dynamodb_local, tables, unique):
    client = client_of(dynamodb_local)
    inventory = service(client, tables)
    create_to_ready(inventory, unique, 40, pools=4)
    throttled: list[dict[str, Any]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "UpdateItem" and not throttled:
            throttled.append(codec.decode_item(params["Key"]) or {})

    client.meta.events.register("provide-client-params.dynamodb", record)
    faults = Faults(client)
    faults.throttle("UpdateItem", 1)
    metrics.tally.reset()
    # When the first claim's pool key throttles
    reservation = inventory.reserve(unique, 1)
    # Then the reservation did not wait on that key: it took a unit of another pool at once
    assert faults.sent["UpdateItem"] == 2
    assert metrics.tally.get("claims", "PoolFailover") == 1
    assert metrics.tally.get("claims", "Throttle") == 1
    (number,) = [int(u) for u in reservation["units"]]
    assert unit_key(unique, number, 4)["sku"] != throttled[0]["sku"]
    assert inventory.pool_hints is not None
    assert inventory.pool_hints.is_throttled(str(throttled[0]["sku"]))
    check_table(client, tables, unique, 1)


def test_a_refusal_reads_every_pool_and_is_exact_across_pools(dynamodb_local, tables, unique):
    client = client_of(dynamodb_local)
    inventory = service(client, tables)
    # Given 8 units, one in each of 8 pools: no pool alone holds 3
    create_to_ready(inventory, unique, 8, pools=8)
    # When reservations of 3 are made one after another
    first = inventory.reserve(unique, 3)
    second = inventory.reserve(unique, 3)
    # Then both succeed (units from several pools), and with 2 left a third is refused
    calls = Faults(client)
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 3)
    # after a keys-only read of every pool and no write
    assert calls.sent == {"Query": 8}
    # And the 2 left are still reservable: the refusal was exact
    last = inventory.reserve(unique, 2)
    units = [u for r in (first, second, last) for u in r["units"]]
    assert sorted(units) == [f"{n:06d}" for n in range(8)]
    held = {u["sk"]: u["holder"] for u in units_in_table(client, tables["inventory"], unique)}
    assert len(set(held.values())) == 3  # three reservations, every unit held by one of them
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 1)


def test_contended_reservations_over_pools_hold_no_unit_twice(dynamodb_local, tables, unique):
    client = client_of(dynamodb_local)
    inventory = service(client, tables)
    # Given 60 units over 6 pools and 12 threads reserving 3 units each, far more than there are
    create_to_ready(inventory, unique, 60, pools=6)
    history = storm(inventory, unique, quantity=3, attempts=96, workers=12)
    # Then nothing failed but by OUT_OF_STOCK, each reservation holds exactly 3 distinct units
    assert history.errors == []
    handed_out = Counter(u for r in history.succeeded for u in r["units"])
    assert all(len(set(r["units"])) == 3 for r in history.succeeded)
    assert max(handed_out.values()) == 1
    # And the table agrees: every held unit is listed by its own reservation's lead unit
    holders = check_table(client, tables, unique, 3)
    assert set(holders) == {r["reservationId"] for r in history.succeeded}
    # And whatever the storm left is reservable until exactly 20 reservations exist
    more = 0
    while True:
        try:
            inventory.reserve(unique, 3)
        except OutOfStock:
            break
        more += 1
    assert len(history.succeeded) + more == 20


def test_expired_and_released_units_come_back_to_their_own_pool(dynamodb_local, tables, unique):
    client = client_of(dynamodb_local)
    clock = Clock()
    inventory = service(client, tables, clock=clock)
    # Given 4 units over 2 pools, all held by one reservation of 5 s
    create_to_ready(inventory, unique, 4, pools=2)
    held = inventory.reserve(unique, 4, hold_seconds=5)
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 1)
    # When the hold lapses
    clock.now += 5
    # Then its units are claimable again, in the pools they were in
    again = inventory.reserve(unique, 4, hold_seconds=5)
    assert sorted(again["units"]) == sorted(held["units"])
    units = units_in_table(client, tables["inventory"], unique)
    assert {u["sku"] for u in units} == {f"{unique}#0", f"{unique}#1"}
    assert all(u["pool"] == u["sku"] and u["holder"] == again["reservationId"] for u in units)
    # And a release gives them back to the same pools too
    inventory.release(unique, again["reservationId"])
    third = inventory.reserve(unique, 4)
    assert sorted(third["units"]) == sorted(held["units"])
    assert all(u["pool"] == u["sku"] for u in units_in_table(client, tables["inventory"], unique))
    inventory.confirm(unique, third["reservationId"])
    assert inventory.exact(unique)["sold"] == 4


def _units_of(params: dict[str, Any]) -> list[int]:
    return [
        int(unit_id(codec.decode_item(item["Put"]["Item"])["sk"]))  # type: ignore[index]
        for item in params.get("TransactItems", [])
        if "Put" in item
    ]


@pytest.mark.parametrize("crashed_chunk", [0, 1, 2, 3])
def test_chunks_written_in_parallel_are_created_once_after_a_crash_in_any_chunk(
    dynamodb_local, tables, unique, crashed_chunk
):
    client = client_of(dynamodb_local)
    # Given a creation of 400 units in 4 chunks of 100, written all at once by 4 writers
    builder = service(client, tables, chunk_units=100, inline_units=0, writers=4, parallel_chunks=4)
    builder.create(unique, 400, pools=3)
    sent: list[int] = []
    lock = threading.Lock()

    def crash(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name != "TransactWriteItems":
            return
        numbers = _units_of(params)
        with lock:
            sent.append(len(numbers))
        if numbers and numbers[0] // 100 == crashed_chunk:
            raise Crash(f"inside chunk {crashed_chunk}")

    client.meta.events.register("provide-client-params.dynamodb", crash)
    # When one chunk's transaction crashes while the others are written
    with pytest.raises(Crash):
        builder.advance(unique)
    client.meta.events.unregister("provide-client-params.dynamodb", crash)
    # (the step stops at the crash: chunks not yet started are cancelled)
    assert len(sent) >= 2 and set(sent) == {100}
    assert builder.summary(unique)["unitsCreated"] == 0  # nothing recorded
    written = len(units_in_table(client, tables["inventory"], unique))
    assert written == 100 * (len(sent) - 1)  # every chunk but the crashed one, whole
    # And meanwhile a unit already written is held: the API offers none before its chunk is
    # recorded (no count shown may go negative), the library claims one directly; resuming must
    # not free it
    with pytest.raises(OutOfStock):
        service(client, tables).reserve(unique, 1)
    reservation = claim_one(client, service(client, tables), unique)
    metrics.tally.reset()
    while builder.advance(unique):
        pass
    # Then the resumed step wrote only the crashed chunk's units and recorded each chunk once
    assert metrics.tally.get("inventory", "UnitAlreadyCreated") == written
    units = units_in_table(client, tables["inventory"], unique)
    assert sorted(int(unit_id(u["sk"])) for u in units) == list(range(400))
    (held,) = [u for u in units if u["status"] == "held"]
    assert held["holder"] == reservation["reservationId"]
    assert summary_of(client, tables, unique)["available"] == 400
    assert builder.summary(unique)["status"] == "READY"


def test_a_crash_before_the_parallel_step_is_recorded_counts_each_chunk_once(
    dynamodb_local, tables, unique
):
    client = client_of(dynamodb_local)
    builder = service(client, tables, chunk_units=10, inline_units=0, parallel_chunks=2)
    builder.create(unique, 35)  # 4 chunks: two steps of two
    state = {"records": 0}

    def crash(params: dict[str, Any], model: Any, **_: Any) -> None:
        items = params.get("TransactItems", [])
        recording = any(
            (i.get("Update") or {}).get("Key", {}).get("sk") == {"S": "sku"} for i in items
        )
        if model.name == "TransactWriteItems" and recording:
            state["records"] += 1
            if state["records"] == 2:
                raise Crash("after the second step's units, before its record")

    client.meta.events.register("provide-client-params.dynamodb", crash)
    with pytest.raises(Crash):
        while builder.advance(unique):
            pass
    client.meta.events.unregister("provide-client-params.dynamodb", crash)
    assert builder.summary(unique)["unitsCreated"] == 20
    while builder.advance(unique):
        pass
    assert len(units_in_table(client, tables["inventory"], unique)) == 35
    assert summary_of(client, tables, unique)["available"] == 35
