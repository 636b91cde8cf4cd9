"""Seed 002's workload on item-level claims: ``attempts`` reservations of ``quantity`` units from
``workers`` threads on ``units`` units of one sku, against DynamoDB Local.

``make bench`` runs it beside the single-counter strategies (``bench.products``) in the same run,
for quantity 1 and 3; ``python -m bench.inventory`` runs the claims alone on its own DynamoDB Local.
Calls and consumed write capacity are counted by :class:`bench.harness.Meter` (a failed
conditional write is billed one WCU, as on AWS).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from bench.harness import Meter, measure, row
from service import config
from service.domain.errors import OutOfStock
from service.domain.inventory import Inventory


def claims_row(
    client: Any,
    meter: Meter,
    tables: Mapping[str, str],
    *,
    ceiling: float,
    attempts: int = 1000,
    workers: int = 100,
    units: int = 100,
    quantity: int = 1,
) -> dict[str, Any]:
    """One run on a fresh sku, as a bench row (``client`` must carry ``meter``'s hooks)."""
    service = Inventory(
        client=client,
        table=tables[config.INVENTORY],
        summary_table=tables[config.INVENTORY_SUMMARY],
    )
    sku = f"bench-{uuid.uuid4().hex[:10]}"
    service.create(sku, units)
    service.header(sku)  # cached, as in a warm Lambda

    def attempt(_: int) -> str:
        try:
            service.reserve(sku, quantity, hold_seconds=600)
            return "ok"
        except OutOfStock:
            return "OUT_OF_STOCK"

    outcome, snapshot = measure(meter, attempts, workers, attempt)
    return row(
        f"claims q={quantity}",
        outcome,
        snapshot,
        ceiling=ceiling,
        useful=outcome.outcomes.get("ok", 0) * quantity,
        requests=attempts,
    )


def main() -> int:
    from bench.harness import markdown, raw_ceiling
    from local import template
    from local.dynamodb_local import DynamoDBLocal
    from turnstile import retry

    loaded = template.load(
        template.TEMPLATE if template.TEMPLATE.exists() else template.synthesize()
    )
    with DynamoDBLocal() as db:
        meter = Meter()
        client = meter.attach(db.client(config=retry.client_config()))
        template.create_tables(client, loaded)
        tables = template.table_names(loaded)
        ceiling = raw_ceiling(client, tables[config.PRODUCTS], "productId", 1000, 100)
        rows = [
            claims_row(client, meter, tables, ceiling=ceiling, quantity=quantity)
            for quantity in (1, 3)
        ]
    print(markdown(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
