"""Reservations committed in one write, and skus created in resumable chunks, on DynamoDB Local
with real threads. Every check reads the recorded history AND the table itself:

* no unit is held by two reservations; a reservation holds exactly ``quantity`` units or none;
* every held unit names a reservation whose lead unit lists it (no unit held by an unknown
  reservation), also after a crash injected before, inside and after the reservation's write;
* a creation crashed after any chunk resumes to exactly ``units`` units, and two concurrent
  creations of one sku create one set.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

from local.creator import create_to_ready, header_record
from local.pump import StreamPump
from service.domain.errors import AlreadyExists, OutOfStock
from service.domain.inventory import CREATION_FILTER, Inventory, unit_id
from service.handlers import inventory_creator
from tests.helpers import (
    Faults,
    _Raw,
    check_table,
    claim_one,
    hold_as_rival,
    storm,
    summary_of,
    units_in_table,
)
from turnstile_ddb import codec, metrics, retry

pytestmark = pytest.mark.integration


class Crash(Exception):
    """What an injected crash raises: not a DynamoDB error, so nothing retries it."""


@pytest.fixture(scope="module")
def patient(dynamodb_local: Any) -> Any:
    """A client that waits long for answers: the machine is shared and DynamoDB Local slow."""
    return dynamodb_local.client(config=retry.client_config(read_timeout=60))


def service(client: Any, tables: Any, **extra: Any) -> Inventory:
    return Inventory(
        client=client,
        table=tables["inventory"],
        summary_table=tables["inventory_summary"],
        **extra,
    )


def create_all(inventory: Inventory, sku: str, units: int) -> dict[str, Any]:
    """Create ``sku`` and run the creation worker on its header's changes until READY."""
    return create_to_ready(inventory, sku, units)


@pytest.mark.parametrize(
    ("quantity", "units", "attempts", "workers"),
    [(1, 40, 120, 12), (3, 40, 60, 12), (100, 250, 12, 6)],
)
def test_contended_reservations_hold_exactly_quantity_units_each_and_none_twice(
    patient, tables, unique, quantity, units, attempts, workers
):
    # Given a sku and more attempts than it can serve
    inventory = service(patient, tables)
    create_all(inventory, unique, units)
    # When threads reserve `quantity` units at once, all together
    history = storm(inventory, unique, quantity=quantity, attempts=attempts, workers=workers)
    # Then nothing failed, and every success holds `quantity` distinct units nobody else holds
    assert history.errors == []
    taken = [u for r in history.succeeded for u in r["units"]]
    assert all(len(set(r["units"])) == quantity for r in history.succeeded)
    assert len(taken) == len(set(taken))
    # And the stock ran out: fewer than `quantity` free units remain
    assert len(taken) > units - quantity
    assert history.out_of_stock == attempts - len(history.succeeded)
    # And the table agrees: exactly the recorded reservations hold units, each its own
    holders = check_table(patient, tables, unique, quantity)
    assert set(holders) == {r["reservationId"] for r in history.succeeded}


def test_a_refusal_is_one_keys_only_query_and_no_write(patient, tables, unique):
    inventory = service(patient, tables)
    create_all(inventory, unique, 2)
    inventory.header(unique)  # cached, as in a warm Lambda
    faults = Faults(patient)
    # The first look at a pool this process knows nothing of reads it from a random pivot: the
    # range after the pivot, then the one before it (a Query each, no write)
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 3)
    assert faults.sent == {"Query": 2}
    # From then on the pool is known to be small: a refusal is one keys-only Query of it
    faults.sent.clear()
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 3)
    assert faults.sent == {"Query": 1}


class Injector:
    """botocore hooks that crash the n-th call of an operation: before it is sent (``before``:
    nothing applied) or after its answer arrived (``after``: applied, the caller never knows)."""

    def __init__(self, client: Any, operation: str, when: str, nth: int = 1) -> None:
        self.operation, self.when, self.left = operation, when, nth
        event = "before-send" if when == "before" else "after-call"
        self.event = f"{event}.dynamodb"
        self.client = client
        client.meta.events.register(self.event, self)

    def __call__(self, **kwargs: Any) -> None:
        model = kwargs.get("model")
        if model is not None:
            name = model.name
        else:
            target = kwargs["request"].headers.get("X-Amz-Target", b"")
            name = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        if name != self.operation or self.left <= 0:
            return
        self.left -= 1
        if self.left == 0:
            raise Crash(f"crash {self.when} {self.operation}")

    def remove(self) -> None:
        self.client.meta.events.unregister(self.event, self)


@pytest.mark.parametrize("quantity", [1, 3, 100])
@pytest.mark.parametrize(
    ("operation", "when"),
    [("Query", "before"), ("WRITE", "before"), ("WRITE", "after")],
    ids=["before-the-query", "inside-before-the-write-lands", "after-the-write-landed"],
)
def test_a_crash_anywhere_leaves_no_unit_held_by_an_unknown_reservation(
    dynamodb_local, tables, unique, quantity, operation, when
):
    client = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    # A one-unit reservation may claim a guessed unit without reading: the crash before the
    # Query needs the read (the write crashes are of the guessed claim, for quantity 1)
    inventory = service(client, tables, guess=operation != "Query")
    create_all(inventory, unique, quantity + 5)
    write = "UpdateItem" if quantity == 1 else "TransactWriteItems"
    injector = Injector(client, write if operation == "WRITE" else operation, when)
    # When the reservation crashes at that point
    with pytest.raises(Crash):
        inventory.reserve(unique, quantity)
    injector.remove()
    # Then every held unit belongs to a reservation whose lead unit lists exactly its units
    holders = check_table(client, tables, unique, quantity)
    assert len(holders) == (1 if when == "after" else 0)
    # And the sku still works: the rest can be reserved if enough are left
    if quantity + 5 - quantity * len(holders) >= quantity:
        assert len(inventory.reserve(unique, quantity)["units"]) == quantity


def ten_units_and_faults(
    dynamodb_local: Any, tables: Any, unique: str, quantity: int
) -> tuple[Any, Any, Faults, str]:
    """A client with fault hooks, its inventory service, ten units of ``unique``, and the write
    a reservation of ``quantity`` sends."""
    client = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    inventory = service(client, tables)
    create_all(inventory, unique, 10)
    return (
        client,
        inventory,
        Faults(client),
        "UpdateItem" if quantity == 1 else "TransactWriteItems",
    )


@pytest.mark.parametrize("quantity", [1, 3])
def test_a_lost_reply_is_resent_and_applied_once(dynamodb_local, tables, unique, quantity):
    client, inventory, faults, write = ten_units_and_faults(
        dynamodb_local, tables, unique, quantity
    )
    faults.lose_reply(write, 1)
    # When the reply of the reservation's write is lost (the write itself was applied)
    reservation = inventory.reserve(unique, quantity)
    # Then the resend (same ClientRequestToken / same holder) answers the first write's outcome
    assert faults.sent[write] == 2
    holders = check_table(client, tables, unique, quantity)
    assert list(holders) == [reservation["reservationId"]]


@pytest.mark.parametrize("quantity", [1, 3])
def test_a_throttled_resend_after_a_lost_reply_keeps_the_units_it_took(
    dynamodb_local, tables, unique, quantity
):
    # Given a reservation whose write is applied but its reply lost, and whose resend is throttled
    # (the chaos run found this: the claim failed over to another pool and took other units,
    # leaving the first ones held by a reservation nobody knew)
    client, inventory, faults, write = ten_units_and_faults(
        dynamodb_local, tables, unique, quantity
    )
    faults.lose_reply(write, 1)
    faults.throttle(write, 1)
    # When the reservation is made
    reservation = inventory.reserve(unique, quantity)
    # Then it is the units the first send took: one reservation holds units, exactly q of them
    holders = check_table(client, tables, unique, quantity)
    assert list(holders) == [reservation["reservationId"]]


def test_units_taken_meanwhile_are_replaced_from_a_fresh_read(dynamodb_local, tables, unique):
    client = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    rival = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    inventory = service(client, tables)
    create_all(inventory, unique, 20)
    taken_meanwhile: list[str] = []

    def steal(params: dict[str, Any], model: Any, **_: Any) -> None:
        # Just before the first reservation transaction is sent, a rival holds two of its units
        if model.name != "TransactWriteItems" or taken_meanwhile:
            return
        for item in params["TransactItems"][:2]:
            key = codec.decode_item(item["Update"]["Key"]) or {}
            taken_meanwhile.append(hold_as_rival(rival, tables["inventory"], key))

    client.meta.events.register("provide-client-params.dynamodb", steal)
    metrics.tally.reset()
    calls = Faults(client)
    # When a reservation of all-but-two units is attempted (the other two are its spares)
    reservation = inventory.reserve(unique, 18)
    # Then the first transaction was cancelled for the two stolen units only, they were
    # replaced from a fresh read (the two spares), and the second committed: no give-back, no
    # third write
    assert len(taken_meanwhile) == 2
    assert not set(taken_meanwhile) & set(reservation["units"])
    assert len(set(reservation["units"])) == 18
    assert calls.sent.get("TransactWriteItems") == 2
    # two reads from random pivots (the first, then the replacements'), each the range after its
    # pivot and the one before it when that was short
    assert 2 <= calls.sent.get("Query", 0) <= 4
    assert metrics.tally.get("claims", "ClaimLost") == 2


def test_a_transaction_conflict_counts_as_taken_and_is_replaced(dynamodb_local, tables, unique):
    client = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    inventory = service(client, tables)
    create_all(inventory, unique, 10)
    state = {"left": 1}

    def conflict(request: Any, **_: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        name = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        if name != "TransactWriteItems" or not state["left"]:
            return None
        state["left"] -= 1
        body = json.dumps(
            {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": "Transaction cancelled [None, TransactionConflict, None]",
                "CancellationReasons": [
                    {"Code": "None"},
                    {"Code": "TransactionConflict", "Message": "conflict"},
                    {"Code": "None"},
                ],
            }
        ).encode()
        headers = HTTPHeaders.from_dict({"Content-Type": "application/x-amz-json-1.0"})
        return AWSResponse(request.url, 400, headers, _Raw(body))

    client.meta.events.register("before-send.dynamodb", conflict)
    metrics.tally.reset()
    reservation = inventory.reserve(unique, 3)
    assert len(set(reservation["units"])) == 3
    assert metrics.tally.get("claims", "ClaimLost") == 1
    check_table(client, tables, unique, 3)


# -- creation ----------------------------------------------------------------------------------


def header_write(params: dict[str, Any]) -> bool:
    return any(
        (item.get("Update") or {}).get("Key", {}).get("sk") == {"S": "sku"}
        for item in params.get("TransactItems", [])
    )


def plenty() -> float:
    """A worker's remaining time that always covers another step."""
    return 3_600_000.0


def one_step_a_record(builder: Inventory, sku: str) -> None:
    while builder.advance(sku):
        pass


def steps_chained(builder: Inventory, sku: str) -> None:
    """As the worker runs with time to spare: one invocation chains the steps (the loop is the
    records of the steps it did, redelivered after a crash)."""
    while builder.advance_while(sku, plenty):
        pass


@pytest.mark.parametrize("run", [one_step_a_record, steps_chained])
@pytest.mark.parametrize("crash_after_chunk", [1, 2, 3, 4])
def test_a_creation_crashed_after_any_chunk_resumes_to_exactly_its_units(
    dynamodb_local, tables, unique, crash_after_chunk, run
):
    client = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    builder = service(client, tables, chunk_units=10, inline_units=0, parallel_chunks=1)
    created = builder.create(unique, 35)  # 4 chunks: 10, 10, 10, 5
    assert created == {"sku": unique, "units": 35, "status": "CREATING", "unitsCreated": 0}
    seen = {"chunks": 0}

    def crash(params: dict[str, Any], model: Any, **_: Any) -> None:
        # The chunk's units are written; the crash hits before its progress is recorded
        if model.name == "TransactWriteItems" and header_write(params):
            seen["chunks"] += 1
            if seen["chunks"] == crash_after_chunk:
                raise Crash("after a chunk")

    client.meta.events.register("provide-client-params.dynamodb", crash)
    with pytest.raises(Crash):
        run(builder, unique)
    client.meta.events.unregister("provide-client-params.dynamodb", crash)
    progress = builder.summary(unique)
    assert progress["status"] == "CREATING"
    assert progress["unitsCreated"] == 10 * (crash_after_chunk - 1)
    # When the worker runs again (a redelivered record)
    run(builder, unique)
    # Then there are exactly 35 units, counted once each in the summary
    units = units_in_table(client, tables["inventory"], unique)
    assert sorted(unit_id(u["sk"]) for u in units) == [f"{n:06d}" for n in range(35)]
    assert summary_of(client, tables, unique)["available"] == 35
    assert builder.summary(unique)["status"] == "READY"


def test_one_invocation_chains_steps_while_its_remaining_time_covers_another(
    patient, tables, unique
):
    # Given a sku of 5 chunks of 10 units, one chunk a step
    builder = service(patient, tables, chunk_units=10, inline_units=0, parallel_chunks=1)
    builder.create(unique, 45)
    header = builder.header(unique)
    record = {"Records": [header_record(header)]}
    # When an invocation without a context (no remaining time known) runs: one step only
    inventory_creator.process(record, None, builder)
    assert builder.summary(unique)["unitsCreated"] == 10
    # And one whose remaining time covers another step twice only, then no more
    left = iter([3_600_000, 3_600_000, 0])
    assert builder.advance_while(unique, lambda: next(left)) is True
    assert builder.summary(unique)["unitsCreated"] == 40  # three steps more
    # When an invocation with time to spare gets the (now stale) first header record
    inventory_creator.process(record, Context(), builder)
    # Then it finishes the creation: exactly 45 units, counted once
    assert builder.summary(unique)["status"] == "READY"
    units = units_in_table(patient, tables["inventory"], unique)
    assert sorted(unit_id(u["sk"]) for u in units) == [f"{n:06d}" for n in range(45)]
    assert summary_of(patient, tables, unique)["available"] == 45
    # and a record that arrives after READY does nothing
    assert builder.advance_while(unique, plenty) is False


class Context:
    """Lambda's context, with plenty of time left."""

    def get_remaining_time_in_millis(self) -> int:
        return 3_600_000


def test_a_crash_inside_a_chunk_resumes_without_overwriting_a_unit(dynamodb_local, tables, unique):
    client = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    builder = service(client, tables, chunk_units=250, inline_units=0, writers=1, parallel_chunks=1)
    builder.create(unique, 300)
    calls = {"n": 0}

    def crash(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems" and not header_write(params):
            calls["n"] += 1
            if calls["n"] == 2:  # 100 units of the first chunk are written
                raise Crash("inside a chunk")

    client.meta.events.register("provide-client-params.dynamodb", crash)
    with pytest.raises(Crash):
        builder.advance(unique)
    client.meta.events.unregister("provide-client-params.dynamodb", crash)
    # Meanwhile the API offers none of the units written: their chunk is not recorded (3.7)
    with pytest.raises(OutOfStock):
        service(client, tables).reserve(unique, 1)
    # and one of them is claimed all the same (the library, asked without that filter): the
    # resumed chunk must not free it
    reservation = claim_one(client, service(client, tables), unique)
    metrics.tally.reset()
    while builder.advance(unique):
        pass
    # (units 0-99 and 200-249 were written before the crash surfaced: the pool ran its queue)
    assert metrics.tally.get("inventory", "UnitAlreadyCreated") == 150
    units = units_in_table(client, tables["inventory"], unique)
    assert len(units) == 300
    (held,) = [u for u in units if u["status"] == "held"]
    assert held["holder"] == reservation["reservationId"]


def test_two_concurrent_creations_of_one_sku_create_one_set(dynamodb_local, tables, unique):
    client = dynamodb_local.client(config=retry.client_config(read_timeout=60))
    answers: list[Any] = []
    barrier = threading.Barrier(2)

    def create() -> None:
        builder = service(client, tables, chunk_units=10, inline_units=0)
        barrier.wait()
        try:
            answers.append(create_all(builder, unique, 45))
        except Exception as exc:  # noqa: BLE001 - asserted below
            answers.append(exc)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a["status"] for a in answers] == ["READY", "READY"], answers
    units = units_in_table(client, tables["inventory"], unique)
    assert sorted(unit_id(u["sk"]) for u in units) == [f"{n:06d}" for n in range(45)]
    assert summary_of(client, tables, unique)["available"] == 45
    # And the same creation again is idempotent, another body is 409
    assert service(client, tables).create(unique, 45)["status"] == "READY"
    with pytest.raises(AlreadyExists):
        service(client, tables).create(unique, 46)


def test_the_worker_builds_a_sku_from_the_stream_through_the_filtered_mapping(
    ddb, streams, tables, unique, wired
):
    # Given a sku too large to build inline (chunks of 10 units), answered at once as CREATING
    builder = service(ddb, tables, chunk_units=10, inline_units=0)
    seen: Counter[str] = Counter()

    def handler(event: dict[str, Any], context: Any) -> Any:
        for record in event["Records"]:
            seen[record["dynamodb"]["Keys"]["sk"]["S"]] += 1
        # Only this sku's records go on to the worker: the session's table holds other tests'
        # skus too, some left CREATING on purpose, and one invocation chains steps (should the
        # pump fall back to the stream's start, it would go on to build those skus too)
        mine = [r for r in event["Records"] if r["dynamodb"]["Keys"]["sku"]["S"] == unique]
        return inventory_creator.handler({**event, "Records": mine}, context)

    # When the stream is pumped to the worker, filtered as the deployed mapping is
    pump = StreamPump(
        dynamodb=ddb,
        streams=streams,
        table=tables["inventory"],
        handler=handler,
        batch_size=1,
        filters=(CREATION_FILTER,),
    )
    # (from the stream's end: the session's table holds every earlier test's records)
    pump.start_at_latest()
    assert builder.create(unique, 25)["status"] == "CREATING"
    pump.drain(timeout=120)
    # Then the header's changes, and only they, drove the creation to READY with 25 units
    assert set(seen) <= {"sku"}
    assert builder.summary(unique)["status"] == "READY"
    assert len(units_in_table(ddb, tables["inventory"], unique)) == 25
