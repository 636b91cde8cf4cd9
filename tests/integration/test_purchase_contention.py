"""Flash-sale workload against lost updates: 1000 purchase attempts from 100 threads on a product
with stock 100, against DynamoDB Local, for each strategy. The invariants are checked from the
recorded history of every attempt, not from timings."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from service.domain.errors import DomainError
from service.domain.products import Products
from tests.helpers import metric_totals

ATTEMPTS = 1000
WORKERS = 100
STOCK = 100


def contend(
    products: Products,
    product_id: str,
    strategy: str,
    attempts: int = ATTEMPTS,
    workers: int = WORKERS,
) -> list[tuple[str, Any]]:
    """Run the workload; returns one (outcome, detail) per attempt."""
    barrier = threading.Barrier(workers)

    def worker(index: int) -> list[tuple[str, Any]]:
        barrier.wait()  # every thread starts at once: maximal contention on the first units
        history: list[tuple[str, Any]] = []
        for _ in range(attempts // workers):
            try:
                history.append(("sold", products.purchase(product_id, 1, strategy)))
            except DomainError as exc:
                history.append((exc.code, exc.details))
            except Exception as exc:  # noqa: BLE001 - recorded, so the test shows what broke
                history.append(("error", repr(exc)))
        return history

    with ThreadPoolExecutor(workers) as pool:
        return [entry for part in pool.map(worker, range(workers)) for entry in part]


@pytest.mark.parametrize("strategy", ["atomic", "versioned"])
def test_no_unit_is_sold_twice_under_contention(ddb, tables, unique, strategy):
    # Given a product with 100 units, sold with the deployed conflict policy (lost races bound a
    # purchase, not seconds, so a loaded machine cannot turn them into CONFLICT answers)
    products = Products(client=ddb, table=tables["products"])
    products.create(unique, "Limited edition", STOCK)

    # When 100 threads make 1000 purchase attempts of one unit each
    history = contend(products, unique, strategy)

    # Then exactly 100 attempts bought a unit and 900 were told it is out of stock, with no errors
    outcomes = Counter(outcome for outcome, _ in history)
    assert outcomes == {"sold": STOCK, "OUT_OF_STOCK": ATTEMPTS - STOCK}, outcomes
    # And each sale saw its own stock level and its own version: no unit was sold twice
    receipts = [detail for outcome, detail in history if outcome == "sold"]
    assert sorted(r["remainingStock"] for r in receipts) == list(range(STOCK))
    assert sorted(r["version"] for r in receipts) == list(range(2, STOCK + 2))
    assert len({r["purchaseId"] for r in receipts}) == STOCK
    # And every refusal reported nothing left to sell
    assert {detail["available"] for outcome, detail in history if outcome != "sold"} == {0}
    # And the table agrees: stock 0 at version 1 + 100
    final = products.get(unique)
    assert (final["stock"], final["version"]) == (0, 1 + STOCK)


def test_a_slow_path_sells_every_unit_and_answers_no_conflict(ddb, tables, unique):
    # Given a product with 100 units, sold with the deployed conflict policy, on a path so slow
    # that every reading of the clock is 11 s after the one before (a loaded machine, a slow
    # bridge: what the clock sees of the path, whatever this machine's own speed)
    products = Products(client=ddb, table=tables["products"])
    readings = itertools.count(step=11.0)
    products.conflicts = dataclasses.replace(
        products.conflicts, clock=lambda: float(next(readings))
    )
    products.create(unique, "Limited edition", STOCK)

    # When 50 threads make 250 versioned purchase attempts of one unit each
    with metric_totals() as counted:
        history = contend(products, unique, "versioned", attempts=250, workers=50)

    # Then the buyers raced (lost races were retried), and each purchase either bought a unit or
    # was told the stock is gone: none was answered CONFLICT while units remained
    assert counted.get("versioned", "VersionConflict") > 0
    outcomes = Counter(outcome for outcome, _ in history)
    assert outcomes == {"sold": STOCK, "OUT_OF_STOCK": 250 - STOCK}, outcomes
    assert counted.get("versioned", "ConflictGiveUp") == 0
    # And the history holds: each sale its own stock level and version, every refusal saw 0 left
    receipts = [detail for outcome, detail in history if outcome == "sold"]
    assert sorted(r["remainingStock"] for r in receipts) == list(range(STOCK))
    assert sorted(r["version"] for r in receipts) == list(range(2, STOCK + 2))
    assert {detail["available"] for outcome, detail in history if outcome != "sold"} == {0}
    final = products.get(unique)
    assert (final["stock"], final["version"]) == (0, 1 + STOCK)
