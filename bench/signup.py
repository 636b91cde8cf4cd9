"""Capped-signup workloads against DynamoDB Local: synchronous transactions, and asynchronous
decisions through the stream.

``make bench`` runs both beside a raw-write ceiling in the same run; ``python -m bench.signup``
runs them on its own DynamoDB Local. Calls and consumed capacity are counted by
:class:`bench.harness.Meter` on the client (a cancelled transaction item is billed 1 WCU).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from bench.harness import Meter, measure, run_workload
from bench.harness import row as bench_row
from service import config
from service.domain.errors import AlreadyRegistered, EventFull
from service.domain.events import Events
from service.domain.registration_requests import (
    ACCEPTED,
    REJECTED,
    Decision,
    RegistrationRequests,
)


def sync_row(
    client: Any,
    meter: Meter,
    tables: Mapping[str, str],
    *,
    ceiling: float,
    attempts: int = 1000,
    workers: int = 100,
    capacity: int = 100,
) -> dict[str, Any]:
    """``attempts`` distinct users register at once from ``workers`` threads on one event."""
    events = Events(client=client, table=tables[config.EVENTS])
    event_id = f"bench-sync-{uuid.uuid4().hex[:8]}"
    events.create(event_id, "bench", capacity)

    def attempt(index: int) -> str:
        try:
            events.register(event_id, f"user-{index:05d}")
            return "ok"
        except (EventFull, AlreadyRegistered) as exc:
            return exc.code

    outcome, snapshot = measure(meter, attempts, workers, attempt)
    result = bench_row(
        "sync transactions",
        outcome,
        snapshot,
        ceiling=ceiling,
        useful=outcome.outcomes.get("ok", 0),
        requests=attempts,
    )
    result["registered_after"] = events.get(event_id)["registered"]
    return result


def async_row(
    client: Any,
    streams: Any,
    meter: Meter,
    tables: Mapping[str, str],
    *,
    ceiling: float,
    requests: int = 1000,
    workers: int = 100,
    capacity: int = 100,
) -> dict[str, Any]:
    """``requests`` registration requests from ``workers`` threads while a stream pump feeds the
    real consumer handler; wall time runs until the last decision."""
    from local.pump import StreamPump
    from service.handlers import registration_consumer

    events = Events(client=client, table=tables[config.EVENTS])
    service = RegistrationRequests(
        client=client, table=tables[config.REGISTRATION_REQUESTS], events=events
    )
    decided_at: list[float] = []
    lock = threading.Lock()
    original_decide = service.decide

    def timed_decide(event_id: str, request_id: str, user_id: str) -> Decision | None:
        decision = original_decide(event_id, request_id, user_id)
        if decision is not None:
            with lock:
                decided_at.append(time.perf_counter())
        return decision

    service.decide = timed_decide  # type: ignore[method-assign]
    registration_consumer.requests.set(service)
    event_id = f"bench-async-{uuid.uuid4().hex[:8]}"
    events.create(event_id, "bench", capacity)
    pump = StreamPump(
        dynamodb=client,
        streams=streams,
        table=tables[config.REGISTRATION_REQUESTS],
        handler=registration_consumer.handler,
        batch_size=config.STREAM_BATCH_SIZE,
        retry_attempts=config.STREAM_RETRY_ATTEMPTS,
    )
    pump.drain(timeout=600)  # skip whatever an earlier run left in the stream
    decided_at.clear()
    ids: list[str] = []

    def submit(index: int) -> str:
        request_id = service.submit(event_id, f"fan-{index:05d}")["requestId"]
        with lock:
            ids.append(request_id)
        return "ok"

    stop = threading.Event()
    pumping = threading.Thread(target=pump.run, args=(stop,), kwargs={"interval": 0.02})
    meter.reset()
    try:
        started = time.perf_counter()
        pumping.start()
        submitted = run_workload(requests, workers, submit)
        last_request = time.perf_counter()
        while len(decided_at) < len(ids) and time.perf_counter() - last_request < 600:
            time.sleep(0.05)
        wall = time.perf_counter() - started
    finally:
        stop.set()
        pumping.join()
        registration_consumer.requests.set(None)
    snapshot = meter.snapshot()
    statuses = [service.get(event_id, request_id)["status"] for request_id in ids]
    accepted = statuses.count(ACCEPTED)
    submitted.wall = wall
    result = bench_row(
        "async decisions via stream",
        submitted,
        snapshot,
        ceiling=ceiling,
        useful=accepted,
        requests=requests,
    )
    last_decision = max(decided_at) if decided_at else last_request
    first_decision = min(decided_at) if decided_at else last_request
    result["outcomes"] = {
        "ACCEPTED": accepted,
        "REJECTED": statuses.count(REJECTED),
        "PENDING": len(statuses) - accepted - statuses.count(REJECTED),
    }
    result["registered_after"] = events.get(event_id)["registered"]
    result["last_request_to_last_decision_s"] = round(last_decision - last_request, 3)
    result["decisions_per_s"] = round(
        len(decided_at) / max(1e-9, last_decision - first_decision), 1
    )
    return result


def main() -> int:

    from bench.harness import markdown, raw_ceiling
    from local import template
    from local.dynamodb_local import DynamoDBLocal
    from service.handlers import registration_consumer
    from turnstile_ddb import retry

    registration_consumer.logger.setLevel("WARNING")  # one line per decision drowns the figures
    loaded = template.load(
        template.TEMPLATE if template.TEMPLATE.exists() else template.synthesize()
    )
    with DynamoDBLocal() as db:
        meter = Meter()
        client = meter.attach(db.client(config=retry.client_config()))
        template.create_tables(client, loaded)
        tables = template.table_names(loaded)
        streams = db.streams_client()
        ceiling = raw_ceiling(client, tables[config.PRODUCTS], "productId", 1000, 100)
        rows = [
            sync_row(client, meter, tables, ceiling=ceiling),
            async_row(client, streams, meter, tables, ceiling=ceiling),
        ]
    print(markdown(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
