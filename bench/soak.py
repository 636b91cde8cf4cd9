"""``make soak``: the whole API under a fixed arrival rate for minutes, then its invariants.

    python -m bench.soak [--minutes 10 | --seconds S] [--rate 20] [--workers pool|shared]
                         [--out bench/results/soak.json]

Starts the stack ``make local`` runs (``local.run.running``: DynamoDB Local, every function from
its synthesized asset in its worker, the identity provider, the stream pumps), here on free ports
and with each concurrent request in a process of its own (``--workers pool``, as Lambda runs them).
Mints an ID token (and refresh token) for an administrator and for each client the documented way
(``local.issue_token``), creates the contended fixtures (a few hot products, events near capacity,
small and large skus, a few lease resources) and runs Locust headless on
``bench/soak_locustfile.py`` (its docstring says why ``constant_throughput`` holds the rate).

Locust is a subprocess: it runs on gevent, whose monkey-patching must not reach the stack's
threads. While it runs, every ``SAMPLE_SECONDS`` this process reads each function process's RSS
(``/proc``), DynamoDB Local's (the JVM's RSS: its heap and the rest), the load average and the
log sizes. Afterwards: the invariants from the tables (``bench.soak_checks``), then the report
(``--out``; the fields are listed in ``docs/soak.md``) and a plot beside it (``.png``).

Latency is bucketed by minute; a run shorter than three minutes uses four equal buckets instead
(``bucket_seconds`` says which), so a one-minute smoke still has a "second" and a "last" bucket.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "functions"))

import requests  # noqa: E402

from bench import soak_checks, soak_step  # noqa: E402
from bench.soak_progress import Progress, Samples  # noqa: E402
from bench.soak_step import percentile  # noqa: E402
from chaos import checkers  # noqa: E402
from chaos.history import Op  # noqa: E402
from local import bridge, run, template, workers  # noqa: E402
from local.identity import cognito_client  # noqa: E402
from local.issue_token import authenticate  # noqa: E402
from service import config  # noqa: E402

RESULTS = ROOT / "bench" / "results"
LOCUSTFILE = Path(__file__).resolve().parent / "soak_locustfile.py"
SAMPLE_SECONDS = 5.0
USER_RATE = 0.5  # tasks a second per Locust user: a task may take 2 s before the rate drops
PEOPLE = 40  # distinct signed-in people (Locust users beyond that share identities)
HOT_STOCK = 150
POOL_SIZE = 4
SETTLE_SECONDS = 60.0  # at most, after the load, for the streams to drain (summary, requests)
CEILING_USERS = 20  # step mode: Ping users, each back to back (closed loop: the most it moves)
CEILING_SECONDS = 30.0
WARMUP_SECONDS = 30.0  # step mode: the mix before the first step, not judged (cold starts)
SETTLE_STEP_SECONDS = 15.0  # step mode: each step judged after this (its users start, pools grow)

log = logging.getLogger("soak")


def rss_kb(pid: int) -> int:
    """The process's resident set (kB), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def sample(stack: run.LocalStack, files: dict[str, Path], samples: Samples, started: float) -> None:
    samples.t.append(time.time() - started)
    for handler, worker in stack.functions.items():
        name = handler.removeprefix("service.handlers.")
        samples.workers[name].append({pid: rss_kb(pid) for pid in worker.pids()})
    process = stack.dynamodb.process
    samples.dynamodb_rss.append(rss_kb(process.pid) if process is not None else 0)
    samples.load.append(os.getloadavg()[0])
    samples.logs.append({k: p.stat().st_size if p.exists() else 0 for k, p in files.items()})


def bucket_seconds(seconds: float) -> float:
    return 60.0 if seconds >= 180 else seconds / 4


class Api:
    """The API as the administrator, for the fixtures and the final summary reads."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        response = self.session.request(method, self.url + path, json=body, timeout=60)
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None


def fixtures(api: Api, run_id: str, people: int) -> soak_checks.Fixtures:
    """Hot products, two events (one nearly full from the start of the contention), two small
    skus and a large one. Fails loudly if the API refuses any of it."""
    products = {f"soak-{run_id}-p{i}": HOT_STOCK for i in range(3)}
    for product, stock in products.items():
        expect(api("POST", "/products", {"productId": product, "name": "hot", "stock": stock}))
    events = {
        f"soak-{run_id}-e0": max(2, people * 3 // 4),
        f"soak-{run_id}-e1": max(2, people // 4),
    }
    for event, capacity in events.items():
        expect(api("POST", "/events", {"eventId": event, "name": "hot", "capacity": capacity}))
    skus = {f"soak-{run_id}-s0": 12, f"soak-{run_id}-s1": 12, f"soak-{run_id}-s2": 800}
    for sku, units in skus.items():
        expect(api("POST", "/inventory", {"sku": sku, "units": units}))
    return soak_checks.Fixtures(products, list(events), list(skus), [])


def expect(answer: tuple[int, Any]) -> None:
    status, body = answer
    if status not in (200, 201, 202):
        raise RuntimeError(f"the soak's set-up was refused: {status} {body}")


def summary(api: Api) -> Any:
    def read(sku: str) -> dict[str, int] | None:
        status, body = api("GET", f"/inventory/{sku}")
        if status != 200:
            return None
        return {k: int(body[k]) for k in ("available", "reserved", "sold")}

    return read


@contextmanager
def prepared(
    folder: Path, people_count: int, mode: str, *, pool_size: int, template_path: Path
) -> Iterator[tuple[run.LocalStack, Api, soak_checks.Fixtures, Path]]:
    """The stack on free ports, an administrator, ``people_count`` signed-in people and the
    contended fixtures, the plan the clients read written to ``folder/setup.json``: yields
    (the stack, the API as the administrator, the fixtures, the plan's path)."""
    run_id = uuid.uuid4().hex[:8]
    with run.running(
        port=0,
        dynamodb_port=0,
        identity_port=0,
        worker_mode=mode,
        pool_size=pool_size,
        template_path=template_path,
    ) as stack:
        cognito = cognito_client(stack.auth.endpoint, stack.auth.region)
        admin = authenticate(stack.auth, f"soak-{run_id}-admin", admin=True, client=cognito)
        api = Api(stack.url, admin["IdToken"])
        verifier = stack.auth.verifier()
        people = []
        for i in range(people_count):
            tokens = authenticate(stack.auth, f"soak-{run_id}-u{i}", client=cognito)
            sub = verifier.verify_claims(tokens["IdToken"])["sub"]
            people.append(
                {
                    "name": f"u{i}",
                    "sub": sub,
                    "token": tokens["IdToken"],
                    "refresh": tokens["RefreshToken"],
                }
            )
        made = fixtures(api, run_id, len(people))
        plan = {
            "seed": run_id,
            "admin": admin["IdToken"],
            "people": people,
            "products": list(made.products),
            "events": made.events,
            "skus": made.skus,
            "resources": [f"soak-{run_id}-r{i}" for i in range(2)],
            "identity_endpoint": stack.auth.endpoint,
            "region": stack.auth.region,
            "client_id": stack.auth.client_id,
        }
        setup_file = folder / "setup.json"
        setup_file.write_text(json.dumps(plan))
        yield stack, api, made, setup_file


def locust(
    url: str,
    setup_file: Path,
    record: Path,
    output: Path,
    users: int,
    seconds: float,
    user_class: str = "Person",
) -> int:
    """Locust headless on ``bench/soak_locustfile.py`` (``user_class``: ``Person``, the mix, or
    ``Ping``, the bridge alone); its exit code. The mix's users start spread over one period of
    theirs (``1 / USER_RATE`` s), so the first tasks arrive at the rate too, not all at once."""
    spawn = users if user_class == "Ping" else max(1.0, users * USER_RATE)
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
        "--host", url, "-u", str(users), "-r", f"{spawn:g}", "-t", f"{int(seconds)}s",
        "--stop-timeout", "10", "--only-summary", "--loglevel", "WARNING",
        "--exit-code-on-error", "0", user_class,
    ]  # fmt: skip
    environment = {
        **os.environ,
        "SOAK_SETUP": str(setup_file),
        "SOAK_RECORD": str(record),
        "SOAK_USER_RATE": str(USER_RATE),
    }
    with output.open("w") as out:
        done = subprocess.run(
            command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    return done.returncode


def read_record(*records: Path) -> list[dict[str, Any]]:
    """The record files' lines (JSON), in order."""
    return [
        json.loads(line)
        for record in records
        if record.exists()
        for line in record.read_text().splitlines()
        if line.strip()
    ]


def settled_checks(
    stack: run.LocalStack,
    api: Api,
    made: soak_checks.Fixtures,
    lines: list[dict[str, Any]],
) -> tuple[list[Op], checkers.Report]:
    """The invariants over the record's operations, re-read for up to ``SETTLE_SECONDS`` while
    the streams (summary, registration requests) settle after the load."""
    ops = soak_checks.ops_of(lines)
    wallets = sorted({op.args["wallet"] for op in ops if op.pattern == "wallets"})
    made = soak_checks.Fixtures(made.products, made.events, made.skus, wallets)
    tables = config.Tables.from_env(
        config.PRODUCTS, config.EVENTS, config.REGISTRATION_REQUESTS, config.WALLETS,
        config.INVENTORY,
    )  # fmt: skip
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        verdict = soak_checks.check(ops, made, stack.dynamodb.client(), tables, summary(api))
        if not verdict.violations or time.monotonic() > deadline:
            return ops, verdict
        time.sleep(3)


def latency(
    requests_seen: list[dict[str, Any]], start: float, bucket: float, buckets: int
) -> dict[str, Any]:
    """p50/p95/p99 (ms) and count per route per bucket, and over all routes."""
    by: dict[str, list[list[float]]] = defaultdict(lambda: [[] for _ in range(buckets)])
    for line in requests_seen:
        index = min(buckets - 1, max(0, int((line["t"] - start) // bucket)))
        by[line["name"]][index].append(line["ms"])
        by["all"][index].append(line["ms"])
    return {
        name: [
            {
                "bucket": i,
                "count": len(values),
                "p50": round(percentile(values, 50), 1),
                "p95": round(percentile(values, 95), 1),
                "p99": round(percentile(values, 99), 1),
            }
            for i, values in enumerate(rows)
        ]
        for name, rows in sorted(by.items())
    }


def rss_growth(samples: Samples, at: float) -> tuple[float, dict[str, float]]:
    """Per function process alive both at ``at`` seconds and at the end: RSS at the end over RSS
    then; the largest, and each function's largest."""
    if not samples.t:
        return 0.0, {}
    base = min(range(len(samples.t)), key=lambda i: abs(samples.t[i] - at))
    growth: dict[str, float] = {}
    for name, rows in samples.workers.items():
        first, last = rows[base], rows[-1]
        ratios = [last[pid] / first[pid] for pid in first if first[pid] and last.get(pid)]
        if ratios:
            growth[name] = round(max(ratios), 3)
    return max(growth.values(), default=0.0), growth


def plot(report: dict[str, Any], samples: Samples, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    bucket = report["bucket_seconds"]
    overall = report["latency_ms"]["all"]
    middles = [(row["bucket"] + 0.5) * bucket for row in overall]
    for q in ("p50", "p95", "p99"):
        top.plot(middles, [row[q] for row in overall], marker="o", label=q)
    top.set_ylabel("latency, all routes (ms)")
    top.set_title(
        f"soak: {report['requests']} requests at {report['achieved_rps']:.1f}/s "
        f"({report['workers_mode']} workers)"
    )
    top.legend()
    for name, rows in samples.workers.items():
        bottom.plot(samples.t, [sum(r.values()) / 1024 for r in rows], label=name)
    bottom.plot(
        samples.t, [kb / 1024 for kb in samples.dynamodb_rss], "k--", label="DynamoDB Local"
    )
    bottom.set_ylabel("RSS (MB; a function: all its processes)")
    bottom.set_xlabel("seconds")
    bottom.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def log_to(path: Path) -> None:
    """The stack's log (bridge, workers, pumps) to ``path``, werkzeug's request lines left out."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)


def soak(
    seconds: float,
    rate: float,
    mode: str,
    out: Path,
    *,
    pool_size: int = POOL_SIZE,
    template_path: Path = template.TEMPLATE,
) -> dict[str, Any]:
    """Run it and write the report (``out``) and its plot; the report, as a dict."""
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = out.with_suffix("")  # bench/results/soak/: the record, the logs
    folder.mkdir(exist_ok=True)
    stack_log, record, locust_log = (
        folder / "stack.log",
        folder / "record.jsonl",
        folder / "locust.log",
    )
    for path in (stack_log, record, locust_log):
        path.unlink(missing_ok=True)
    log_to(stack_log)
    users = max(1, math.ceil(rate / USER_RATE))
    print(
        f"soak: {seconds:.0f} s at {rate} tasks/s ({users} Locust users), {mode} workers",
        flush=True,
    )
    with prepared(
        folder, min(PEOPLE, users), mode, pool_size=pool_size, template_path=template_path
    ) as (stack, api, made, setup_file):
        files = {"stack.log": stack_log, "record.jsonl": record, "locust.log": locust_log}
        samples = Samples()
        stop = threading.Event()
        started = time.time()

        progress = Progress(record, started, seconds)

        def sampler() -> None:
            while True:
                sample(stack, files, samples, started)
                progress.maybe_print(samples)
                if stop.wait(SAMPLE_SECONDS):
                    return

        thread = threading.Thread(target=sampler, name="soak-sampler", daemon=True)
        thread.start()
        done = locust(stack.url, setup_file, record, locust_log, users, seconds)
        ran = time.time() - started
        stop.set()
        thread.join()
        if done != 0:
            raise RuntimeError(f"locust failed ({done}): see {locust_log}")
        lines = read_record(record)
        ops, verdict = settled_checks(stack, api, made, lines)

    reqs = [line for line in lines if line["kind"] == "req"]
    bucket = bucket_seconds(seconds)
    buckets = max(1, math.ceil(seconds / bucket))
    start = min((line["t"] for line in reqs), default=started)
    by_latency = latency(reqs, start, bucket, buckets)
    statuses = Counter(str(line["status"]) for line in reqs)
    overall = by_latency.get("all", [])
    second, last = (overall[1], overall[-1]) if len(overall) > 1 else ({}, {})
    growth, growth_by = rss_growth(samples, 2 * bucket)
    report: dict[str, Any] = {
        "minutes": round(seconds / 60, 3),
        "rate_rps": rate,
        "rate_note": "target arrival rate, tasks a second (a task is one to three requests)",
        "locust_users": users,
        "workers_mode": mode,
        "pool_size": pool_size if mode == workers.POOL else None,
        "requests": len(reqs),
        "achieved_rps": round(len(reqs) / seconds, 2),
        "wall_seconds": round(ran, 1),
        "operations_checked": len(ops),
        "errors_5xx": sum(n for s, n in statuses.items() if s == "0" or int(s) >= 500),
        "errors_by_status": dict(sorted(statuses.items())),
        "invariant_checks": verdict.checks,
        "invariant_violations": len(verdict.violations),
        "violations": [f"{v.pattern}: {v.check}: {v.message}" for v in verdict.violations[:50]],
        "rss_growth": growth,
        "rss_growth_by_function": growth_by,
        "p99_drift": round(last["p99"] / second["p99"], 3) if second.get("p99") else None,
        "p50_ms": round(percentile([line["ms"] for line in reqs], 50), 1),
        "p99_ms": round(percentile([line["ms"] for line in reqs], 99), 1),
        "bucket_seconds": bucket,
        "latency_ms": by_latency,
        "rss_kb": {
            "t": [round(t, 1) for t in samples.t],
            "functions": {
                name: [{str(pid): kb for pid, kb in row.items()} for row in rows]
                for name, rows in samples.workers.items()
            },
            "dynamodb_local": samples.dynamodb_rss,
        },
        "load_average": {
            "samples": samples.load,
            "mean": round(statistics.fmean(samples.load), 2) if samples.load else None,
            "max": max(samples.load, default=None),
        },
        "log_bytes": samples.logs[-1] if samples.logs else {},
        "log_bytes_over_time": samples.logs,
    }
    out.write_text(json.dumps(report, indent=1))
    report["plot"] = str(plot(report, samples, out.with_suffix(".png")))
    return report


def stepped(
    start_rate: float,
    step_seconds: float,
    mode: str,
    out: Path,
    *,
    factor: float = soak_step.FACTOR,
    max_steps: int = soak_step.MAX_STEPS,
    limits: soak_step.Limits | None = None,
    ceiling_seconds: float = CEILING_SECONDS,
    warmup_seconds: float = WARMUP_SECONDS,
    settle_seconds: float = SETTLE_STEP_SECONDS,
    pool_size: int = POOL_SIZE,
    template_path: Path = template.TEMPLATE,
) -> dict[str, Any]:
    """Step mode: the bridge's ceiling first (``Ping`` users back to back on ``GET /_ping``, a
    route the local bridge answers itself), ``warmup_seconds`` of the mix at ``start_rate`` (the
    workers' cold starts, not judged), then the mix at ``start_rate`` tasks a second, each step
    ``factor`` times the one before, ``step_seconds`` long and judged after its first
    ``settle_seconds``, until a step is not held
    (``bench.soak_step``); then the invariants over every step. Writes the report (``out``)."""
    limits = limits or soak_step.Limits()
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = out.with_suffix("")
    folder.mkdir(exist_ok=True)
    for old in folder.glob("step*"):
        old.unlink()
    (folder / "ceiling.jsonl").unlink(missing_ok=True)
    (folder / "stack.log").unlink(missing_ok=True)
    log_to(folder / "stack.log")
    records: list[Path] = []
    with prepared(folder, PEOPLE, mode, pool_size=pool_size, template_path=template_path) as (
        stack,
        api,
        made,
        setup_file,
    ):
        plan = json.loads(setup_file.read_text())
        ceiling_record = folder / "ceiling.jsonl"
        print(f"soak: the ceiling, {CEILING_USERS} users on GET /_ping", flush=True)
        code = locust(
            stack.url, setup_file, ceiling_record, folder / "ceiling.log",
            CEILING_USERS, ceiling_seconds, "Ping",
        )  # fmt: skip
        if code != 0:
            raise RuntimeError(f"locust failed ({code}): see {folder / 'ceiling.log'}")
        ceiling = soak_step.step_of(read_record(ceiling_record), 0, ceiling_seconds)

        def mix(name: str, rate: float, seconds: float) -> Path:
            setup = folder / f"{name}-setup.json"  # a seed of its own: fresh keys and names
            setup.write_text(json.dumps({**plan, "seed": f"{plan['seed']}-{name}"}))
            record = folder / f"{name}.jsonl"
            users = max(1, math.ceil(rate / USER_RATE))
            print(f"soak: {name}, {rate} tasks/s ({users} users, {seconds:.0f} s)", flush=True)
            code = locust(stack.url, setup, record, folder / f"{name}.log", users, seconds)
            if code != 0:
                raise RuntimeError(f"locust failed ({code}): see {folder / f'{name}.log'}")
            records.append(record)
            return record

        if warmup_seconds > 0:  # the pool workers' cold starts, not judged
            mix("step-warmup", start_rate, warmup_seconds)
        numbers = itertools.count()

        def measure(rate: float) -> soak_step.Step:
            record = mix(f"step{next(numbers)}", rate, step_seconds)
            step = soak_step.step_of(
                read_record(record),
                rate,
                step_seconds,
                round(os.getloadavg()[0], 2),
                settle_seconds=settle_seconds,
            )
            print(
                f"  {step.requests} requests ({step.achieved_rps:.1f}/s), p99 {step.p99_ms} ms, "
                f"errors {step.server_errors} 5xx + {step.lost} lost",
                flush=True,
            )
            return step

        climbed = soak_step.climb(
            measure, start_rate, factor=factor, max_steps=max_steps, limits=limits
        )
        ops, verdict = settled_checks(stack, api, made, read_record(*records))
    held = climbed.held
    highest = round(held.achieved_rps, 2) if held else 0.0
    ceiling_rps = round(ceiling.achieved_rps, 2)
    report: dict[str, Any] = {
        "mode": "step",
        "workers_mode": mode,
        "pool_size": pool_size if mode == workers.POOL else None,
        "start_rate": start_rate,
        "factor": factor,
        "step_seconds": step_seconds,
        "warmup_seconds": warmup_seconds,
        "settle_seconds": settle_seconds,
        "limits": {"p99_ms": limits.p99_ms, "error_rate": limits.error_rate, "5xx": 0},
        "steps": climbed.rows(),
        "stopped_because": climbed.stopped_because,
        "highest_rate_tasks": held.rate if held else 0.0,
        "highest_rate_rps": highest,
        "ceiling_rps": ceiling_rps,
        "ceiling": {
            "route": "GET /_ping (the local bridge alone, no function, no table)",
            "users": CEILING_USERS,
            "seconds": ceiling_seconds,
            "p50_ms": ceiling.p50_ms,
            "p99_ms": ceiling.p99_ms,
            "errors": ceiling.server_errors + ceiling.lost,
        },
        "ratio": round(highest / ceiling_rps, 3) if ceiling_rps else None,
        "operations_checked": len(ops),
        "invariant_checks": verdict.checks,
        "invariant_violations": len(verdict.violations),
        "violations": [f"{v.pattern}: {v.check}: {v.message}" for v in verdict.violations[:50]],
    }
    out.write_text(json.dumps(report, indent=1))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("MINUTES") or 10))
    parser.add_argument("--seconds", type=float, help="overrides --minutes (the smoke: 60)")
    parser.add_argument("--rate", type=float, default=float(os.environ.get("RATE") or 20))
    parser.add_argument("--workers", choices=workers.MODES, default=workers.POOL)
    parser.add_argument("--pool-size", type=int, default=POOL_SIZE)
    parser.add_argument("--out", type=Path, help="default: bench/results/soak(-step).json")
    parser.add_argument(
        "--template",
        type=Path,
        default=template.TEMPLATE,
        help="the synthesized template; its folder holds the functions' assets",
    )
    step = parser.add_argument_group("step mode (--rate is the first step's)")
    step.add_argument("--step", action="store_true", help="raise the rate until it is not held")
    step.add_argument("--step-seconds", type=float, default=60.0)
    step.add_argument("--step-factor", type=float, default=soak_step.FACTOR)
    step.add_argument("--max-steps", type=int, default=soak_step.MAX_STEPS)
    step.add_argument("--p99-limit-ms", type=float, default=soak_step.P99_LIMIT_MS)
    step.add_argument("--error-limit", type=float, default=soak_step.ERROR_RATE_LIMIT)
    step.add_argument("--ceiling-seconds", type=float, default=CEILING_SECONDS)
    step.add_argument("--warmup-seconds", type=float, default=WARMUP_SECONDS)
    step.add_argument("--settle-seconds", type=float, default=SETTLE_STEP_SECONDS)
    args = parser.parse_args(argv)
    bridge.log.setLevel(logging.INFO)
    if args.step:
        return step_main(args)
    seconds = args.seconds if args.seconds else args.minutes * 60
    report = soak(
        seconds,
        args.rate,
        args.workers,
        args.out or RESULTS / "soak.json",
        pool_size=args.pool_size,
        template_path=args.template,
    )
    r = report
    print(
        f"soak: {r['requests']} requests ({r['achieved_rps']}/s), p50 {r['p50_ms']} ms, "
        f"p99 {r['p99_ms']} ms, 5xx {r['errors_5xx']}, invariant violations "
        f"{r['invariant_violations']} of {r['invariant_checks']} checks, rss_growth "
        f"{r['rss_growth']}, p99_drift {r['p99_drift']}, load {r['load_average']['mean']}"
        f"\n  {args.out or RESULTS / 'soak.json'}, {r['plot']}"
    )
    for violation in report["violations"]:
        print(f"  VIOLATION {violation}")
    return 1 if report["invariant_violations"] or report["errors_5xx"] else 0


def step_main(args: argparse.Namespace) -> int:
    out = args.out or RESULTS / "soak-step.json"
    r = stepped(
        args.rate,
        args.step_seconds,
        args.workers,
        out,
        factor=args.step_factor,
        max_steps=args.max_steps,
        limits=soak_step.Limits(p99_ms=args.p99_limit_ms, error_rate=args.error_limit),
        ceiling_seconds=args.ceiling_seconds,
        warmup_seconds=args.warmup_seconds,
        settle_seconds=args.settle_seconds,
        pool_size=args.pool_size,
        template_path=args.template,
    )
    print(
        f"soak (step): held {r['highest_rate_tasks']} tasks/s = {r['highest_rate_rps']} "
        f"requests/s; ceiling {r['ceiling_rps']} requests/s (GET /_ping); ratio {r['ratio']}; "
        f"stopped: {r['stopped_because']}; invariant violations {r['invariant_violations']} "
        f"of {r['invariant_checks']} checks\n  {out}"
    )
    for violation in r["violations"]:
        print(f"  VIOLATION {violation}")
    return 1 if r["invariant_violations"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
