"""The per-sku summary, kept from the inventory table's stream by the real consumer handler, through
the local pump (Lambda's event source mapping semantics), converges to the exact counts, and
replaying records changes nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from local.pump import StreamPump
from service import runtime
from service.domain.errors import OutOfStock
from service.domain.inventory import Inventory
from service.domain.inventory_summary import Summaries
from service.handlers import inventory_summary
from tests.helpers import patient

pytestmark = pytest.mark.integration


@pytest.fixture
def consumer(ddb: Any, tables: Any) -> Iterator[Any]:
    """The deployed handler, with its dependencies injected."""
    inventory_summary.summaries.set(Summaries(client=ddb, table=tables["inventory_summary"]))
    yield inventory_summary.handler
    runtime.Lazy.reset_all()


def inventory_of(ddb: Any, tables: Any) -> Inventory:
    return Inventory(
        client=patient(ddb), table=tables["inventory"], summary_table=tables["inventory_summary"]
    )


def counts(summary: dict[str, Any]) -> dict[str, int]:
    return {key: summary[key] for key in ("available", "reserved", "sold")}


def test_summary_converges_to_exact_counts_and_ignores_redelivery(
    ddb, streams, tables, unique, consumer
):
    # Given 120 units, then 30 threads reserving, confirming every third and releasing every fifth
    service = inventory_of(ddb, tables)
    service.create(unique, 120)
    barrier = threading.Barrier(30)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        barrier.wait()
        try:
            work(n)
        except Exception as exc:  # noqa: BLE001 - asserted empty below
            errors.append(exc)

    def work(n: int) -> None:
        for attempt in range(3):
            try:
                reservation = service.reserve(unique, 1 + (n + attempt) % 2)
            except OutOfStock:
                continue
            if (n + attempt) % 3 == 0:
                service.confirm(unique, reservation["reservationId"])
            elif (n + attempt) % 5 == 0:
                service.release(unique, reservation["reservationId"])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    exact = service.exact(unique)
    assert exact["sold"] > 0 and exact["reserved"] > 0 and exact["available"] > 0

    # When the stream is drained through the consumer, recording every event it was given
    delivered: list[dict[str, Any]] = []

    def recording(event: dict[str, Any], context: Any) -> Any:
        delivered.append(event)
        return consumer(event, context)

    pump = StreamPump(dynamodb=ddb, streams=streams, table=tables["inventory"], handler=recording)
    pump.drain()
    # Then the summary equals the exact counts from the units, and says it is eventual
    summary = service.summary(unique)
    assert counts(summary) == counts(exact)
    assert summary["consistency"] == "eventual" and summary["units"] == 120
    assert pump.dead_letters == []

    # When every record is delivered again (a retried batch, a bisected one, a crash after a write)
    for event in delivered:
        assert consumer(event, None) == {"batchItemFailures": []}
    # Then nothing moved
    assert counts(service.summary(unique)) == counts(exact)


def test_a_record_that_fails_is_retried_and_counted_once(ddb, streams, tables, unique, consumer):
    # Given a consumer whose first call after the reservation fails the whole batch (a crash)
    service = inventory_of(ddb, tables)
    service.create(unique, 4)
    StreamPump(dynamodb=ddb, streams=streams, table=tables["inventory"], handler=consumer).drain()
    reservation = service.reserve(unique, 2)
    service.confirm(unique, reservation["reservationId"])
    crashed: list[bool] = []

    def flaky(event: dict[str, Any], context: Any) -> Any:
        answer = consumer(event, context)  # applied, then the invocation "dies"
        if not crashed:
            crashed.append(True)
            raise RuntimeError("crash after the writes")
        return answer

    # When the stream is drained (the pump redelivers the crashed batch, as Lambda does)
    pump = StreamPump(dynamodb=ddb, streams=streams, table=tables["inventory"], handler=flaky)
    pump.drain()
    # Then the counts are exact all the same
    assert crashed == [True]
    assert counts(service.summary(unique)) == {"available": 2, "reserved": 0, "sold": 2}
    assert counts(service.exact(unique)) == {"available": 2, "reserved": 0, "sold": 2}


def _records_of(ddb: Any, streams: Any, tables: Any, work: Any) -> list[dict[str, Any]]:
    """The inventory stream's records of what ``work()`` did, in stream order (not applied)."""
    events: list[dict[str, Any]] = []

    def keep(event: dict[str, Any], context: Any) -> Any:
        events.append(event)
        return {"batchItemFailures": []}

    pump = StreamPump(dynamodb=ddb, streams=streams, table=tables["inventory"], handler=keep)
    pump.start_at_latest()
    work()
    pump.drain()
    return [record for event in events for record in event["Records"]]


def _transactions_of(summaries: Summaries) -> list[int]:
    """Counts the consumer's transactions (one entry per call: how many items it held)."""
    sent: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        sent.append(len(params["TransactItems"]))

    event = "provide-client-params.dynamodb.TransactWriteItems"
    summaries.client.meta.events.register(event, count)
    return sent


def test_a_batch_of_changes_is_counted_in_one_transaction(
    ddb, streams, tables, unique, dynamodb_local
):
    # Given a batch of 14 unit changes: 5 reservations of 2 units, 2 of them confirmed (so 4
    # units change twice in the batch), and the creation's records, which count nothing
    service = inventory_of(ddb, tables)

    def work() -> None:
        service.create(unique, 20)
        reservations = [service.reserve(unique, 2) for _ in range(5)]
        for reservation in reservations[:2]:
            service.confirm(unique, reservation["reservationId"])

    records = _records_of(ddb, streams, tables, work)
    summaries = Summaries(client=dynamodb_local.client(), table=tables["inventory_summary"])
    sent = _transactions_of(summaries)
    inventory_summary.summaries.set(summaries)
    try:
        # When the consumer is given the whole batch
        answer = inventory_summary.handler({"Records": records}, None)
    finally:
        runtime.Lazy.reset_all()
    # Then it wrote one transaction: a marker per unit that changed (10) and the sku's counts
    assert answer == {"batchItemFailures": []}
    assert sent == [11]
    assert counts(service.summary(unique)) == {"available": 10, "reserved": 6, "sold": 4}
    assert counts(service.exact(unique)) == counts(service.summary(unique))


def test_a_batch_partly_applied_before_is_finished_without_counting_twice(
    ddb, streams, tables, unique, consumer
):
    # Given the records of reservations, confirms and releases, of which the first half was
    # applied before (a bisected batch, say), some of a unit's changes on each side
    service = inventory_of(ddb, tables)

    def work() -> None:
        service.create(unique, 30)
        for n in range(8):
            reservation = service.reserve(unique, 1 + n % 3)
            if n % 2:
                service.confirm(unique, reservation["reservationId"])
            elif n % 4 == 0:
                service.release(unique, reservation["reservationId"])

    records = _records_of(ddb, streams, tables, work)
    half = len(records) // 2
    assert consumer({"Records": records[:half]}, None) == {"batchItemFailures": []}
    # When the whole batch is delivered (again, for its first half)
    assert consumer({"Records": records}, None) == {"batchItemFailures": []}
    # Then every change is counted once
    assert counts(service.summary(unique)) == counts(service.exact(unique))
