"""Bench section ``memory``: each API function's memory, chosen from its measured warm requests.

Lambda gives a function CPU in proportion to its memory (:data:`infra.cost.ONE_VCPU_MB` buys one
vCPU) and bills duration by the GB-second, so the setting trades price against latency. Each API
function runs in its local worker (``local.workers``, as ``make local`` runs it, without the IAM
guard, which Lambda does not have) and serves :data:`REQUESTS` warm requests of its main write
route against DynamoDB Local, one at a time; the worker reports each one's CPU time and duration.

The rest is a **model, not a deployed sweep**: at each setting of :data:`SETTINGS` a request takes
its measured CPU time stretched by the share of a vCPU the memory buys, plus its measured wait
(duration minus CPU: DynamoDB Local's answers, on this machine), which memory does not change
(:func:`infra.cost.modelled_ms`). A setting's p99 is the p99 of those modelled requests and its
price the mean billed GB-seconds and the request charge per million. The choice is the cheapest
setting whose p99 is within :data:`P99_SLACK` of the best setting's. Local CPU is one x86 or arm
core of the machine that ran it, not Graviton's; DynamoDB in AWS answers in a few milliseconds,
so the wait here stands for that order of magnitude only.

Writes ``bench/results/memory.json`` (every setting of every function) and :data:`CHOICE`, the
record the stack's memory sizes are tested against (``tests/infra/test_memory_choice.py``).
"""

from __future__ import annotations

import json
import statistics
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.coldstart import event
from infra import cost
from service import catalog

ROOT = Path(__file__).resolve().parent.parent
CHOICE = ROOT / "bench" / "memory.json"
SETTINGS = (128, 256, 512, 768, 1024, 1280, 1536, 1769, 2048)
P99_SLACK = Decimal("0.10")
REQUESTS = 200
WARM_UP = 20
USER = {"sub": "memory-user", "cognito:username": "memory"}
ADMIN = {"sub": "memory-admin", "cognito:username": "memory-admin", "cognito:groups": "admins"}


@dataclass(frozen=True)
class Sample:
    """One warm request as the worker measured it."""

    cpu_ms: float
    duration_ms: float

    @property
    def wait_ms(self) -> float:
        return max(0.0, self.duration_ms - self.cpu_ms)


def p99(values: Sequence[Decimal]) -> Decimal:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def model(samples: Sequence[Sample], settings: Sequence[int] = SETTINGS) -> list[dict[str, Any]]:
    """Each setting's modelled p99 and mean duration (ms) and price per million requests (USD)."""
    if not samples:
        raise ValueError("no sample to model")
    gb_second = cost.REQUEST_PRICES["lambda_gb_second"].usd
    per_request = cost.REQUEST_PRICES["lambda_request"].usd
    rows = []
    for memory in settings:
        durations = [
            cost.modelled_ms(Decimal(str(s.cpu_ms)), Decimal(str(s.wait_ms)), memory)
            for s in samples
        ]
        mean = sum(durations, Decimal(0)) / len(durations)
        usd = per_request + Decimal(memory) / 1024 * mean / 1000 * 1_000_000 * gb_second
        rows.append(
            {"memory_mb": memory, "p99_ms": p99(durations), "mean_ms": mean, "usd_per_million": usd}
        )
    return rows


def choose(rows: Sequence[Mapping[str, Any]], slack: Decimal = P99_SLACK) -> int:
    """The cheapest setting whose p99 stays within ``slack`` of the best p99 (ties: less memory)."""
    best = min(row["p99_ms"] for row in rows)
    fit = [row for row in rows if row["p99_ms"] <= best * (1 + slack)]
    return int(min(fit, key=lambda row: (row["usd_per_million"], row["memory_mb"]))["memory_mb"])


def _with_key(request: dict[str, Any]) -> dict[str, Any]:
    request["headers"]["Idempotency-Key"] = str(uuid.uuid4())
    request["multiValueHeaders"]["Idempotency-Key"] = [request["headers"]["Idempotency-Key"]]
    return request


def _post(path: str, declared: str, claims: dict[str, str], body: Any, **params: str) -> Any:
    return event("POST", path, declared, claims, body, params)


def workloads(run: str) -> dict[str, Callable[[Callable[[Any], Any]], Iterator[Any]]]:
    """Per API function: given a way to invoke it, set up (untimed) and yield timed requests."""

    def products(invoke: Callable[[Any], Any]) -> Iterator[Any]:
        product = f"memory-{run}"
        body = {"productId": product, "name": "memory", "stock": 10**8}
        invoke(_with_key(_post("/products", "/products", ADMIN, body)))
        resource = "/products/{productId}/purchases"
        while True:
            path = f"/products/{product}/purchases"
            yield _with_key(_post(path, resource, USER, {"quantity": 1}, productId=product))

    def locks(invoke: Callable[[Any], Any]) -> Iterator[Any]:
        while True:  # an acquisition of a lock nobody holds
            name = f"memory-{uuid.uuid4().hex[:12]}"
            acquire = _post(f"/locks/{name}", "/locks/{resource}", USER, {"ttlSeconds": 30},
                            resource=name)  # fmt: skip
            yield acquire

    def wallets(invoke: Callable[[Any], Any]) -> Iterator[Any]:
        wallet = f"memory-{run}"
        while True:
            path = f"/wallets/{wallet}/top-ups"
            yield _with_key(_post(path, "/wallets/{walletId}/top-ups", USER, {"amount": 1},
                                  walletId=wallet))  # fmt: skip

    def inventory(invoke: Callable[[Any], Any]) -> Iterator[Any]:
        sku = f"memory-{run}"
        invoke(_post("/inventory", "/inventory", ADMIN, {"sku": sku, "units": 1000}))
        resource = "/inventory/{sku}/reservations"
        while True:
            yield _post(f"/inventory/{sku}/reservations", resource, USER, {"quantity": 1}, sku=sku)

    def events(invoke: Callable[[Any], Any]) -> Iterator[Any]:
        name = f"memory-{run}"
        body = {"eventId": name, "name": "memory", "capacity": 10**5}
        invoke(_with_key(_post("/events", "/events", ADMIN, body)))
        resource = "/events/{eventId}/registrations"
        while True:
            user = {"sub": f"u-{uuid.uuid4().hex[:12]}", "cognito:username": "memory"}
            path = f"/events/{name}/registrations"
            yield _with_key(_post(path, resource, user, {}, eventId=name))

    return {"products": products, "locks": locks, "wallets": wallets, "inventory": inventory,
            "events": events}  # fmt: skip


def measure(workers: Mapping[str, Any], requests: int = REQUESTS) -> dict[str, list[Sample]]:
    """Each API function's warm requests (after :data:`WARM_UP` untimed ones)."""
    run = uuid.uuid4().hex[:8]
    found: dict[str, list[Sample]] = {}
    for spec in catalog.API_FUNCTIONS:
        worker = workers[spec.handler]

        def invoke(request: Any, worker: Any = worker, name: str = spec.name) -> Any:
            answer = worker.invoke_answer(request)
            status = answer["result"].get("statusCode")
            if not 200 <= status < 300:
                raise RuntimeError(f"{name}: {status} {answer['result'].get('body')}")
            return answer

        stream = workloads(run)[spec.name](invoke)
        for _ in range(WARM_UP):
            invoke(next(stream))
        answers = [invoke(next(stream)) for _ in range(requests)]
        found[spec.name] = [Sample(a["cpu_ms"], a["duration_ms"]) for a in answers]
    return found


def summary(samples: Mapping[str, list[Sample]]) -> dict[str, Any]:
    """Per function: the measurement's medians and p99s, every setting modelled, the choice."""
    functions: dict[str, Any] = {}
    for name, measured in samples.items():
        rows = model(measured)
        cpu = [s.cpu_ms for s in measured]
        wait = [s.wait_ms for s in measured]
        functions[name] = {
            "requests": len(measured),
            "cpu_ms_median": round(statistics.median(cpu), 3),
            "cpu_ms_p99": round(float(p99([Decimal(str(c)) for c in cpu])), 3),
            "wait_ms_median": round(statistics.median(wait), 3),
            "memory_mb": choose(rows),
            "settings": [
                {key: (round(float(v), 6) if isinstance(v, Decimal) else v) for key, v in r.items()}
                for r in rows
            ],
        }
    return functions


def run(db: Any, loaded: dict[str, Any], requests: int = REQUESTS) -> dict[str, Any]:
    from local import workers as local_workers

    only = {spec.handler for spec in catalog.API_FUNCTIONS}
    environment = {**db.environment(), "POWERTOOLS_METRICS_DISABLED": "true",
                   "POWERTOOLS_LOG_LEVEL": "WARNING"}  # fmt: skip
    with local_workers.running(
        loaded, ROOT / "cdk.out", environment, enforce_iam=False, only=only
    ) as running:
        return summary(measure(running, requests))


def record(functions: Mapping[str, Any], load: str, path: Path = CHOICE) -> None:
    """The choice the stack's memory sizes are held to, with what it was chosen from."""
    chosen = {
        name: {
            "memory_mb": found["memory_mb"],
            "cpu_ms_median": found["cpu_ms_median"],
            "wait_ms_median": found["wait_ms_median"],
            "requests": found["requests"],
        }
        for name, found in functions.items()
    }
    note = ("chosen by python -m bench --only memory: the cheapest setting whose modelled p99 "
            f"is within {P99_SLACK:.0%} of the best; a model from local CPU measurement, "
            "not a deployed sweep")  # fmt: skip
    path.write_text(json.dumps({"note": note, "load": load, "functions": chosen}, indent=2) + "\n")
