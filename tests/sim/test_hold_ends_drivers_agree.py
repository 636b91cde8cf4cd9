"""The two drivers cannot drift at a hold's end: one simulator seed of the hold-ends workload
(sim.hold_ends: confirms read at exactly a hold's end, claims answered after it or at its very
millisecond, faults on) gives the same history, call for call, through the synchronous front door
and the asyncio one; the episodes reach their boundaries; and the mutants of those boundaries
are killed through both drivers at the same seed (the async column of the mutant table)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sim import hold_ends
from tests.sim.test_drivers_agree import _PROBE, _probe_mutant

SEEDS = range(20)
# The confirm at the end (06), the claim answered after the end (26), and at its millisecond (28).
HOLD_END_MUTANTS = ("06", "26", "28")


def _ops(history: str) -> list[list[Any]]:
    """The rendered history's operations: [id, process, f, args, invoked, completed, type,
    value, ...] each."""
    lines = history.split("# operations\n", 1)[1].splitlines()
    return [json.loads(line) for line in lines if line.startswith("[")]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_hold_ends_seed_gives_one_history_through_either_driver(seed):
    by_sync, sync_report = hold_ends.run(seed, "sync")
    by_async, async_report = hold_ends.run(seed, "async")
    assert by_async == by_sync
    assert sync_report.violations == [] and async_report.violations == []


def test_the_episodes_reach_the_hold_ends():
    # Given the operations of the first seeds
    ops = [op for seed in range(10) for op in _ops(hold_ends.run(seed, "sync")[0])]
    # Then confirms were sent at exactly their hold's end, and refused
    reserved = {op[7]["reservationId"]: op[7] for op in ops if op[2] == "reserve" and op[6] == "ok"}
    at_end = [
        op
        for op in ops
        if op[2] == "confirm" and op[3]["now"] == reserved[op[3]["reservation"]]["expiresAt"]
    ]
    assert at_end and all(op[7] == {"error": "HoldLost"} for op in at_end)
    # And claims read the clock at exactly the end they wrote, and were given back
    landed = [op for op in ops if op[2] == "reserve" and op[3].get("end", 0) == op[3].get("read")]
    assert landed and all(op[6] != "ok" for op in landed)
    assert any(op[7] == {"error": "ClaimHoldLapsed"} for op in landed)
    # And stalled claims were answered after their end, and were given back too
    late = [op for op in ops if op[2] == "reserve" and "end" not in op[3] and op[6] == "fail"]
    assert any(op[7] == {"error": "ClaimHoldLapsed"} for op in late)
    print(f"{len(at_end)} confirms and {len(landed)} claims at the end, {len(late)} late refusals")


@pytest.mark.parametrize("number", HOLD_END_MUTANTS)
def test_a_hold_end_mutant_is_killed_through_both_drivers(number, tmp_path):
    probe = _PROBE.replace("from sim import stock", "from sim import hold_ends")
    first = _probe_mutant(number, tmp_path, probe.replace("stock.run", "hold_ends.run"))
    assert set(first) == {"sync", "async"}, first
    assert first["sync"] == first["async"]
