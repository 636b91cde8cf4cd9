"""Flash-sale workload on item-level claims: ``attempts`` reservations of ``quantity`` units from
``workers`` threads on ``units`` units of one sku, against DynamoDB Local.

``make bench`` runs it beside the single-counter strategies (``bench.products``) in the same run,
for quantity 1 and 3; ``python -m bench.inventory`` runs the claims alone on its own DynamoDB Local.
Calls and consumed write capacity are counted by :class:`bench.harness.Meter` (a failed
conditional write is billed one WCU, as on AWS).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.harness import Meter, measure, row
from service import config
from service.domain.errors import OutOfStock
from service.domain.inventory import Inventory, pools_for, unit_key
from turnstile_ddb import claims, codec


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
        pool_hints=claims.PoolHints(),  # as the function's wiring builds it
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


def creation_row(
    client: Any,
    streams: Any,
    tables: Mapping[str, str],
    units: int = 100_000,
    environment: Mapping[str, str] | None = None,
) -> dict:
    """``POST /inventory`` of a large sku: how long until the answer, and until every unit exists
    (reservable), with the creation worker fed by the stream through the local pump (filtered as
    the deployed mapping is, its invocations told the deployed timeout). ``environment``: what
    the local stack gives its functions (``DynamoDBLocal.environment``: unpaced creation)."""
    from local.pump import StreamPump
    from service import catalog
    from service.domain.inventory import CREATION_FILTER
    from service.handlers import inventory_creator

    service = Inventory(
        client=client,
        table=tables[config.INVENTORY],
        summary_table=tables[config.INVENTORY_SUMMARY],
        create_units_per_second=config.inventory_create_pace(environment),
    )
    inventory_creator.inventory.set(service)
    pump = StreamPump(
        dynamodb=client,
        streams=streams,
        table=tables[config.INVENTORY],
        handler=inventory_creator.handler,
        batch_size=1,
        filters=(CREATION_FILTER,),
        timeout_seconds=catalog.spec("inventorycreator").timeout_seconds,
    )
    pump.drain(timeout=600)  # skip what earlier sections left in the stream
    sku = f"bench-large-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    pumping = threading.Thread(target=pump.run, args=(stop,), kwargs={"interval": 0.05})
    pumping.start()
    try:
        started = time.perf_counter()
        answer = service.create(sku, units)
        answered = time.perf_counter() - started
        progress = [answer]
        while progress[-1]["status"] != "READY" and time.perf_counter() - started < 900:
            time.sleep(0.5)
            progress.append(service.summary(sku))
        ready = time.perf_counter() - started
    finally:
        stop.set()
        pumping.join()
    exact = service.exact(sku)
    floor = write_floor(service, units)
    unsafe = write_floor(service, units, conditional=False)
    return {
        "strategy": f"POST /inventory {units} units",
        "answer_s": round(answered, 3),
        "answer_status": answer["status"],
        "all_units_reservable_s": round(ready, 1),
        "units_per_second_paced": service.create_pace() or "unpaced",
        "writes_alone_s": round(floor, 1),
        "over_writes_alone": round(ready / floor, 2),
        "unconditional_batch_writes_s": round(unsafe, 1),
        "units_counted": exact["available"] + exact["reserved"] + exact["sold"],
        "status": progress[-1]["status"],
    }


def write_floor(service: Inventory, units: int, *, conditional: bool = True) -> float:
    """Seconds DynamoDB Local takes for the writes alone that a creation of ``units`` needs: the
    same units, as the worker's 100-put conditional transactions from as many threads, unpaced,
    without steps, progress records or a stream to wait on. Run after the creation (on a JVM it
    warmed), so it is a floor under the creation's time, not a fair race with it.

    ``conditional=False``: the same units as unconditional ``BatchWriteItem`` puts of 25, the
    cheapest write DynamoDB Local takes, which the worker must not use (a late, repeated batch
    would reset a unit someone holds): how much of the creation's time is the price of writing
    only units that do not exist yet."""
    sku = f"bench-floor-{uuid.uuid4().hex[:8]}"
    pools = pools_for(units)
    items = []
    for number in range(units):
        key = unit_key(sku, number, pools)
        items.append(claims.new_unit(service.units, key, key["sku"], claims.new_claimable_at()))
    size = 100 if conditional else 25
    batches = [items[i : i + size] for i in range(0, len(items), size)]

    def unconditional(batch: list[dict[str, Any]]) -> None:
        pending = [{"PutRequest": {"Item": codec.encode_item(item)}} for item in batch]
        while pending:
            answer = service.client.batch_write_item(RequestItems={service.table: pending})
            pending = answer.get("UnprocessedItems", {}).get(service.table, [])

    write = service._put_new if conditional else unconditional  # the worker's own write
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=service.writers) as pool:
        list(pool.map(write, batches))
    return time.perf_counter() - started


def main() -> int:
    from bench.harness import markdown, raw_ceiling
    from local import template
    from local.dynamodb_local import DynamoDBLocal
    from turnstile_ddb import retry

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
