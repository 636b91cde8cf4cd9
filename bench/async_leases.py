"""``python -m bench --only async-leases``: lease acquisitions through the FIFO queue from one
process, on one event loop (``aio.lease_queue``, aiobotocore) and through the synchronous
``lease_queue`` (one thread per worker), against DynamoDB Local: the DynamoDB calls each
acquisition cost (counted on the client, every request sent, the releases apart), its latency,
and the async path's calls per acquisition over the sync path's (the target: at most 1).

Each worker acquires, holds for a moment, and releases, over and over, on a few resources (the
same requests on both paths: no heartbeat, the holds are short); every
acquisition is recorded (owner, resource, fence, ticket, when it entered and left), so a caller
can check the history: one holder at a time, fences increasing, tickets served in order."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from local.dynamodb_local import CREDENTIALS
from turnstile_ddb import aio, lease, lease_queue, retry

ACQUISITIONS = 1_000
WORKERS = 20
RESOURCES = 10
HOLD_S = 0.002  # how long each holder keeps the lease
WAIT_MS = 120_000
SETTINGS = lease_queue.QueueSettings(heartbeat_ms=1_000, expiry_ms=5_000)  # a loaded machine


@dataclass
class Run:
    """One path's acquisitions: its calls by operation, and each acquisition as recorded."""

    calls: Counter[str] = field(default_factory=Counter)
    entries: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, model: Any, **_: Any) -> None:
        with self.lock:
            self.calls[model.name] += 1

    def record(self, held: lease.Lease, entered: float, waited: float) -> None:
        with self.lock:
            self.entries.append(
                {
                    "resource": held.resource,
                    "owner": held.owner,
                    "fence": held.fence,
                    "ticket": held.ticket,
                    "entered": entered,
                    "left": time.monotonic(),
                    "latency_ms": waited * 1000,
                }
            )


def create_table(client: Any, table: str) -> None:
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "resource", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "resource", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def plan(acquisitions: int, workers: int, resources: int) -> list[list[str]]:
    """Each worker's resources, in order: acquisitions dealt round-robin."""
    names = [f"r{index}" for index in range(resources)]
    return [
        [names[number % resources] for number in range(index, acquisitions, workers)]
        for index in range(workers)
    ]


def run_sync(client: Any, table: str, plan_: list[list[str]], prefix: str = "sync") -> Run:
    """The plan through ``lease_queue.LeaseQueue``, one thread per worker, one boto3 client."""
    run = Run()
    client.meta.events.register("before-call.dynamodb", run.count)
    leases = lease.Leases(client, table, backoff=retry.Backoff(attempts=8))
    queue = lease_queue.LeaseQueue(leases, SETTINGS)

    def worker(index: int, resources: list[str]) -> None:
        for number, resource in enumerate(resources):
            asked = time.monotonic()
            held = queue.acquire(resource, f"{prefix}{index}.{number}", wait_ms=WAIT_MS)
            entered = time.monotonic()
            time.sleep(HOLD_S)
            run.record(held, entered, entered - asked)
            leases.release(held)

    threads = [threading.Thread(target=worker, args=item) for item in enumerate(plan_)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.meta.events.unregister("before-call.dynamodb", run.count)
    return run


@contextlib.asynccontextmanager
async def async_client(endpoint: str) -> AsyncIterator[Any]:
    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    async with get_session().create_client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=retry.client_config(max_pool_connections=WORKERS),
    ) as client:
        yield client


async def run_async(
    endpoint: str, table: str, plan_: list[list[str]], prefix: str = "async", run: Run | None = None
) -> Run:
    """The plan through ``aio.lease_queue.LeaseQueue``: one task per worker on this loop, one
    aiobotocore client (``run``: record into it, as several loops in threads share one)."""
    run = run or Run()
    async with async_client(endpoint) as client:
        client.meta.events.register("before-call.dynamodb", run.count)
        leases = aio.lease.Leases(client, table, backoff=retry.Backoff(attempts=8))
        queue = aio.lease_queue.LeaseQueue(leases, SETTINGS)

        async def worker(index: int, resources: list[str]) -> None:
            for number, resource in enumerate(resources):
                asked = time.monotonic()
                owner = f"{prefix}{index}.{number}"
                held = await queue.acquire(resource, owner, wait_ms=WAIT_MS)
                entered = time.monotonic()
                await asyncio.sleep(HOLD_S)
                run.record(held, entered, entered - asked)
                await leases.release(held)

        await asyncio.gather(*(worker(index, items) for index, items in enumerate(plan_)))
    return run


def row(path: str, run: Run, wall_s: float) -> dict[str, Any]:
    acquisitions = len(run.entries)
    calls = sum(run.calls.values()) - acquisitions  # less each acquisition's one release
    latencies = sorted(entry["latency_ms"] for entry in run.entries)
    return {
        "path": path,
        "acquisitions": acquisitions,
        "calls": calls,
        "calls_per_acquisition": round(calls / max(1, acquisitions), 3),
        "calls_by_operation": dict(run.calls),
        "p50_ms": round(statistics.median(latencies), 2) if latencies else None,
        "wall_s": round(wall_s, 2),
    }


def measure(
    client: Any,
    endpoint: str,
    *,
    acquisitions: int = ACQUISITIONS,
    workers: int = WORKERS,
    resources: int = RESOURCES,
    prefix: str = "bench-async-leases",
) -> dict[str, Any]:
    """Both paths, each on a fresh table: the rows, the ratio, and the machine's load."""
    load_before = os.getloadavg()
    rows = []
    for path in ("sync", "async"):
        table = f"{prefix}-{path}"
        create_table(client, table)
        started = time.monotonic()
        deal = plan(acquisitions, workers, resources)
        if path == "sync":
            run = run_sync(client, table, deal)
        else:
            run = asyncio.run(run_async(endpoint, table, deal))
        rows.append(row(path, run, time.monotonic() - started))
    sync_row, async_row = rows
    return {
        "acquisitions": acquisitions,
        "workers": workers,
        "resources": resources,
        "rows": rows,
        "async_over_sync_calls": round(
            async_row["calls_per_acquisition"] / sync_row["calls_per_acquisition"], 3
        ),
        "target": "async calls per acquisition <= sync",
        "load_before": [round(value, 2) for value in load_before],
        "load_after": [round(value, 2) for value in os.getloadavg()],
    }
