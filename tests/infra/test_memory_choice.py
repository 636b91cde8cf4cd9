"""Each API function's memory size is the one ``python -m bench --only memory --record-memory``
chose and recorded in bench/memory.json; and the choice is the cheapest setting whose modelled
p99 stays within 10% of the best (``bench.memory``), shown on samples written for the test."""

from __future__ import annotations

import json
from decimal import Decimal

from bench import memory
from infra import cost
from service import catalog


def recorded() -> dict[str, int]:
    found = json.loads(memory.CHOICE.read_text())["functions"]
    return {name: int(entry["memory_mb"]) for name, entry in found.items()}


def test_every_api_function_has_the_memory_its_measurement_chose():
    chosen = recorded()
    assert set(chosen) == {spec.name for spec in catalog.API_FUNCTIONS}
    assert {name: catalog.spec(name).memory_mb for name in chosen} == chosen


def test_the_synthesized_functions_have_the_catalogs_memory(template):
    by_handler = {
        r["Properties"]["Handler"]: r["Properties"].get("MemorySize")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    for spec in catalog.API_FUNCTIONS + catalog.STREAM_CONSUMERS:
        assert by_handler[spec.handler] == spec.memory_mb, spec.name


def test_a_cpu_bound_function_gets_memory_a_waiting_one_does_not():
    # Given a function that computes for 20 ms and one that waits 40 ms on DynamoDB for 0.5 ms of
    # CPU (both measured on a whole core)
    computing = [memory.Sample(cpu_ms=20.0, duration_ms=21.0)] * 100
    waiting = [memory.Sample(cpu_ms=0.5, duration_ms=40.5)] * 100
    # When each setting is modelled and the choice made
    computed = memory.choose(memory.model(computing))
    waited = memory.choose(memory.model(waiting))
    # Then the computing one needs (nearly) a whole vCPU to stay within 10% of its best p99,
    # while the waiting one is within 10% at far less memory, which costs less
    assert computed >= 1536
    assert waited <= 256
    for rows, chosen in ((memory.model(computing), computed), (memory.model(waiting), waited)):
        best = min(r["p99_ms"] for r in rows)
        (row,) = [r for r in rows if r["memory_mb"] == chosen]
        assert row["p99_ms"] <= best * Decimal("1.1")
        cheaper = [r for r in rows if r["usd_per_million"] < row["usd_per_million"]]
        assert all(r["p99_ms"] > best * Decimal("1.1") for r in cheaper)


def test_a_setting_is_modelled_by_the_stretched_cpu_plus_the_wait():
    rows = memory.model([memory.Sample(cpu_ms=10.0, duration_ms=15.0)], settings=(512,))
    expected = cost.modelled_ms(Decimal(10), Decimal(5), 512)
    assert rows[0]["p99_ms"] == rows[0]["mean_ms"] == expected
