"""Seed 002's workload on item-level claims: ``attempts`` reservations of ``quantity`` units from
``workers`` threads on ``units`` units of one sku, against DynamoDB Local.

    python -m bench.inventory            # quantity 1 and 3, its own DynamoDB Local

Counts every DynamoDB call (a botocore ``before-call`` hook) and the write capacity it consumed
(``ReturnConsumedCapacity=INDEXES`` added to every write by a ``before-parameter-build`` hook, read
back in an ``after-call`` hook). A conditional write that fails returns no capacity, yet DynamoDB
bills it one WCU: those are counted as 1.0 each (``failed_writes``).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from service import config
from service.domain.errors import OutOfStock
from service.domain.inventory import Inventory

_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")


class Meter:
    """DynamoDB calls and consumed write capacity of one client, thread-safe."""

    def __init__(self, client: Any) -> None:
        self.calls = 0
        self.wcu = 0.0
        self.failed_writes = 0
        self._lock = threading.Lock()
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._ask_capacity)
        events.register("before-call.dynamodb", self._count)
        events.register("after-call.dynamodb", self._capacity)

    def reset(self) -> None:
        with self._lock:
            self.calls, self.wcu, self.failed_writes = 0, 0.0, 0

    def _ask_capacity(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in _WRITES:
            params.setdefault("ReturnConsumedCapacity", "INDEXES")

    def _count(self, **_: Any) -> None:
        with self._lock:
            self.calls += 1

    def _capacity(self, parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
        if model.name not in _WRITES:
            return
        consumed = parsed.get("ConsumedCapacity") or []
        if isinstance(consumed, Mapping):
            consumed = [consumed]
        units = sum(float(entry.get("CapacityUnits", 0.0)) for entry in consumed)
        failed = "Error" in parsed and parsed["Error"].get("Code") in {
            "ConditionalCheckFailedException",
            "TransactionCanceledException",
        }
        with self._lock:
            self.wcu += units
            if failed and not consumed:
                self.failed_writes += 1
                self.wcu += 1.0


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_reservations(
    client: Any,
    tables: Mapping[str, str],
    *,
    attempts: int = 1000,
    workers: int = 100,
    units: int = 100,
    quantity: int = 1,
) -> dict[str, Any]:
    """One run on a fresh sku; the client gets the meter's hooks (give it a client of its own)."""
    meter = getattr(client, "_turnstile_meter", None)
    if meter is None:
        meter = Meter(client)
        client._turnstile_meter = meter
    service = Inventory(
        client=client,
        table=tables[config.INVENTORY],
        summary_table=tables[config.INVENTORY_SUMMARY],
    )
    sku = f"bench-{uuid.uuid4().hex[:10]}"
    service.create(sku, units)
    service.header(sku)  # cached, as in a warm Lambda
    meter.reset()
    latencies: list[float] = []
    outcomes = {"succeeded": 0, "out_of_stock": 0, "errors": 0}
    lock = threading.Lock()
    barrier = threading.Barrier(workers + 1)

    def worker(count: int) -> None:
        barrier.wait()
        for _ in range(count):
            started = time.perf_counter()
            try:
                service.reserve(sku, quantity, hold_seconds=600)
                outcome = "succeeded"
            except OutOfStock:
                outcome = "out_of_stock"
            except Exception:  # noqa: BLE001 - counted: a benchmark reports errors, it does not hide them
                outcome = "errors"
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                outcomes[outcome] += 1
                latencies.append(elapsed)

    shares = [attempts // workers + (1 if i < attempts % workers else 0) for i in range(workers)]
    threads = [threading.Thread(target=worker, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    sold_units = outcomes["succeeded"] * quantity
    return {
        "strategy": "item-level claims (SKIP LOCKED)",
        "quantity": quantity,
        "units": units,
        "attempts": attempts,
        "workers": workers,
        "wall_seconds": round(wall, 3),
        **outcomes,
        "dynamodb_calls": meter.calls,
        "calls_per_request": round(meter.calls / attempts, 2),
        "wcu": round(meter.wcu, 1),
        "failed_conditional_writes": meter.failed_writes,
        "wcu_per_unit_sold": round(meter.wcu / sold_units, 2) if sold_units else None,
        "p50_ms": round(statistics.median(latencies), 1) if latencies else 0.0,
        "p99_ms": round(_percentile(latencies, 0.99), 1),
    }


def main() -> int:
    from local import template
    from local.dynamodb_local import DynamoDBLocal
    from turnstile import retry

    loaded = template.load(
        template.TEMPLATE if template.TEMPLATE.exists() else template.synthesize()
    )
    with DynamoDBLocal() as db:
        client = db.client(config=retry.client_config())
        names = template.create_tables(client, loaded)
        environment = template.merged_environment(template.function_environments(loaded, names))
        tables = {
            key.removesuffix("_TABLE").lower(): value
            for key, value in environment.items()
            if key.endswith("_TABLE")
        }
        for quantity in (1, 3):
            print(json.dumps(run_reservations(client, tables, quantity=quantity)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
