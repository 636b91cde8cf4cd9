"""The lease's edges through both drivers: one simulator seed of the edges workload (sim.edges:
overstaying holders, duplicated fenced writes, intruders, successors at the expiry instant,
faults on) gives the same history through the synchronous Leases and through aio's, clean; and
the lease mutants only the simulator's synchronous adversaries caught before are killed through
both drivers, at the same seed."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from sim import edges
from tests.sim.test_drivers_agree import _PROBE, _probe_mutant

SEEDS = range(30)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_edges_seed_gives_one_history_through_either_driver(seed):
    by_sync, sync_report = edges.run(seed, "sync")
    by_async, async_report = edges.run(seed, "async")
    assert by_async == by_sync
    assert sync_report.violations == [] and async_report.violations == []


def test_the_edges_workload_reaches_every_edge_it_judges():
    # Over the seeds, each judged case happens (else its check could not fail)
    seen: Counter[tuple[str, str, str]] = Counter()
    for seed in SEEDS:
        history, _ = edges.run(seed, "sync")
        for line in history.splitlines():
            if line.startswith("[") and '", "' in line:
                op = json.loads(line)
                if isinstance(op[3], dict) and len(op) > 7:
                    error = (op[7] or {}).get("error", "") if isinstance(op[7], dict) else ""
                    late = "late" if op[3].get("late") else ""
                    seen[(op[2], op[6], error or late)] += 1
    assert seen[("acquire", "ok", "")] and seen[("fenced", "fail", "StaleFence")], seen
    assert seen[("transact", "fail", "LeaseLost")] and seen[("transact", "ok", "")], seen
    assert seen[("intrude", "fail", "LeaseLost")] and seen[("at-expiry", "fail", "Held")], seen


@pytest.mark.parametrize("number", ["10", "12", "14", "15", "27"])
def test_a_lease_edge_mutant_is_killed_through_both_drivers(number, tmp_path):
    probe = _PROBE.replace("from sim import stock", "from sim import edges")
    first = _probe_mutant(number, tmp_path, probe.replace("stock.run", "edges.run"))
    assert set(first) == {"sync", "async"}, first
    assert first["sync"] == first["async"]
