"""Section ``http_inventory``: reservations against atomic purchases over HTTP, on the stack as
``make local`` runs it (``local.run.running``: DynamoDB Local, every function in its worker from
the synthesized asset and the layer, its role's policy enforced, the stream consumers pumped, the
local identity provider and the caching verifier in front).

Each round is ``attempts`` requests from ``workers`` users (a thread, a keep-alive connection and
an ID token each) against a fresh product or sku of ``units`` units, created by an administrator:

* ``HTTP purchases q=N``: ``POST /products/{id}/purchases`` ``{"quantity": N, "strategy":
  "atomic"}`` (one conditional write);
* ``HTTP reservations q=N``: ``POST /inventory/{sku}/reservations`` ``{"quantity": N}``
  (:func:`turnstile_ddb.claims.reserve`).

The variants alternate for ``rounds`` rounds (each round in another order) and the median round
of each is reported; ``over_purchases`` is a reservation row's wall over the purchases row of the
same quantity, ``over_purchases_q1`` over the one-unit purchases.

Every round is also checked, so the figures are of correct runs: no unit handed out twice, every
reservation exactly q distinct units, the sku's exact counts (``GET /inventory/{sku}/exact``)
agreeing with what was answered, no oversold product; a round that fails a check raises.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import requests

from bench.harness import median_row, percentile, run_workload

ATTEMPTS = 1000
WORKERS = 100
UNITS = 100
ROUNDS = 3
QUANTITIES = (1, 3)


class Broken(AssertionError):
    """A round's answers or the table's counts show a correctness violation."""


@dataclass
class Target:
    """Where the requests go: the API, an administrator's token and the users' tokens."""

    url: str
    admin_token: str
    tokens: Sequence[str]


def _sessions(tokens: Sequence[str]) -> Callable[[int], requests.Session]:
    local = threading.local()

    def session(index: int) -> requests.Session:
        current = getattr(local, "session", None)
        if current is None:
            current = local.session = requests.Session()
            current.headers["Authorization"] = f"Bearer {tokens[index % len(tokens)]}"
        return current

    return session


def _admin(target: Target, method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(
        method,
        f"{target.url}{path}",
        headers={"Authorization": f"Bearer {target.admin_token}"},
        timeout=60,
        **kwargs,
    )


def purchases_round(
    target: Target, *, attempts: int, workers: int, units: int, quantity: int
) -> dict[str, Any]:
    """One round of atomic purchases on a fresh product, checked for oversell."""
    product = f"bench-http-inv-{uuid.uuid4().hex[:8]}"
    created = _admin(
        target, "POST", "/products", json={"productId": product, "name": "bench", "stock": units}
    )
    if created.status_code != 201:
        raise RuntimeError(f"cannot create the product: {created.status_code} {created.text}")
    session = _sessions(target.tokens)

    def attempt(index: int) -> str:
        response = session(index).post(
            f"{target.url}/products/{product}/purchases",
            json={"quantity": quantity, "strategy": "atomic"},
            timeout=60,
        )
        return _label(response)

    outcome = run_workload(attempts, workers, attempt)
    sold = outcome.outcomes.get("ok", 0) * quantity
    stock = _admin(target, "GET", f"/products/{product}").json()["stock"]
    checks = {"oversold": max(0, sold - units), "stock_left": stock}
    if sold > units or stock != units - sold or stock >= quantity:
        raise Broken(f"purchases q={quantity}: sold {sold} of {units}, stock left {stock}")
    return _row(f"HTTP purchases q={quantity}", outcome, attempts, checks)


def reservations_round(
    target: Target, *, attempts: int, workers: int, units: int, quantity: int
) -> dict[str, Any]:
    """One round of reservations on a fresh sku, checked: units held once, q units each, the
    exact counts equal to what was answered, and no unit left that a refused request wanted."""
    sku = f"bench-http-inv-{uuid.uuid4().hex[:8]}"
    created = _admin(target, "POST", "/inventory", json={"sku": sku, "units": units})
    if created.status_code != 201:
        raise RuntimeError(f"cannot create the sku: {created.status_code} {created.text}")
    deadline = time.monotonic() + 120
    while _admin(target, "GET", f"/inventory/{sku}").json().get("status") != "READY":
        if time.monotonic() > deadline:
            raise RuntimeError(f"sku {sku} never became READY")
        time.sleep(0.2)
    session = _sessions(target.tokens)
    answers: list[list[str]] = []
    lock = threading.Lock()

    def attempt(index: int) -> str:
        response = session(index).post(
            f"{target.url}/inventory/{sku}/reservations",
            json={"quantity": quantity, "holdSeconds": 600},
            timeout=60,
        )
        if response.status_code == 201:
            with lock:
                answers.append(list(response.json()["units"]))
        return _label(response)

    outcome = run_workload(attempts, workers, attempt)
    handed_out = Counter(unit for units_of_one in answers for unit in units_of_one)
    exact = _admin(target, "GET", f"/inventory/{sku}/exact").json()
    checks = {
        "units_held_twice": sum(1 for n in handed_out.values() if n > 1),
        "wrong_size": sum(1 for held in answers if len(set(held)) != quantity),
        "reserved_exact": exact["reserved"],
        "available_exact": exact["available"],
    }
    refused = outcome.outcomes.get("OUT_OF_STOCK", 0)
    if (
        checks["units_held_twice"]
        or checks["wrong_size"]
        or exact["reserved"] != len(handed_out)
        or exact["available"] + exact["reserved"] + exact["sold"] != units
        or (refused and exact["available"] >= quantity)
    ):
        raise Broken(f"reservations q={quantity}: {checks}, exact {exact}")
    return _row(f"HTTP reservations q={quantity}", outcome, attempts, checks)


def _label(response: requests.Response) -> str:
    """``ok``, the error code of a 4xx, ``<status>:<code>`` for a 5xx."""
    if response.status_code in (200, 201):
        return "ok"
    try:
        code = str(response.json().get("error", ""))
    except ValueError:
        code = ""
    return code if response.status_code < 500 else f"{response.status_code}:{code}"


def _row(name: str, outcome: Any, attempts: int, checks: dict[str, Any]) -> dict[str, Any]:
    labels = outcome.outcomes.items()
    server = sum(n for label, n in labels if label[:1] == "5")
    return {
        "strategy": name,
        "wall_s": round(outcome.wall, 3),
        "requests_per_s": round(attempts / outcome.wall, 1),
        "p50_ms": round(percentile(outcome.latencies, 0.50) * 1000, 1),
        "p99_ms": round(percentile(outcome.latencies, 0.99) * 1000, 1),
        "errors": server + sum(n for label, n in labels if label.startswith("error:")),
        "client_5xx": server,
        "outcomes": dict(outcome.outcomes),
        **checks,
    }


def rounds_against(
    target: Target,
    *,
    attempts: int = ATTEMPTS,
    workers: int = WORKERS,
    units: int = UNITS,
    rounds: int = ROUNDS,
    quantities: Sequence[int] = QUANTITIES,
) -> list[dict[str, Any]]:
    """The section's rows against a running stack: the median round of each variant."""
    variants: list[tuple[str, int]] = [(kind, q) for q in quantities for kind in ("p", "r")]
    results: dict[tuple[str, int], list[dict[str, Any]]] = {v: [] for v in variants}
    for n in range(rounds):  # each round in another order: none always runs first
        shift = n % len(variants)
        for kind, quantity in variants[shift:] + variants[:shift]:
            run = purchases_round if kind == "p" else reservations_round
            results[(kind, quantity)].append(
                run(target, attempts=attempts, workers=workers, units=units, quantity=quantity)
            )
    chosen = {
        v: {**median_row(rows), "rounds_wall_s": [r["wall_s"] for r in rows]}
        for v, rows in results.items()
    }
    base = chosen[("p", 1)]["wall_s"] if ("p", 1) in chosen else None
    for (kind, quantity), row in chosen.items():
        if kind == "r":
            row["over_purchases"] = round(row["wall_s"] / chosen[("p", quantity)]["wall_s"], 2)
            if base:
                row["over_purchases_q1"] = round(row["wall_s"] / base, 2)
    return [chosen[v] for v in variants]


def run(
    *,
    attempts: int = ATTEMPTS,
    workers: int = WORKERS,
    units: int = UNITS,
    rounds: int = ROUNDS,
) -> list[dict[str, Any]]:
    """Start the local stack as ``make local`` does (its own DynamoDB Local, identity provider
    and function workers on free ports), then :func:`rounds_against` it."""
    from bench.http_auth import users
    from local import bridge
    from local import run as local_run

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    quiet = bridge.log.level
    bridge.log.setLevel("WARNING")  # a line per request would drown the table
    logging.getLogger("local.function").setLevel(logging.WARNING)
    try:
        with local_run.running(port=0, dynamodb_port=0, identity_port=0) as stack:
            (admin_token,) = users(stack.auth, 1, admin=True)
            tokens = users(stack.auth, workers)
            target = Target(stack.url, admin_token, tokens)
            return rounds_against(
                target, attempts=attempts, workers=workers, units=units, rounds=rounds
            )
    finally:
        bridge.log.setLevel(quiet)


COLUMNS = [
    "strategy",
    "wall_s",
    "over_purchases",
    "over_purchases_q1",
    "requests_per_s",
    "p50_ms",
    "p99_ms",
    "errors",
    "client_5xx",
    "units_held_twice",
    "wrong_size",
    "outcomes",
    "rounds_wall_s",
]


def main() -> int:
    from bench.harness import markdown

    print(markdown(run(), COLUMNS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
