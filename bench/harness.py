"""What every benchmark shares: a metered client, a thread-pool workload runner, and reporting.

Speed here is client-bound (DynamoDB Local on two cores serializes everything), so absolute
times say little. Every figure is reported next to a raw-write ceiling measured in the same run,
as a ratio: ``wall / ceiling``. Cost is reported as DynamoDB calls per request and as consumed
write capacity per unit of useful work.

Consumed capacity: writes ask for ``ReturnConsumedCapacity=TOTAL``. A write refused by its
condition is charged on AWS too (1 WCU per KB) but its error carries no figure, so the meter adds
1 WCU per ``ConditionalCheckFailedException``. A transaction does two underlying writes per item,
one to prepare and one to commit (AWS, "Capacity management for transactions", see the README); a
cancelled one stops after the prepare, so the meter adds 1 WCU for EVERY item of a cancelled
transaction, not only for the items whose condition failed.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

WRITE_OPERATIONS = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"}


@dataclass
class Meter:
    """Counts DynamoDB calls and consumed write capacity on one client (thread-safe)."""

    calls: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)  # ConditionalCheckFailed per operation
    wcu: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> Any:
        events = client.meta.events
        events.register("provide-client-params.dynamodb", self._ask_for_capacity)
        events.register("before-call.dynamodb", self._count)
        events.register("after-call.dynamodb", self._charge)
        return client

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.refused.clear()
            self.wcu = 0.0

    def _ask_for_capacity(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in WRITE_OPERATIONS:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[model.name] += 1

    def _charge(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name not in WRITE_OPERATIONS:
            return
        units = write_units(parsed)
        code = (parsed.get("Error") or {}).get("Code")
        with self._lock:
            self.wcu += units
            if code == "ConditionalCheckFailedException":
                self.refused[model.name] += 1

    def snapshot(self) -> Meter:
        """A copy of the counts so far (the live meter keeps counting for the next workload)."""
        with self._lock:
            return Meter(calls=self.calls.copy(), refused=self.refused.copy(), wcu=self.wcu)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


def write_units(parsed: dict[str, Any]) -> float:
    """The write units one write's answer says it consumed, with what a refused one costs
    (1 per refused condition, 1 per item of a cancelled transaction: see the module docstring)."""
    consumed = parsed.get("ConsumedCapacity")
    units = 0.0
    if isinstance(consumed, dict):
        units = float(consumed.get("CapacityUnits", 0))
    elif isinstance(consumed, list):
        units = sum(float(c.get("CapacityUnits", 0)) for c in consumed)
    code = (parsed.get("Error") or {}).get("Code")
    if code == "ConditionalCheckFailedException":
        units += 1.0
    elif code == "TransactionCanceledException":
        units += float(len(parsed.get("CancellationReasons", [])))
    return units


@dataclass
class Outcome:
    wall: float
    latencies: list[float]
    outcomes: Counter[str]


def run_workload(attempts: int, workers: int, attempt: Callable[[int], str]) -> Outcome:
    """``attempts`` calls of ``attempt(i)`` spread over ``workers`` threads that start together;
    ``attempt`` returns an outcome label ("ok", "OUT_OF_STOCK", "error:...")."""
    barrier = threading.Barrier(workers + 1)
    per_worker = [range(w, attempts, workers) for w in range(workers)]

    def worker(indexes: range) -> list[tuple[float, str]]:
        barrier.wait()
        results = []
        for index in indexes:
            started = time.perf_counter()
            try:
                label = attempt(index)
            except Exception as exc:  # noqa: BLE001 - a benchmark counts errors, it does not stop
                label = f"error:{type(exc).__name__}"
            results.append((time.perf_counter() - started, label))
        return results

    with ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(worker, indexes) for indexes in per_worker]
        barrier.wait()
        started = time.perf_counter()
        results = [r for future in futures for r in future.result()]
        wall = time.perf_counter() - started
    return Outcome(
        wall=wall,
        latencies=[latency for latency, _ in results],
        outcomes=Counter(label for _, label in results),
    )


def measure(
    meter: Meter, attempts: int, workers: int, attempt: Callable[[int], str]
) -> tuple[Outcome, Meter]:
    """:func:`run_workload` with the meter counting only this workload."""
    meter.reset()
    outcome = run_workload(attempts, workers, attempt)
    return outcome, meter.snapshot()


def raw_ceiling(client: Any, table: str, key: str, writes: int, workers: int) -> float:
    """Wall time of ``writes`` unconditional puts to distinct items from ``workers`` threads: the
    fastest anything can write here, for sections that have no natural "raw" strategy."""
    run = uuid.uuid4().hex[:8]

    def attempt(index: int) -> str:
        client.put_item(TableName=table, Item={key: {"S": f"ceiling/{run}/{index}"}})
        return "ok"

    return run_workload(writes, workers, attempt).wall


def tally_delta(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> dict[tuple[str, str], float]:
    """What ``turnstile_ddb.metrics.tally`` counted between two snapshots."""
    return {key: value - before.get(key, 0.0) for key, value in after.items()}


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def row(
    name: str,
    outcome: Outcome,
    meter: Meter,
    *,
    ceiling: float,
    useful: int,
    requests: int,
) -> dict[str, Any]:
    """One table row: ``useful`` is what the WCU are divided by (units sold, seats given...)."""
    errors = sum(n for label, n in outcome.outcomes.items() if label.startswith("error"))
    return {
        "strategy": name,
        "wall_s": round(outcome.wall, 3),
        "wall_over_ceiling": round(outcome.wall / ceiling, 2) if ceiling else None,
        "p50_ms": round(percentile(outcome.latencies, 0.50) * 1000, 1),
        "p99_ms": round(percentile(outcome.latencies, 0.99) * 1000, 1),
        "calls_per_request": round(meter.total_calls / requests, 2),
        "wcu_per_unit": round(meter.wcu / useful, 2) if useful else None,
        "errors": errors,
        "outcomes": dict(outcome.outcomes),
    }


def markdown(rows: list[dict[str, Any]], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Of repeated runs of one strategy, the one with the median wall time."""
    walls = [r["wall_s"] for r in rows]
    target = statistics.median_low(walls)
    return next(r for r in rows if r["wall_s"] == target)
