"""turnstile_ddb.aio.lease_queue against DynamoDB Local with aiobotocore: many tasks on one event
loop, and several loops in threads at once, queueing for one lease through ``async with
queue.hold(...)``; the recorded history shows them served in ticket order, one holder at a time,
fences increasing. And the async-leases bench (bench/async_leases.py) at a short size: its
rows have the fields the results file names (no time is asserted: they are measurements)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from typing import Any

import pytest

from bench import async_leases
from bench.__main__ import run_async_leases
from turnstile_ddb import aio

pytest.importorskip("aiobotocore.session")

TASKS = 12  # per loop
LOOPS = 3  # loops in threads, besides


async def queue_for_one_lease(endpoint: str, table: str, prefix: str, out: list[Any]) -> None:
    async with async_leases.async_client(endpoint) as client:
        leases = aio.lease.Leases(client, table)
        queue = aio.lease_queue.LeaseQueue(leases, async_leases.SETTINGS)

        async def work(index: int) -> None:
            async with queue.hold("r", f"{prefix}{index}", wait_ms=120_000) as beat:
                entered = time.monotonic()
                await asyncio.sleep(0.005)  # let the others run while this one holds
                out.append((beat.lease.fence, beat.lease.ticket, entered, time.monotonic()))

        await asyncio.gather(*(work(index) for index in range(TASKS)))


def check(history: list[tuple[int, int, float, float]], expected: int) -> None:
    by_fence = sorted(history)
    fences = [fence for fence, *_ in by_fence]
    tickets = [ticket for _, ticket, *_ in by_fence]
    # every holder served once, fences one apart, tickets served in the order they were taken
    assert len(history) == expected
    assert fences == list(range(fences[0], fences[0] + expected))
    assert tickets == sorted(tickets) and len(set(tickets)) == expected
    # one holder at a time: each entered after the one before it left
    for (_, _, _, left), (_, _, entered, _) in itertools.pairwise(by_fence):
        assert entered >= left


def test_tasks_on_one_loop_are_served_in_order_one_at_a_time(ddb, dynamodb_local, unique):
    # Given a lease table and twelve tasks on one loop queueing for one lease
    table = f"aio-queue-{unique}"
    async_leases.create_table(ddb, table)
    history: list[Any] = []
    # When they all hold it in turn
    asyncio.run(queue_for_one_lease(dynamodb_local.endpoint, table, "task", history))
    # Then the history shows them served in ticket order, one at a time, fences increasing
    check(history, TASKS)


def test_loops_in_threads_are_served_in_order_one_at_a_time(ddb, dynamodb_local, unique):
    # Given three threads, each with its own loop of twelve tasks, queueing for one lease
    table = f"aio-queue-loops-{unique}"
    async_leases.create_table(ddb, table)
    history: list[Any] = []
    lock = threading.Lock()

    class Locked(list[Any]):
        def append(self, item: Any) -> None:
            with lock:
                history.append(item)

    threads = [
        threading.Thread(
            target=asyncio.run,
            args=(queue_for_one_lease(dynamodb_local.endpoint, table, f"loop{n}.", Locked()),),
        )
        for n in range(LOOPS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)  # a bound for a hung test, not a speed claim
    # Then every task of every loop was served, in ticket order, one at a time
    assert not any(thread.is_alive() for thread in threads)
    check(history, TASKS * LOOPS)


def test_a_short_async_leases_bench_has_its_rows(ddb, dynamodb_local, unique, tmp_path):
    # When the section runs small (24 acquisitions, 6 workers, 2 resources)
    out = tmp_path / "async_leases.json"
    sizes = {"acquisitions": 24, "workers": 6, "resources": 2}
    run_async_leases(ddb, dynamodb_local.endpoint, out, prefix=f"bench-{unique}", **sizes)
    document = json.loads(out.read_text())
    # Then both paths have a row with every acquisition and its calls, and the ratio and load
    assert [row["path"] for row in document["rows"]] == ["sync", "async"]
    for row in document["rows"]:
        assert row["acquisitions"] == 24 and row["calls"] >= 24
        assert row["calls_per_acquisition"] == round(row["calls"] / 24, 3)
        assert {"p50_ms", "wall_s", "calls_by_operation"} <= set(row)
    assert document["async_over_sync_calls"] > 0
    assert len(document["load_before"]) == 3 and len(document["load_after"]) == 3
