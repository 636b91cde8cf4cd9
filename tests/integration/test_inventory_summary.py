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


def counts(summary: dict[str, Any]) -> dict[str, int]:
    return {key: summary[key] for key in ("available", "reserved", "sold")}


def test_summary_converges_to_exact_counts_and_ignores_redelivery(
    ddb, streams, tables, unique, consumer
):
    # Given 120 units, then 30 threads reserving, confirming every third and releasing every fifth
    service = Inventory(
        client=patient(ddb), table=tables["inventory"], summary_table=tables["inventory_summary"]
    )
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
    service = Inventory(
        client=patient(ddb), table=tables["inventory"], summary_table=tables["inventory_summary"]
    )
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
