"""Section ``hot``: one flash-sale item offered more than one partition key can take.

Every strategy runs under :mod:`local.capacity_model` (per-key WCU/RCU limits scaled by
``TURNSTILE_CAPACITY_SCALE``, default :data:`DEFAULT_SCALE` here) with the same open-loop offered
load: :data:`OFFERED_X` times what one key takes, paced for :data:`SECONDS` seconds. Stock is sized
per strategy so it sells out about :data:`SELL_OUT_AT` of the way through; then refusals follow.

Strategies: the single-item ``atomic`` purchase (the baseline), sharded stock with N = 4, 8, 16
(:mod:`turnstile_ddb.sharded`), and pooled reservations (:mod:`turnstile_ddb.claims`, one
reservation of
one unit per request) with the sku's units in 1, 8 and 16 pools (16: capacity twice the offered
rate), created to the end by the creation worker before the load starts
(:func:`local.creator.create_to_ready`); a reservation row that sells nothing raises
:class:`EmptyRun` instead of reporting zeros. ``capacity_over_offered`` and, for the pooled rows,
``sales_over_single_pool`` are the goals' ratios.
Figures per row: sales/s while selling, throttles the model answered
(``db_throttles``) and that reached clients as 503 (``client_503``), calls per request, WCU per unit
sold, the refusal cost after sell-out (calls and WCU per refused request, measured on 20 extra
requests), oversold units and 5xx. ``sales_per_second_series`` (1 s bins) feeds the plot.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.harness import Meter, tally_delta
from local.capacity_model import CapacityModel, scale_from_env
from local.creator import create_to_ready
from service import config
from service.domain.errors import DomainError
from service.domain.inventory import Inventory
from service.domain.products import Products
from turnstile_ddb import claims, metrics, retry

DEFAULT_SCALE = 0.01  # 10 WCU/s and 30 RCU/s per key: a shared 2-core machine can offer 6x that
OFFERED_X = 8.0
SECONDS = 24.0
SELL_OUT_AT = 0.6
WORKERS = 64
REFUSAL_PROBES = 20
SHARDS = (1, 4, 8, 16)  # 1: the single item
RESERVATION_POOLS = (1, 8, 16)  # 16: capacity twice the offered rate


def _offer(rate: float, seconds: float, attempt: Callable[[], tuple[str, int]]) -> list[tuple]:
    """Open-loop load: request i is due at ``i / rate``. Returns ``(end - t0, outcome, units
    sold)`` per request."""
    due = [index / rate for index in range(int(rate * seconds))]
    return [(at, outcome, units) for _, at, outcome, units in offer(due, lambda _: attempt())]


def offer(
    due: Sequence[float],
    attempt: Callable[[int], tuple[str, int]],
    workers: int = WORKERS,
    t0: float | None = None,
) -> list[tuple[int, float, str, int]]:
    """Open-loop load on a schedule: request i is sent at ``t0 + due[i]`` (``due`` ascending;
    ``t0`` a ``time.monotonic()``, 0.2 s from now unless given) by one of ``workers`` threads
    (late when all are busy). ``attempt(i)`` returns ``(outcome, units)``; a retry budget spent
    is ``"503"``, anything else raised ``"500:<type>"`` (a 5xx the client would see). Returns
    ``(i, end - t0, outcome, units)`` per request."""
    lock = threading.Lock()
    state = {"next": 0}
    results: list[tuple[int, float, str, int]] = []
    start = time.monotonic() + 0.2 if t0 is None else t0

    def worker() -> None:
        while True:
            with lock:
                index = state["next"]
                state["next"] += 1
            if index >= len(due):
                return
            delay = start + due[index] - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                outcome, units = attempt(index)
            except (retry.RetriesExhausted, retry.OutcomeUnknown):
                outcome, units = "503", 0
            except Exception as exc:  # noqa: BLE001 - counted as a 5xx the client would see
                outcome, units = f"500:{type(exc).__name__}", 0
            with lock:
                results.append((index, time.monotonic() - start, outcome, units))

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _row(
    name: str,
    shards: int,
    stock: int,
    results: list[tuple],
    meter: Meter,
    model: CapacityModel,
    throttled_before: int,
    remaining: int,
    refusal: dict[str, float],
) -> dict[str, Any]:
    sold = sum(units for _, outcome, units in results if outcome == "ok")
    sale_times = [at for at, outcome, _ in results if outcome == "ok"]
    window = max(sale_times) if sale_times else SECONDS
    series = [0] * (int(max((at for at, _, _ in results), default=0)) + 1)
    for at, outcome, units in results:
        if outcome == "ok":
            series[int(at)] += units
    outcomes: dict[str, int] = {}
    for _, outcome, _ in results:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return {
        "strategy": name,
        "shards": shards,
        "stock": stock,
        "requests": len(results),
        "sold": sold,
        "sales_per_second": round(sold / window, 1) if window else None,
        "oversold": max(0, sold - stock) + max(0, -remaining),
        "left_unsold": remaining,
        "client_5xx": sum(n for o, n in outcomes.items() if o.startswith(("5",))),
        "client_503": outcomes.get("503", 0),
        "db_throttles": model.stats.throttled - throttled_before,
        "calls_per_request": round(meter.total_calls / max(1, len(results)), 2),
        "wcu_per_unit_sold": round(meter.wcu / sold, 2) if sold else None,
        "refusal_calls": refusal["calls"],
        "refusal_wcu": refusal["wcu"],
        "outcomes": outcomes,
        "sales_per_second_series": series,
    }


def _probe_refusals(meter: Meter, attempt: Callable[[], tuple[str, int]]) -> dict[str, float]:
    meter.reset()
    refused = 0
    for _ in range(REFUSAL_PROBES):
        try:
            refused += attempt()[0] != "ok"
        except (retry.RetriesExhausted, retry.OutcomeUnknown):
            refused += 1
    snapshot = meter.snapshot()
    return {
        "calls": round(snapshot.total_calls / REFUSAL_PROBES, 2),
        "wcu": round(snapshot.wcu / REFUSAL_PROBES, 2),
    }


def run(
    db: Any,
    names: dict[str, str],
    results_dir: Path,
    shard_counts: tuple[int, ...] = SHARDS,
    pool_counts: tuple[int, ...] = RESERVATION_POOLS,
) -> list[dict[str, Any]]:
    """Every row (``shard_counts`` and ``pool_counts`` choose fewer, to iterate quickly)."""
    scale = scale_from_env() or DEFAULT_SCALE
    model = CapacityModel(scale)
    meter = Meter()
    client = model.attach(meter.attach(db.client(config=retry.client_config(read_timeout=30))))
    key_rate = model.wcu  # one-unit purchases: 1 WCU each
    offered = OFFERED_X * key_rate
    products = Products(client=client, table=names[config.PRODUCTS])
    rows = []
    for shards in shard_counts:
        product_id = f"hot-{shards}-{uuid.uuid4().hex[:6]}"
        expected_rate = min(offered, shards * key_rate)
        stock = int(expected_rate * SECONDS * SELL_OUT_AT)
        products.create(product_id, "Flash sale", stock, shards=shards)

        def attempt(product_id: str = product_id) -> tuple[str, int]:
            try:
                products.purchase(product_id, 1)
                return "ok", 1
            except DomainError as exc:
                return exc.code, 0

        time.sleep(1.5)  # let the creation's tokens come back
        meter.reset()
        before = model.stats.throttled
        results = _offer(offered, SECONDS, attempt)
        snapshot = meter.snapshot()
        remaining = products.get(product_id)["stock"]
        refusal = _probe_refusals(meter, attempt)
        label = "single item atomic" if shards == 1 else f"sharded N={shards}"
        rows.append(
            _row(label, shards, stock, results, snapshot, model, before, remaining, refusal)
        )
        print(f"  {label}: {rows[-1]['sales_per_second']} sales/s", flush=True)
    setup = db.client(config=retry.client_config(read_timeout=30))
    for pools in pool_counts:
        rows.append(_claims(client, setup, meter, model, names, offered, pools))
    _plot(rows, results_dir / "hot.png", key_rate, offered)
    single = next((r for r in rows if r.get("pools") == 1), None)
    for row in rows:
        row["key_limit_wcu_per_s"] = key_rate
        row["offered_per_s"] = offered
        row["sales_over_key_limit"] = round((row["sales_per_second"] or 0) / key_rate, 2)
        capacity = (row.get("pools") or row["shards"] or 1) * key_rate
        row["capacity_over_offered"] = round(capacity / offered, 2)
        if "pools" in row and single and single["sales_per_second"]:
            row["sales_over_single_pool"] = round(
                (row["sales_per_second"] or 0) / single["sales_per_second"], 2
            )
    return rows


class EmptyRun(AssertionError):
    """A row sold nothing although it had stock: it measured an empty table, not a strategy."""


def _claims(
    client: Any,
    setup: Any,
    meter: Meter,
    model: CapacityModel,
    names: dict[str, str],
    offered: float,
    pools: int,
) -> dict[str, Any]:
    """Pooled reservations (one unit per request) under the same load, the sku's units spread over
    ``pools`` pools. The units are created outside the model and to the end before the load
    starts, by the creation worker (:func:`local.creator.create_to_ready`; creating them is not
    what is measured); a row that then sells nothing raises."""

    def service(on: Any) -> Inventory:
        return Inventory(
            client=on,
            table=names[config.INVENTORY],
            summary_table=names[config.INVENTORY_SUMMARY],
            pool_hints=hints,  # one per environment, as the function's wiring builds it
        )

    hints = claims.PoolHints()
    inventory = service(client)
    sku = f"hot-{pools}-{uuid.uuid4().hex[:8]}"
    units = int(min(offered, pools * model.wcu) * SECONDS * SELL_OUT_AT)
    created = create_to_ready(service(setup), sku, units, pools=pools)
    exact = service(setup).exact(sku)
    if created["status"] != "READY" or exact["available"] != units:
        raise EmptyRun(f"{sku}: creation did not finish: {created}, {exact}")
    inventory.header(sku)

    def attempt() -> tuple[str, int]:
        try:
            inventory.reserve(sku, 1, hold_seconds=600)
            return "ok", 1
        except DomainError as exc:
            return exc.code, 0

    time.sleep(1.5)
    meter.reset()
    before = model.stats.throttled
    tally = metrics.tally.snapshot()
    results = _offer(offered, SECONDS, attempt)
    snapshot = meter.snapshot()
    counted = tally_delta(tally, metrics.tally.snapshot())
    after = service(setup).exact(sku)
    holders = _units_held_twice(service(setup), sku)
    refusal = _probe_refusals(meter, attempt)
    name = f"pooled reservations N={pools}"
    row = _row(name, 0, units, results, snapshot, model, before, after["available"], refusal)
    row["pools"] = pools
    row["units_held_twice"] = holders
    row["pool_failovers"] = int(counted.get(("claims", "PoolFailover"), 0))
    row["claims_lost"] = int(counted.get(("claims", "ClaimLost"), 0))
    row["oversold"] += max(0, after["reserved"] + after["sold"] - units)
    if row["sold"] == 0:
        raise EmptyRun(f"{name}: sold nothing of {units} units ({row['outcomes']})")
    print(f"  {name}: {row['sales_per_second']} sales/s", flush=True)
    return row


def _units_held_twice(inventory: Inventory, sku: str) -> int:
    """Units whose recorded holder does not list them (the table's own word on double holds):
    every held unit must be a member of its holder's lead unit."""
    units = {str(u["sk"]): u for u in inventory.units_of(sku)}
    twice = 0
    for unit in units.values():
        if unit.get("status") != "held":
            continue
        lead = units.get("unit#" + str(unit["holder"]).split("-")[0], {})
        members = {str(m["sk"]) for m in lead.get("members", [])}
        twice += lead.get("holder") != unit["holder"] or str(unit["sk"]) not in members
    return twice


def _plot(rows: list[dict[str, Any]], path: Path, key_rate: float, offered: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(9, 4.5))
    for row in rows:
        series = row["sales_per_second_series"]
        axis.plot(range(len(series)), series, label=row["strategy"], linewidth=1.5)
    axis.axhline(key_rate, color="grey", linestyle="--", linewidth=1, label="one key's WCU/s")
    axis.axhline(offered, color="black", linestyle=":", linewidth=1, label="offered requests/s")
    axis.set_xlabel("seconds since the sale opened")
    axis.set_ylabel("units sold per second")
    axis.set_title("turnstile bench: hot item under the capacity model")
    axis.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
