"""``make bench``: every workload against one DynamoDB Local, tables from the synthesized template.

    python -m bench [--repeat N] [--only products,...]

Prints markdown tables, and writes ``bench/results/<section>.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

from bench import (  # noqa: E402
    adaptive,
    async_leases,
    async_reservation,
    coldstart,
    cost,
    hot,
    http_auth,
    http_inventory,
    inventory,
    leases,
    memory,
    products,
    signup,
)
from bench.harness import Meter, markdown, median_row, raw_ceiling, tally_delta  # noqa: E402
from local import template  # noqa: E402
from local.dynamodb_local import DynamoDBLocal  # noqa: E402
from turnstile_ddb import metrics, retry  # noqa: E402

RESULTS = ROOT / "bench" / "results"
WARM_UP_WRITES = 3000
COLUMNS = [
    "strategy",
    "wall_s",
    "wall_over_ceiling",
    "p50_ms",
    "p99_ms",
    "calls_per_request",
    "wcu_per_unit",
    "errors",
    "outcomes",
]


def chart(section: str, rows: list[dict[str, Any]]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["strategy"] for r in rows]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(names, [r["wall_over_ceiling"] or 0 for r in rows], color="#4C72B0")
    left.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    left.set_title("wall time / raw-write ceiling")
    right.bar(names, [r["calls_per_request"] for r in rows], color="#DD8452")
    right.set_title("DynamoDB calls per request")
    for axis in (left, right):
        axis.tick_params(axis="x", rotation=20)
    figure.suptitle(f"turnstile bench: {section}")
    figure.tight_layout()
    path = RESULTS / f"{section}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def report(
    section: str, rows: list[dict[str, Any]], note: str, columns: list[str] | None = None
) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{section}.json").write_text(json.dumps(rows, indent=2))
    image = chart(section, rows)
    print(f"\n## {section}\n{note}\n")
    print(markdown(rows, columns or COLUMNS))
    print(f"\n(written: {RESULTS / f'{section}.json'}, {image})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per strategy; median shown")
    parser.add_argument("--only", default="", help="comma-separated sections")
    parser.add_argument(
        "--cold-repeat", type=int, default=coldstart.REPEATS, help="cold starts per function"
    )
    parser.add_argument(
        "--quick", action="store_true", help="short steps (the adaptive section's ramp)"
    )
    parser.add_argument(
        "--record-memory",
        action="store_true",
        help=f"write the memory section's choice to {memory.CHOICE.relative_to(ROOT)}",
    )
    args = parser.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    # The stream consumers' EMF lines would bury the tables; the bench reads ``metrics.tally``.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

    loaded = template.load()
    with DynamoDBLocal() as db:
        template.create_tables(db.client(), loaded)
        names = template.table_names(loaded)
        meter = Meter()
        client = meter.attach(db.client(config=retry.client_config()))
        # DynamoDB Local runs on a JVM that is slow until warmed: whatever ran first would look
        # worse than the rest, so warm it with unmeasured writes before any section.
        raw_ceiling(client, names["products"], "productId", WARM_UP_WRITES, 50)
        if not only or "products" in only:
            runs = [products.run(client, names["products"], meter) for _ in range(args.repeat)]
            rows = [median_row([run[i] for run in runs]) for i in range(len(runs[0]))]
            report(
                "products",
                rows,
                f"Flash-sale workload: {products.ATTEMPTS} attempts, {products.WORKERS} threads, "
                f"stock {products.STOCK}, one item. Ceiling = raw unconditional decrement.",
            )
            report_metrics(rows)
        if not only or "inventory" in only:
            run_inventory(client, meter, names, args.repeat)
        if not only or only & {"inventory", "creation"}:  # ``creation``: this row alone
            creation = inventory.creation_row(
                client, db.streams_client(), names, environment=db.environment()
            )
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / "inventory_creation.json").write_text(json.dumps(creation, indent=2))
            print("\n## inventory creation\n")
            print(markdown([creation], list(creation)))
        if not only or "signup" in only:
            run_signup(client, db, meter, names)
        if not only or "leases" in only:
            run_leases(client, names["leases"])
        if not only or "async-leases" in only:
            run_async_leases(db.client(config=retry.client_config()), db.endpoint)
        if not only or "http" in only:
            run_http(db, loaded, client, meter, names)
        if not only or "http_inventory" in only:
            run_http_inventory(args.repeat)
        if not only or "hot" in only:
            run_hot(db, names)
        if not only or "coldstart" in only:
            run_coldstart(db, loaded, names, args.cold_repeat)
        if not only or "memory" in only:
            run_memory(db, loaded, args.record_memory)
        if not only or "cost" in only:
            run_cost(db, loaded)
        if not only or "async-reservation" in only:
            run_async_reservation(db)
        if not only or "adaptive" in only:
            run_adaptive(db, names, quick=args.quick)
    return 0


ADAPTIVE_COLUMNS = ["offered", "achieved", "direction", "shards", "grown", "throttles", "5xx"]


def run_adaptive(
    db: DynamoDBLocal, names: Mapping[str, str], *, quick: bool = False, out: Path | None = None
) -> dict[str, Any]:
    """The ramp on an adaptive product and an adaptive event (``bench.adaptive``)."""
    pace = adaptive.QUICK if quick else adaptive.FULL
    seconds = (len(adaptive.RAMP) * pace.step_seconds + pace.tail_seconds) * 2
    print(f"\n## adaptive (two ramps, about {seconds / 60:.0f} minutes)", flush=True)
    document = adaptive.run(db, names, pace)
    path = out or RESULTS / "adaptive.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    for run in document["runs"]:
        print(
            f"\n### {run['name']}: one key {run['one_key_limit']:g} requests/s, "
            f"{run['resizes']} resizes ({sum(run['resize_wcu']):g} WCU), "
            f"final shards {run['final_shards']}, oversold {run['oversold']}\n"
        )
        print(markdown(run["steps"], ADAPTIVE_COLUMNS))
        print(f"\ntotals: {run['totals']}; WCU per resize: {run['resize_wcu']}")
    print(f"\nload average after: {document['load_average']}; written: {path}")
    return document


def run_async_reservation(db: DynamoDBLocal) -> None:
    """The sync and asyncio reservations side by side (``bench.async_reservation``)."""
    print("\n## async-reservation (3 units over 8 pools, sync and async alternating)", flush=True)
    result = async_reservation.run(db.client(config=retry.client_config()), db.endpoint)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "async_reservation.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{async_reservation.summary(result, markdown)}")
    print(f"\n(written: {RESULTS / 'async_reservation.json'})")


def run_async_leases(
    client: Any,
    endpoint: str,
    out: Path | None = None,
    *,
    prefix: str = "bench-async-leases",
    acquisitions: int = async_leases.ACQUISITIONS,
    workers: int = async_leases.WORKERS,
    resources: int = async_leases.RESOURCES,
) -> None:
    """Lease acquisitions through the queue, async on one loop against sync: calls each."""
    print(
        "\n## async-leases (the queue from one process: one event loop, then threads)", flush=True
    )
    sizes = {"acquisitions": acquisitions, "workers": workers, "resources": resources}
    document = async_leases.measure(client, endpoint, prefix=prefix, **sizes)
    out = out or RESULTS / "async_leases.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2))
    columns = ["path", "acquisitions", "calls", "calls_per_acquisition", "p50_ms", "wall_s"]
    print(markdown(document["rows"], columns))
    print(f"\nasync/sync calls per acquisition: {document['async_over_sync_calls']} (target <= 1)")
    print(f"load before {document['load_before']}, after {document['load_after']}; written: {out}")


def run_memory(db: DynamoDBLocal, loaded: dict[str, Any], record: bool) -> None:
    print(f"\n## memory ({memory.REQUESTS} warm requests per API function)", flush=True)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    functions = memory.run(db, loaded)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "memory.json").write_text(json.dumps(functions, indent=2))
    rows = [
        {"function": name, **{k: v for k, v in found.items() if k != "settings"}}
        for name, found in functions.items()
    ]
    print(markdown(rows, list(rows[0])))
    for name, found in functions.items():
        print(f"\n{name}:")
        print(markdown(found["settings"], list(found["settings"][0])))
    if record:
        memory.record(functions, f"load average {load} before the run")
        print(f"\n(recorded: {memory.CHOICE})")
    print(f"\n(written: {RESULTS / 'memory.json'})")


def run_cost(
    db: DynamoDBLocal, loaded: dict[str, Any], out: Path | None = None, **sizes: Any
) -> dict[str, Any]:
    """Every route's units, calls and CPU per request against its floors (``bench.cost``)."""
    from local.run import exported

    print("\n## cost (every route, low contention and the seed workload)", flush=True)
    physical = {logical: logical for logical in template.resources(loaded, "AWS::DynamoDB::Table")}
    environment = {
        **db.environment(),
        **template.merged_environment(template.function_environments(loaded, physical)),
        "POWERTOOLS_METRICS_DISABLED": "false",  # EMF written as in Lambda (to a null stream)
    }
    load = os.getloadavg()
    with exported(environment):
        rows = cost.run(bare=db.client(config=retry.client_config()), **sizes)
    document = cost.document(rows, load)
    path = out or RESULTS / "cost.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\n{document['measured']}\n")
    print(markdown(rows, cost.COLUMNS))
    print(f"\n(written: {path})")
    return document


COLD_TARGET = 1.3  # import + first request of an API function, over the baseline


def run_coldstart(
    db: DynamoDBLocal, loaded: dict[str, Any], names: dict[str, str], repeats: int
) -> None:
    print(f"\n## coldstart ({repeats} cold starts per function and as many baselines)", flush=True)
    rows, tops = coldstart.run(db, loaded, names, repeats)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "coldstart.json").write_text(json.dumps(rows, indent=2))
    (RESULTS / "coldstart_importtime.json").write_text(json.dumps(tops, indent=2))
    table = markdown(rows, coldstart.COLUMNS)
    image = coldstart.chart(rows, RESULTS / "coldstart.png", COLD_TARGET)
    note = (
        "Each function from its as-deployed tree (cdk.out asset + layer), fresh `python -I -S -B`, "
        f"median of {repeats}; baseline = `import boto3` + one DynamoDB client in the same tree, "
        "run alternately before/after each start; ratios pair by pair. First request: API = "
        "unauthenticated (401), products also an authenticated GET and a purchase (DynamoDB "
        "Local); streams = one skipped record (a TTL REMOVE)."
    )
    (RESULTS / "coldstart.md").write_text(f"{note}\n\n{table}\n")
    print(f"\n{note}\n\n{table}")
    for name, top in tops.items():
        shown = ", ".join(f"{e['module']} {e['cumulative_us'] / 1000:.0f}" for e in top)
        print(f"- importtime {name} (cumulative ms): {shown}")
    print(f"\n(written: {RESULTS / 'coldstart.json'}, {RESULTS / 'coldstart.md'}, {image})")


HOT_COLUMNS = [
    "strategy",
    "shards",
    "pools",
    "capacity_over_offered",
    "sales_per_second",
    "sales_over_key_limit",
    "sales_over_single_pool",
    "db_throttles",
    "client_503",
    "calls_per_request",
    "wcu_per_unit_sold",
    "refusal_calls",
    "refusal_wcu",
    "oversold",
    "units_held_twice",
    "client_5xx",
]


def run_hot(db: DynamoDBLocal, names: dict[str, str]) -> None:
    print("\n## hot (a few minutes: seven strategies, each offered load for 24 s)", flush=True)
    rows = hot.run(db, names, RESULTS)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hot.json").write_text(json.dumps(rows, indent=2))
    first = rows[0]
    print(
        f"\nCapacity model on: {first['key_limit_wcu_per_s']:g} WCU/s per key, offered "
        f"{first['offered_per_s']:g} purchases/s of one unit for {hot.SECONDS:g} s; stock sized to "
        "sell out about 60 % of the way. Refusal cost = per refused request after sell-out.\n"
    )
    print(markdown(rows, HOT_COLUMNS))
    print(f"\n(written: {RESULTS / 'hot.json'}, {RESULTS / 'hot.png'})")


def report_metrics(rows: list[dict[str, Any]]) -> None:
    """turnstile's metrics (``turnstile_ddb.metrics.tally``) next to the bench's own meter: a
    refused
    version-checked write is one ``VersionConflict``; every UpdateItem sent is a conflict, a write
    that landed or (for ``atomic``) an out-of-stock refusal."""
    checked = [
        {"strategy": r["strategy"], **r["metrics_vs_meter"]}
        for r in rows
        if "metrics_vs_meter" in r
    ]
    print("\n### products: metrics vs the bench's meter\n")
    print(markdown(checked, list(checked[0]) if checked else ["strategy"]))


def run_signup(client: Any, db: DynamoDBLocal, meter: Meter, names: dict[str, str]) -> None:
    from service.handlers import registration_consumer

    registration_consumer.logger.setLevel("WARNING")  # a line per decision drowns the tables
    streams = db.streams_client()
    ceiling = raw_ceiling(client, names["products"], "productId", 1000, 100)
    rows = [
        {"strategy": "raw writes (ceiling)", "wall_s": round(ceiling, 3), "wall_over_ceiling": 1.0},
        signup.sync_row(client, meter, names, ceiling=ceiling),
        signup.async_row(client, streams, meter, names, ceiling=ceiling),
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "signup.json").write_text(json.dumps(rows, indent=2))
    print(
        "\n## signup\nCapped signup: 1000 distinct users, 100 threads, capacity 100. Sync: one "
        "TransactWriteItems per attempt. Async: 202 + a PENDING item, decided in stream order by "
        "the consumer through the local pump; wall runs to the last decision. WCU per unit = per "
        "accepted registration.\n"
    )
    print(markdown(rows, [*COLUMNS, "last_request_to_last_decision_s", "decisions_per_s"]))


def run_http(
    db: DynamoDBLocal, loaded: dict[str, Any], client: Any, meter: Meter, names: dict[str, str]
) -> None:
    print("\n## http (about two minutes: 100 users, 3 x 3 rounds of 1000 purchases)", flush=True)
    rows = http_auth.run(db, loaded, client, meter, names)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "http.json").write_text(json.dumps(rows, indent=2))
    print(
        f"\nFlash-sale workload over HTTP through the local bridge: {http_auth.ATTEMPTS} purchase "
        f"attempts from {http_auth.WORKERS} users (a thread, a keep-alive connection and an ID "
        f"token each), stock {http_auth.STOCK}; the three bridges alternate for {http_auth.ROUNDS} "
        "rounds, median shown. Ceiling = raw unconditional puts from as many threads, no HTTP. "
        "over_injected: wall of the row / wall with claims injected (no verification).\n"
    )
    columns = ["strategy", "wall_s", "wall_over_ceiling", "requests_per_s", "p50_ms", "p99_ms"]
    columns += ["calls_per_request", "errors", "outcomes", "rounds_wall_s"]
    print(markdown(rows, [*columns, "over_injected"]))


HTTP_INVENTORY_TARGETS = {1: 1.25, 3: 1.4}  # reservations' wall over the one-unit purchases'


INVENTORY_ROUNDS = 3


def run_inventory(client: Any, meter: Meter, names: dict[str, str], repeat: int) -> None:
    """Counters against item-level claims, q=1 and q=3, in ``max(3, repeat)`` rounds. Each round
    measures its own raw ceiling right before its rows, so every ratio is taken within a round;
    each strategy's row is its round of median ``wall_over_ceiling`` (a single run of the
    claims varied from 1.5x to 2.4x the ceiling on a quiet machine), with every round's ratio
    beside it."""
    rounds = max(INVENTORY_ROUNDS, repeat)
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(rounds):
        for quantity in (1, 3):
            counter = products.run(
                client,
                names["products"],
                meter,
                quantity=quantity,
                strategies=("raw", "atomic", "versioned"),
            )
            ceiling = counter[0]["wall_s"]
            for r in counter[1:]:
                r["strategy"] = f"counter {r['strategy']} q={quantity}"
            claims = inventory.claims_row(client, meter, names, ceiling=ceiling, quantity=quantity)
            for r in [*(counter if quantity == 1 else counter[1:]), claims]:
                runs.setdefault(r["strategy"], []).append(r)
    rows = []
    for strategy_rows in runs.values():
        ratios = [r["wall_over_ceiling"] for r in strategy_rows]
        middle = statistics.median_low(ratios)
        row = next(r for r in strategy_rows if r["wall_over_ceiling"] == middle)
        rows.append({**row, "rounds_wall_over_ceiling": ratios})
    report(
        "inventory",
        rows,
        "Flash-sale workload, 1000 attempts, 100 threads, 100 units: one conditional counter "
        "vs one item per unit claimed SKIP LOCKED style, quantity 1 and 3. "
        f"{rounds} rounds, each with its own raw-write ceiling; the round of median "
        "wall_over_ceiling is shown, every round's beside it. "
        "Ceiling = raw unconditional decrement of the q=1 round (the q=3 rows use the "
        "q=3 round's own raw run). WCU per unit sold counts failed conditional writes "
        "(1 each) and every item of a cancelled transaction (1 each: the prepare phase).",
        [*COLUMNS, "rounds_wall_over_ceiling"],
    )


def run_http_inventory(repeat: int) -> None:
    rounds = max(3, repeat)
    print(
        f"\n## http_inventory (a few minutes: make local's stack, 4 variants x {rounds} rounds)",
        flush=True,
    )
    rows = http_inventory.run(rounds=rounds)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "http_inventory.json").write_text(json.dumps(rows, indent=2))
    print(
        f"\nFlash-sale workload over HTTP against the stack as `make local` runs it (functions in "
        f"their workers, own DynamoDB Local): {http_inventory.ATTEMPTS} requests from "
        f"{http_inventory.WORKERS} users per round, {http_inventory.UNITS} units; atomic "
        "purchases and reservations, q = 1 and 3, alternating, median round shown. "
        "over_purchases: wall / the purchases' of the same q; over_purchases_q1: / the one-unit "
        "purchases'. Targets (over_purchases_q1): "
        + ", ".join(f"q={q} <= {t}" for q, t in HTTP_INVENTORY_TARGETS.items())
        + ". Every round checked: no unit held twice, q units each, exact counts agree.\n"
    )
    print(markdown(rows, http_inventory.COLUMNS))
    print(f"\n(written: {RESULTS / 'http_inventory.json'})")


LEASE_COLUMNS = [
    "strategy",
    "calls_per_acquisition",
    "total_calls_per_acquisition",
    "acquire_p50_ms",
    "acquire_p99_ms",
    "fairness_jain",
    "order_violations",
    "fence_violations",
    "takeover_p50_ms",
    "takeover_p99_ms",
    "takeover_bound_ms",
    "write_p99_ms",
    "lost_leases",
    "wall_over_ceiling",
]


def run_leases(client: Any, table: str) -> None:
    workers, rounds, resources = 50, 20, 5
    print("\n## leases (about two minutes: three strategies, then dead holders)", flush=True)
    before = metrics.tally.snapshot()
    rows = leases.rows(client, table, workers=workers, rounds=rounds, resources=resources)
    counted = tally_delta(before, metrics.tally.snapshot())
    # Each round writes three times (acquire, protected write, release): the ceiling is that many
    # unconditional writes from the same number of threads.
    ceiling = raw_ceiling(client, table, "resource", 3 * workers * rounds, workers)
    for row in rows:
        row["raw_ceiling_s"] = round(ceiling, 3)
        row["wall_over_ceiling"] = round(row["wall_seconds"] / ceiling, 2)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "leases.json").write_text(json.dumps(rows, indent=2))
    image = lease_chart(rows)
    print(
        f"\n{workers} workers x {rounds} rounds over {resources} resources: waiting acquire, "
        "fenced read-modify-write, release; then holders dying without release on 10 resources "
        "at once, 3 waiters each. calls_per_acquisition: the lock's own calls (total: with the "
        "protected read and write). Takeover bound: L + H + one poll (retry loop: its lease). "
        "Ceiling = the same number of unconditional writes.\n"
    )
    print(markdown(rows, LEASE_COLUMNS))
    # turnstile's lease metrics over the whole section (see docs/operations.md, Observability)
    names = ["LeaseQueued", "LeaseWaiterSkipped", "LeasePassedOver", "LeaseTakeover"]
    names += ["LeaseWaitGaveUp", "FencedWriteRefused"]
    print("\nlease metrics: " + ", ".join(f"{n} {counted.get(('lease', n), 0.0):g}" for n in names))
    print(f"\n(written: {RESULTS / 'leases.json'}, {image})")


def lease_chart(rows: list[dict[str, Any]]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["strategy"].replace(", lock client defaults", "\n").split(" (")[0] for r in rows]
    figure, axes = plt.subplots(1, 4, figsize=(15, 4))
    panels = [
        ("lock calls per acquisition", "calls_per_acquisition", "#DD8452", False),
        ("acquire p99 (ms)", "acquire_p99_ms", "#4C72B0", True),
        ("Jain fairness (half-way)", "fairness_jain", "#55A868", False),
        ("takeover p99 after a holder dies (ms)", "takeover_p99_ms", "#C44E52", True),
    ]
    for axis, (title, key, colour, log) in zip(axes, panels, strict=True):
        axis.bar(names, [r[key] or 0 for r in rows], color=colour)
        axis.set_title(title)
        if log:
            axis.set_yscale("log")
        axis.tick_params(axis="x", labelsize=8)
    figure.suptitle("turnstile bench: leases")
    figure.tight_layout()
    path = RESULTS / "leases.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


if __name__ == "__main__":
    raise SystemExit(main())
