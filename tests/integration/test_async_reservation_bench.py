"""``python -m bench --only async-reservation`` in short: a few reservations of each stock through
both front doors against DynamoDB Local, checked for the shape of what it reports (its rows, the
calls they counted, the ratios and the load beside them), never for its times."""

from __future__ import annotations

import pytest

from bench import async_reservation

pytest.importorskip("aiobotocore.session")


def test_the_async_reservation_bench_reports_every_stock_through_both_front_doors(
    ddb, dynamodb_local
):
    result = async_reservation.run(ddb, dynamodb_local.endpoint, reservations=3)
    print(async_reservation.summary(result, lambda rows, columns: str(rows)))
    rows = {(r["stock"], r["front_door"]): r for r in result["rows"]}
    assert set(rows) == {(s, d) for s in async_reservation.STOCKS for d in ("sync", "async")}
    assert all(
        list(r) == async_reservation.COLUMNS and r["reservations"] == 3 for r in rows.values()
    )
    # a sparse stock is read whole through either door: the sync one reads each pool's two
    # ranges, then writes; the asyncio one the first pool's two ranges and each of the seven
    # others in one Query over its whole range (split at its pivot), then writes
    assert rows[("sparse", "sync")]["calls_per_reservation"] == 8 * 2 + 1
    assert rows[("sparse", "async")]["calls_per_reservation"] == 2 + 7 + 1
    hinted = [rows[("sparse-hinted", door)]["calls_per_reservation"] for door in ("sync", "async")]
    assert hinted[1] <= hinted[0] < 8 * 2 + 1  # the pools known small: one range each
    assert set(result["p50_async_over_sync"]) == set(async_reservation.STOCKS)
    assert isinstance(result["met"], bool) and len(result["load_average_before"]) == 3
