"""Dollars per million requests of one route (``infra.cost.per_million``), on rows written for the
test in the shape ``python -m bench --only cost`` writes to bench/results/cost.json."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from infra import cost

PURCHASE: dict[str, Any] = {
    "route": "POST /products/{productId}/purchases",
    "contention": "low",
    "rcu": 0.0,
    "wcu": 2.0,  # the purchase and its idempotency record
    "floor_rcu": 0.0,
    "floor_wcu": 1.0,
    "calls": 2.0,
    "cpu_ms": 4.0,
    "bare_cpu_ms": 3.0,
    "why": "",
}


def test_a_route_costs_its_request_its_duration_by_memory_and_its_units():
    # Given a purchase that writes 2 units and reads 1, 4 ms of CPU and 6 ms of waiting, at 1 GB
    row = {**PURCHASE, "rcu": 1.0}
    bill = cost.per_million(row, memory_mb=1024, wait_ms=Decimal(6))
    # Then 1 GB gets 1024/1769 of a vCPU: 4 ms of CPU take 4 x 1769/1024 ms, plus the wait
    duration = Decimal(4) * Decimal(1769) / Decimal(1024) + 6
    assert bill.duration_ms == duration
    prices = cost.REQUEST_PRICES
    assert bill.api == prices["api_request"].usd
    assert bill.invocations == prices["lambda_request"].usd
    gb_seconds = Decimal(1) * duration / 1000 * 1_000_000
    assert bill.compute == gb_seconds * prices["lambda_gb_second"].usd
    assert bill.reads == 1 * prices["read_unit"].usd
    assert bill.writes == 2 * prices["write_unit"].usd
    assert bill.total == bill.api + bill.invocations + bill.compute + bill.reads + bill.writes
    # With this page's prices: $3.50 + $0.20 + $0.1721... + $0.125 + $1.25
    assert cost.dollars(bill.total) == "$5.25"


def test_cpu_stops_scaling_at_one_vcpu_and_the_wait_never_does():
    row = {**PURCHASE, "cpu_ms": 10.0}
    assert cost.modelled_ms(Decimal(10), Decimal(0), 1769) == 10
    assert cost.modelled_ms(Decimal(10), Decimal(0), 3538) == 10  # one thread: a second vCPU idles
    assert cost.modelled_ms(Decimal(10), Decimal(5), 1769 // 2) > 2 * 10 + 5 - Decimal("0.1")
    half = cost.per_million(row, memory_mb=512, wait_ms=Decimal(0))
    full = cost.per_million(row, memory_mb=1769, wait_ms=Decimal(0))
    # CPU-bound: the same GB-seconds whatever the memory below one vCPU
    assert half.compute == pytest.approx(full.compute, rel=Decimal("0.01"))


@pytest.mark.parametrize(
    "bad",
    [
        {"rcu": -1.0},
        {"cpu_ms": None},
        {"route": ""},
        {"wcu": "two"},
    ],
)
def test_a_row_that_is_not_a_measurement_is_refused(bad: dict[str, Any]):
    with pytest.raises(ValueError):
        cost.per_million({**PURCHASE, **bad}, memory_mb=512, wait_ms=Decimal(1))


def test_every_request_price_has_a_source_and_a_date():
    for price in cost.REQUEST_PRICES.values():
        assert price.source.startswith("https://")
        assert price.read_on == cost.READ_ON
    assert set(cost.REQUEST_PRICES) == {
        "api_request",
        "lambda_request",
        "lambda_gb_second",
        "read_unit",
        "write_unit",
    }


RECORD = {
    "functions": {"products": {"memory_mb": 1024, "cpu_ms_median": 4.0, "wait_ms_median": 6.0}}
}


def test_a_route_table_prices_each_row_with_its_functions_recorded_memory_and_wait():
    table = cost.render_per_million([PURCHASE], RECORD)
    bill = cost.per_million(PURCHASE, memory_mb=1024, wait_ms=Decimal(6))
    (line,) = [row for row in table.splitlines() if PURCHASE["route"] in row]
    assert "| low | 1024 MB |" in line
    assert line.endswith(f"| {cost.dollars(bill.total)} |")


def test_a_route_table_refuses_a_row_of_no_route_of_the_api():
    with pytest.raises(ValueError, match="not a route"):
        cost.render_per_million([{**PURCHASE, "route": "GET /nowhere"}], RECORD)


def page() -> str:
    return (cost.ROOT / "docs" / "cost.md").read_text()


def test_docs_cost_shows_the_memory_chosen_and_the_request_prices():
    record = json.loads(cost.MEMORY_RECORD.read_text())
    assert cost.render_memory(record) in page()
    assert cost.render_prices(cost.REQUEST_PRICES) in page()


def test_docs_cost_shows_the_recorded_route_table():
    rows = json.loads(cost.COST_RECORD.read_text())["routes"]
    record = json.loads(cost.MEMORY_RECORD.read_text())
    assert cost.render_per_million(rows, record) in page()
