"""Flash-sale workload on one product: 1000 purchase attempts of one unit, 100 threads, stock 100.

Strategies, all in one run on the same DynamoDB Local:

* ``raw``: an unconditional decrement, no checks at all (oversells; the speed ceiling);
* ``atomic``: turnstile's single conditional decrement;
* ``versioned``: turnstile's read, decide, version-checked write, retrying from ALL_OLD;
* ``naive``: optimistic locking as often written: read, check, version-checked write, and on a
  conflict read again and retry at once.
"""

from __future__ import annotations

import uuid
from typing import Any

from botocore.exceptions import ClientError

from bench.harness import Meter, Outcome, measure, row, tally_delta
from service.domain.errors import DomainError
from service.domain.products import Products
from turnstile_ddb import codec, metrics

ATTEMPTS = 1000
WORKERS = 100
STOCK = 100


def _raw(client: Any, table: str, product_id: str) -> Any:
    def attempt(_: int) -> str:
        client.update_item(
            TableName=table,
            Key=codec.encode_item({"productId": product_id}),
            UpdateExpression="SET #stock = #stock - :one, #version = #version + :one",
            ExpressionAttributeNames={"#stock": "stock", "#version": "version"},
            ExpressionAttributeValues=codec.values(one=1),
        )
        return "ok"

    return attempt


def _naive(client: Any, table: str, product_id: str) -> Any:
    key = codec.encode_item({"productId": product_id})

    def attempt(_: int) -> str:
        while True:
            item = codec.decode_item(
                client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
            )
            assert item is not None
            if item["stock"] < 1:
                return "OUT_OF_STOCK"
            try:
                client.update_item(
                    TableName=table,
                    Key=key,
                    UpdateExpression="SET #stock = :stock, #version = :next",
                    ConditionExpression="#version = :seen",
                    ExpressionAttributeNames={"#stock": "stock", "#version": "version"},
                    ExpressionAttributeValues=codec.values(
                        stock=item["stock"] - 1, next=item["version"] + 1, seen=item["version"]
                    ),
                )
                return "ok"
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise

    return attempt


def _turnstile(products: Products, product_id: str, strategy: str, quantity: int) -> Any:
    def attempt(_: int) -> str:
        try:
            products.purchase(product_id, quantity, strategy)
            return "ok"
        except DomainError as exc:
            return exc.code

    return attempt


def run(
    client: Any,
    table: str,
    meter: Meter,
    *,
    attempts: int = ATTEMPTS,
    workers: int = WORKERS,
    stock: int = STOCK,
    quantity: int = 1,
    strategies: tuple[str, ...] = ("raw", "atomic", "versioned", "naive"),
) -> list[dict[str, Any]]:
    """One row per strategy; the ceiling is the ``raw`` run of this same call. ``quantity`` applies
    to the turnstile strategies (raw and naive always take one)."""
    products = Products(client=client, table=table)
    results: dict[str, tuple[Outcome, Meter]] = {}
    counted: dict[str, dict[tuple[str, str], float]] = {}
    for strategy in strategies:
        product_id = f"bench-{strategy}-{uuid.uuid4().hex[:8]}"
        products.create(product_id, strategy, stock)
        if strategy == "raw":
            attempt = _raw(client, table, product_id)
        elif strategy == "naive":
            attempt = _naive(client, table, product_id)
        else:
            attempt = _turnstile(products, product_id, strategy, quantity)
        before = metrics.tally.snapshot()
        outcome, snapshot = measure(meter, attempts, workers, attempt)
        counted[strategy] = tally_delta(before, metrics.tally.snapshot())
        results[strategy] = (outcome, snapshot)
    ceiling = results["raw"][0].wall if "raw" in results else 0.0
    rows = []
    for name, (outcome, snapshot) in results.items():
        result = row(
            name,
            outcome,
            snapshot,
            ceiling=ceiling,
            useful=outcome.outcomes.get("ok", 0) * (1 if name in ("raw", "naive") else quantity),
            requests=attempts,
        )
        if name in ("atomic", "versioned"):
            result["metrics_vs_meter"] = metrics_vs_meter(counted[name], snapshot, name)
        rows.append(result)
    return rows


def metrics_vs_meter(
    counted: dict[tuple[str, str], float], meter: Meter, pattern: str
) -> dict[str, float]:
    """turnstile's own metrics beside what the meter saw on the wire, for one strategy."""
    return {
        "metric_VersionConflict": counted.get((pattern, "VersionConflict"), 0.0),
        "meter_refused_UpdateItem": meter.refused["UpdateItem"],
        "metric_VersionedWrite": counted.get((pattern, "VersionedWrite"), 0.0),
        "metric_Throttle": counted.get((pattern, "Throttle"), 0.0),
        "meter_UpdateItem_calls": meter.calls["UpdateItem"],
        "metric_ConflictGiveUp": counted.get((pattern, "ConflictGiveUp"), 0.0),
    }
