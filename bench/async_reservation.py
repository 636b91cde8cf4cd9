"""``python -m bench --only async-reservation``: one reservation of 3 units over 8 pools through
``turnstile_ddb.claims`` and through ``turnstile_ddb.aio.claims``, against DynamoDB Local.

Three stocks: *sparse* (2 free units in each pool, so no pool shows 3 and a reservation reads
every pool, each in its two ranges from a random pivot: the synchronous front door one Query
after another, the asyncio one the first pool's first range, then its second range and the
seven others, one whole-range Query each, in one Gather);
*sparse-hinted* (the same, with one ``PoolHints`` kept across each front door's reservations,
as the service keeps them: the pools known small are read in one range each); and *stocked*
(50 in each: the first pool shows 3, and both read one pool). The two front doors alternate,
one reservation each, one at a time, and every reservation is released (unmeasured) so the
stock stays the same. Rows: p50 and p95 latency of a reservation, DynamoDB calls per
reservation; the ratio async/sync of the p50s in the same run (target for the sparse stocks:
<= 0.5), with the machine's load average beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from local.dynamodb_local import CREDENTIALS
from sim.reserving import create_units
from turnstile_ddb import aio, claims, retry

POOLS = [f"s#{n}" for n in range(8)]
QUANTITY = 3
# free units in each pool, and whether each front door keeps one PoolHints across reservations
STOCKS = {"sparse": (2, False), "sparse-hinted": (2, True), "stocked": (50, False)}
TARGET = 0.5  # async p50 over sync p50, sparse stock
COLUMNS = ["stock", "front_door", "reservations", "p50_ms", "p95_ms", "calls_per_reservation"]
OPERATIONS = frozenset({"query", "get_item", "update_item", "transact_write_items"})
BACKOFF = retry.Backoff(attempts=10, base=0.005, cap=0.05)


class Counted:
    """A client (boto3's or aiobotocore's) counting the operations called through it."""

    def __init__(self, client: Any) -> None:
        self._client, self.calls = client, 0

    def __getattr__(self, name: str) -> Any:
        self.calls += name in OPERATIONS  # not the library's look-ups of ``table`` and the like
        return getattr(self._client, name)


@contextlib.asynccontextmanager
async def async_client(endpoint: str) -> AsyncIterator[Any]:
    session: Any = importlib.import_module("aiobotocore.session")  # the async extra, untyped
    async with session.get_session().create_client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=retry.client_config(),
    ) as client:
        yield client


def _arguments(name: str, hints: claims.PoolHints | None) -> dict[str, Any]:
    now_ms = int(time.time() * 1000)
    return {
        "pools": POOLS,
        "quantity": QUANTITY,
        "holder": lambda lead: name,
        "now_ms": now_ms,
        "until_ms": now_ms + 60_000,
        "options": claims.ReserveOptions(backoff=BACKOFF, hints=hints),
    }


def _row(stock: str, door: str, seconds: list[float], calls: int) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "stock": stock,
        "front_door": door,
        "reservations": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2),
        "calls_per_reservation": round(calls / len(ms), 2),
    }


async def _stock(
    sync_client: Any, endpoint: str, stock: str, reservations: int
) -> list[dict[str, Any]]:
    units = claims.UnitTable(
        f"bench-async-units-{uuid.uuid4().hex[:8]}", "claimable", ("sku", "sk")
    )
    each, hinted = STOCKS[stock]
    create_units(sync_client, units, POOLS, each)
    sync_hints, async_hints = (claims.PoolHints(), claims.PoolHints()) if hinted else (None, None)
    by_sync: Any = Counted(sync_client)
    times: dict[str, list[float]] = {"sync": [], "async": []}
    async with async_client(endpoint) as raw:
        by_async: Any = Counted(raw)
        for n in range(reservations):
            started = time.perf_counter()
            got = claims.reserve(by_sync, units, **_arguments(f"s{n}", sync_hints))
            times["sync"].append(time.perf_counter() - started)
            claims.release(sync_client, units, got.keys, holder=got.holder, backoff=BACKOFF)
            started = time.perf_counter()
            got = await aio.claims.reserve(by_async, units, **_arguments(f"a{n}", async_hints))
            times["async"].append(time.perf_counter() - started)
            claims.release(sync_client, units, got.keys, holder=got.holder, backoff=BACKOFF)
    sync_client.delete_table(TableName=units.table)
    return [
        _row(stock, "sync", times["sync"], by_sync.calls),
        _row(stock, "async", times["async"], by_async.calls),
    ]


def run(sync_client: Any, endpoint: str, reservations: int = 200) -> dict[str, Any]:
    """The rows of both stocks, the sparse stock's ratio and the load around the run."""
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for stock in STOCKS:
        rows += asyncio.run(_stock(sync_client, endpoint, stock, reservations))
    load_after = os.getloadavg()
    p50 = {(r["stock"], r["front_door"]): r["p50_ms"] for r in rows}
    ratios = {stock: round(p50[(stock, "async")] / p50[(stock, "sync")], 3) for stock in STOCKS}
    sparse = [ratio for stock, ratio in ratios.items() if stock.startswith("sparse")]
    return {
        "rows": rows,
        "p50_async_over_sync": ratios,
        "target_sparse": TARGET,
        "met": all(ratio <= TARGET for ratio in sparse),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
    }


def summary(
    result: dict[str, Any], markdown: Callable[[list[dict[str, Any]], list[str]], str]
) -> str:
    ratios = ", ".join(f"{k} {v}" for k, v in result["p50_async_over_sync"].items())
    met = "met" if result["met"] else "NOT met"
    return (
        f"{markdown(result['rows'], COLUMNS)}\n\np50 async/sync: {ratios} (target, sparse "
        f"stocks <= {result['target_sparse']}: {met}); load average "
        f"{result['load_average_before']} before, {result['load_average_after']} after, "
        f"{result['cpus']} CPUs"
    )
