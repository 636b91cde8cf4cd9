"""Sharded stock under the capacity model: 100 threads on one product split over 8 shards, on
DynamoDB Local with per-key throughput limits (so shards really are throttled and fail over).
The invariants are checked from the recorded history of every attempt."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from local.capacity_model import CapacityModel
from service.domain.errors import DomainError, VersionMismatch
from service.domain.products import Products
from turnstile_ddb import metrics, retry, sharded

WORKERS = 100
SHARDS = 8
STOCK = 80  # 10 a shard


@pytest.fixture
def limited(dynamodb_local: Any, tables: Any) -> tuple[Any, CapacityModel]:
    # 5 WCU/s per key and 0.2 s of burst: 100 threads offer far more than one shard takes, even on
    # a loaded machine. A long read timeout: the invariants are under test here, not timeouts.
    model = CapacityModel(0.005, burst_seconds=0.2)
    config = retry.client_config(read_timeout=60)
    return model.attach(dynamodb_local.client(config=config)), model


def contend(products: Products, product_id: str, quantities: list[int]) -> list[dict[str, Any]]:
    """Every thread buys until it is refused; each attempt is recorded with start and end."""
    barrier = threading.Barrier(WORKERS)

    def worker(index: int) -> list[dict[str, Any]]:
        rand = random.Random(index)
        barrier.wait()
        history = []
        while True:
            quantity = rand.choice(quantities)
            entry: dict[str, Any] = {"quantity": quantity, "start": time.monotonic()}
            try:
                entry.update(outcome="sold", receipt=products.purchase(product_id, quantity))
            except DomainError as exc:
                entry.update(outcome=exc.code, details=exc.details)
            except retry.RetriesExhausted:
                entry.update(outcome="throttled")  # a 503 to a client, who would retry
            except Exception as exc:  # noqa: BLE001 - recorded, so the test shows what broke
                entry.update(outcome="error", details=repr(exc))
            entry["end"] = time.monotonic()
            history.append(entry)
            if entry["outcome"] not in ("sold", "throttled"):
                return history

    with ThreadPoolExecutor(WORKERS) as pool:
        return [entry for part in pool.map(worker, range(WORKERS)) for entry in part]


def test_one_unit_purchases_sell_exactly_the_stock_with_no_unit_twice(
    limited: tuple[Any, CapacityModel], ddb: Any, tables: Any, unique: str
) -> None:
    client, model = limited
    products = Products(client=client, table=tables["products"])
    products.create(unique, "Flash sale", STOCK, shards=SHARDS)
    failovers = metrics.tally.get(sharded.PATTERN, "ShardFailover")

    history = contend(products, unique, [1])

    outcomes = Counter(entry["outcome"] for entry in history)
    errors = [e["details"] for e in history if e["outcome"] == "error"][:3]
    assert set(outcomes) <= {"sold", "OUT_OF_STOCK", "throttled"}, (outcomes, errors)
    assert outcomes["sold"] == STOCK
    assert outcomes["OUT_OF_STOCK"] == WORKERS  # every thread ends on a refusal
    # No unit twice: on each shard, the stock left after each sale is distinct and covers 0..9
    by_shard: dict[int, list[int]] = defaultdict(list)
    for entry in history:
        if entry["outcome"] == "sold":
            by_shard[entry["receipt"]["shard"]].append(entry["receipt"]["remainingStock"])
    assert sorted(by_shard) == list(range(SHARDS))
    for remaining in by_shard.values():
        assert sorted(remaining) == list(range(STOCK // SHARDS))
    # Refusals only when every shard was empty: each said 0 left, and no sale began after one ended
    refusals = [entry for entry in history if entry["outcome"] == "OUT_OF_STOCK"]
    assert {entry["details"]["available"] for entry in refusals} == {0}
    first_refusal_end = min(entry["end"] for entry in refusals)
    assert all(e["start"] < first_refusal_end for e in history if e["outcome"] == "sold")
    # Shards emptied unevenly: the sale that emptied each shard came at different points
    emptied = sorted(
        e["end"] for e in history if e["outcome"] == "sold" and e["receipt"]["remainingStock"] == 0
    )
    assert len(emptied) == SHARDS and emptied[0] < emptied[-1]
    # The model really throttled the shards, and the purchases failed over instead of failing
    assert model.stats.throttled > 0
    assert metrics.tally.get(sharded.PATTERN, "ShardFailover") > failovers
    assert products.get(unique)["stock"] == 0
    assert sharded.read_all(ddb, products.counter(unique, SHARDS), retry.Backoff()) == [0] * SHARDS


def test_mixed_quantities_sell_exactly_the_stock_and_refuse_only_what_no_total_covers(
    limited: tuple[Any, CapacityModel], tables: Any, unique: str
) -> None:
    client, _ = limited
    products = Products(client=client, table=tables["products"])
    products.create(unique, "Flash sale", STOCK + 1, shards=SHARDS)  # uneven shares: 51, 50...

    history = contend(products, unique, [1, 2, 3])

    sold = sum(e["quantity"] for e in history if e["outcome"] == "sold")
    assert sold == STOCK + 1
    outcomes = Counter(entry["outcome"] for entry in history)
    assert set(outcomes) <= {"sold", "OUT_OF_STOCK", "throttled"}, outcomes
    # Every refusal saw a total that could not cover its request (bound: 0 refusals that could)
    for entry in history:
        if entry["outcome"] == "OUT_OF_STOCK":
            assert entry["details"]["available"] < entry["quantity"], entry
    assert products.get(unique)["stock"] == 0


def test_get_sums_the_shards_and_patch_and_restock_keep_the_total_exact(
    ddb: Any, tables: Any, unique: str
) -> None:
    products = Products(client=ddb, table=tables["products"])
    created = products.create(unique, "Sharded", 10, shards=4)
    assert created == {
        "productId": unique,
        "name": "Sharded",
        "stock": 10,
        "version": 1,
        "shards": 4,
    }
    products.purchase(unique, 3)
    assert products.get(unique)["stock"] == 7
    # a restock adds exactly and bumps the catalogue version
    assert products.restock(unique, 5)["stock"] == 12
    assert products.get(unique)["version"] == 2
    # a PATCH at a stale version is refused and changes nothing
    with pytest.raises(VersionMismatch):
        products.update(unique, 1, {"stock": 100})
    assert products.get(unique)["stock"] == 12
    # at the current version it sets the exact total, split over the shards
    patched = products.update(unique, 2, {"stock": 9, "name": "Renamed"})
    assert (patched["stock"], patched["name"], patched["version"]) == (9, "Renamed", 3)
    counts = sharded.read_all(ddb, products.counter(unique, 4), retry.Backoff())
    assert counts == [3, 2, 2, 2]
    # purchases do not change the catalogue version, and receipts carry it
    assert products.purchase(unique, 1)["version"] == 3


def test_sold_out_refusals_cost_one_read_or_none_while_the_read_is_fresh(
    ddb: Any, tables: Any, unique: str
) -> None:
    # The process's hints, not trusted at first: neither the empty read nor any count
    hints = sharded.Hints(
        shards=sharded.ShardHints(trust_seconds=0.0),
        sold_out=sharded.SoldOutHints(trust_seconds=0.0),
    )
    calls: Counter[str] = Counter()
    client_events = ddb.meta.events

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    products = Products(client=ddb, table=tables["products"], hints=hints)
    products.create(unique, "Tiny", 2, shards=2)
    products.purchase(unique, 2)  # both shards: one transaction over two shards
    with pytest.raises(DomainError):
        products.purchase(unique, 1)  # learns it is sold out
    client_events.register("before-call.dynamodb", count)
    try:
        for _ in range(5):
            with pytest.raises(DomainError) as refused:
                products.purchase(unique, 1)
            assert refused.value.code == "OUT_OF_STOCK"
        assert calls == {"BatchGetItem": 5}
        hints.sold_out.trust_seconds = 3600.0
        for _ in range(5):
            with pytest.raises(DomainError):
                products.purchase(unique, 1)
        assert calls == {"BatchGetItem": 5}  # no call at all within the trust window
        products.restock(unique, 1)  # this process's restock clears the hint
        assert products.purchase(unique, 1)["remainingStock"] == 0
    finally:
        client_events.unregister("before-call.dynamodb", count)
