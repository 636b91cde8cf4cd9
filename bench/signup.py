"""Signup workloads (seed 001) against DynamoDB Local: synchronous transactions and asynchronous
decisions through the stream.

    python -m bench.signup [--attempts 1000] [--workers 100] [--capacity 100]

Standalone it starts its own DynamoDB Local and creates the tables of the synthesized template
(``cdk.out/``, synthesized first if missing). The two ``run_*`` functions take an injected client so
a harness can call them on its own instance.

Counted with botocore hooks on the client: every DynamoDB call (``before-call``) and the write
capacity DynamoDB reports (``ReturnConsumedCapacity=TOTAL`` is added to each write). Cancelled
transactions report no capacity, so WCU per accepted registration counts what succeeded only.
Throughput here is client-bound: compare ``wall_vs_raw_write`` (a raw unconditional put workload of
the same size, measured in the same run) rather than absolute seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "functions") not in sys.path:
    sys.path.insert(0, str(ROOT / "functions"))

from service import config  # noqa: E402
from service.domain.errors import AlreadyRegistered, EventFull  # noqa: E402
from service.domain.events import Events  # noqa: E402
from service.domain.registration_requests import (  # noqa: E402
    ACCEPTED,
    REJECTED,
    Decision,
    RegistrationRequests,
)
from turnstile import codec  # noqa: E402

WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems")


class Meter:
    """Counts DynamoDB calls and sums reported write capacity on one client, thread-safely."""

    def __init__(self) -> None:
        self.calls = 0
        self.by_operation: dict[str, int] = {}
        self.wcu = 0.0
        self._lock = threading.Lock()

    def before_call(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls += 1
            self.by_operation[model.name] = self.by_operation.get(model.name, 0) + 1

    @staticmethod
    def ask_capacity(params: dict[str, Any], **_: Any) -> None:
        params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def after_call(self, parsed: dict[str, Any], **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity")
        if not consumed:
            return
        entries = consumed if isinstance(consumed, list) else [consumed]
        total = sum(
            float(entry.get("WriteCapacityUnits", entry.get("CapacityUnits", 0)))
            for entry in entries
        )
        with self._lock:
            self.wcu += total


@contextmanager
def metered(client: Any) -> Iterator[Meter]:
    meter = Meter()
    tag = uuid.uuid4().hex
    events = client.meta.events
    hooks: list[tuple[str, Callable[..., Any]]] = [
        ("before-call.dynamodb", meter.before_call),
        ("after-call.dynamodb", meter.after_call),
        *((f"before-parameter-build.dynamodb.{op}", meter.ask_capacity) for op in WRITES),
    ]
    for name, hook in hooks:
        events.register(name, hook, unique_id=f"{tag}-{name}")
    try:
        yield meter
    finally:
        for name, _hook in hooks:
            events.unregister(name, unique_id=f"{tag}-{name}")


def _names(tables: Any) -> Mapping[str, str]:
    return tables.names if isinstance(tables, config.Tables) else tables


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _in_threads(workers: int, items: list[Any], work: Callable[[Any], None]) -> None:
    barrier = threading.Barrier(workers)

    def run(chunk: list[Any]) -> None:
        barrier.wait()
        for item in chunk:
            work(item)

    threads = [threading.Thread(target=run, args=(items[i::workers],)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run_raw_writes(client: Any, tables: Any, *, writes: int = 1000, workers: int = 100) -> float:
    """The ceiling: the same number of unconditional puts from the same threads; wall seconds."""
    table = _names(tables)[config.EVENTS]
    run = uuid.uuid4().hex[:8]

    def put(index: int) -> None:
        client.put_item(
            TableName=table,
            Item=codec.encode_item({"eventId": f"raw-{run}", "sk": f"RAW#{index}"}),
        )

    started = time.perf_counter()
    _in_threads(workers, list(range(writes)), put)
    return time.perf_counter() - started


def run_sync_signup(
    client: Any, tables: Any, *, attempts: int = 1000, workers: int = 100, capacity: int = 100
) -> dict[str, Any]:
    """``attempts`` distinct users register at once from ``workers`` threads on one event."""
    events = Events(client=client, table=_names(tables)[config.EVENTS])
    event_id = f"bench-sync-{uuid.uuid4().hex[:8]}"
    events.create(event_id, "bench", capacity)
    latencies: list[float] = []
    outcomes = {"accepted": 0, "rejected": 0, "errors": 0}
    lock = threading.Lock()

    def attempt(user: str) -> None:
        started = time.perf_counter()
        try:
            events.register(event_id, user)
            outcome = "accepted"
        except (EventFull, AlreadyRegistered):
            outcome = "rejected"
        except Exception:  # noqa: BLE001 - counted, the benchmark goes on
            outcome = "errors"
        elapsed = time.perf_counter() - started
        with lock:
            outcomes[outcome] += 1
            latencies.append(elapsed)

    with metered(client) as meter:
        started = time.perf_counter()
        _in_threads(workers, [f"user-{i:05d}" for i in range(attempts)], attempt)
        wall = time.perf_counter() - started
    registered = events.get(event_id)["registered"]
    return {
        "workload": "sync transactions",
        "attempts": attempts,
        "workers": workers,
        "capacity": capacity,
        "wall_seconds": round(wall, 3),
        **outcomes,
        "registered_after": registered,
        "dynamodb_calls": meter.calls,
        "calls_per_attempt": round(meter.calls / attempts, 3),
        "wcu_total": meter.wcu,
        "wcu_per_accepted": round(meter.wcu / max(1, outcomes["accepted"]), 3),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p99_ms": round(_percentile(latencies, 0.99) * 1000, 1),
    }


def run_async_signup(
    client: Any,
    streams: Any,
    tables: Any,
    *,
    requests: int = 1000,
    workers: int = 100,
    capacity: int = 100,
) -> dict[str, Any]:
    """``requests`` registration requests from ``workers`` threads while a stream pump decides them
    with the real consumer handler; time from the last request to the last decision."""
    from local.pump import StreamPump
    from service.handlers import registration_consumer

    names = _names(tables)
    events = Events(client=client, table=names[config.EVENTS])
    service = RegistrationRequests(
        client=client, table=names[config.REGISTRATION_REQUESTS], events=events
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
        table=names[config.REGISTRATION_REQUESTS],
        handler=registration_consumer.handler,
        batch_size=config.STREAM_BATCH_SIZE,
        retry_attempts=config.STREAM_RETRY_ATTEMPTS,
    )
    pump.drain(timeout=600)  # skip whatever an earlier run left in the stream
    decided_at.clear()
    ids: list[str] = []
    errors = 0
    last_request = 0.0

    def submit(user: str) -> None:
        nonlocal errors, last_request
        try:
            request_id = service.submit(event_id, user)["requestId"]
        except Exception:  # noqa: BLE001 - counted
            with lock:
                errors += 1
            return
        with lock:
            ids.append(request_id)
            last_request = max(last_request, time.perf_counter())

    stop = threading.Event()
    try:
        with metered(client) as meter:
            pumping = threading.Thread(target=pump.run, args=(stop,), kwargs={"interval": 0.02})
            started = time.perf_counter()
            pumping.start()
            _in_threads(workers, [f"fan-{i:05d}" for i in range(requests)], submit)
            while True:
                with lock:
                    done = len(decided_at) >= len(ids)
                if done or time.perf_counter() - last_request > 600:
                    break
                time.sleep(0.05)
            stop.set()
            pumping.join()
            wall = time.perf_counter() - started
    finally:
        stop.set()
        registration_consumer.requests.set(None)
    statuses = [service.get(event_id, request_id)["status"] for request_id in ids]
    accepted = statuses.count(ACCEPTED)
    last_decision = max(decided_at) if decided_at else last_request
    first_decision = min(decided_at) if decided_at else last_request
    return {
        "workload": "async decisions via stream",
        "requests": requests,
        "workers": workers,
        "capacity": capacity,
        "wall_seconds": round(wall, 3),
        "accepted": accepted,
        "rejected": statuses.count(REJECTED),
        "pending_left": len(statuses) - accepted - statuses.count(REJECTED),
        "errors": errors,
        "registered_after": events.get(event_id)["registered"],
        "dynamodb_calls": meter.calls,
        "calls_per_request": round(meter.calls / requests, 3),
        "wcu_total": meter.wcu,
        "wcu_per_accepted": round(meter.wcu / max(1, accepted), 3),
        "wcu_per_request": round(meter.wcu / max(1, requests), 3),
        "seconds_from_last_request_to_last_decision": round(last_decision - last_request, 3),
        "decisions_per_second": round(
            len(decided_at) / max(1e-9, last_decision - first_decision), 1
        ),
    }


def main(argv: list[str] | None = None) -> int:
    import boto3

    from local import template
    from local.dynamodb_local import CREDENTIALS, DynamoDBLocal
    from turnstile import retry

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--capacity", type=int, default=100)
    args = parser.parse_args(argv)
    from service.handlers import registration_consumer

    registration_consumer.logger.setLevel("WARNING")  # one line per decision drowns the figures
    if not template.TEMPLATE.exists():
        template.synthesize()
    loaded = template.load()
    with DynamoDBLocal() as db:
        client = db.client(config=retry.client_config())
        names = template.create_tables(client, loaded)
        environment = template.merged_environment(template.function_environments(loaded, names))
        tables = config.Tables(
            {
                key.removesuffix("_TABLE").lower(): value
                for key, value in environment.items()
                if key.endswith("_TABLE")
            }
        )
        streams = boto3.session.Session().client(
            "dynamodbstreams",
            endpoint_url=db.endpoint,
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
        ceiling = run_raw_writes(client, tables, writes=args.attempts, workers=args.workers)
        sync = run_sync_signup(
            client, tables, attempts=args.attempts, workers=args.workers, capacity=args.capacity
        )
        sync["wall_vs_raw_write"] = round(sync["wall_seconds"] / ceiling, 2)
        asynchronous = run_async_signup(
            client,
            streams,
            tables,
            requests=args.attempts,
            workers=args.workers,
            capacity=args.capacity,
        )
        asynchronous["wall_vs_raw_write"] = round(asynchronous["wall_seconds"] / ceiling, 2)
    print(
        json.dumps(
            {"raw_write_seconds": round(ceiling, 3), "results": [sync, asynchronous]}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
