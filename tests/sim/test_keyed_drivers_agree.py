"""The two drivers cannot drift on the idempotency store: one simulator seed of the keyed
workload (sim.keyed: begins, takeovers after a short lock, completions, releases and reused keys,
faults on) run through the synchronous store and through turnstile_ddb.aio's gives the same
history, call for call; and the store's mutants are killed through both, at the same seed."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from sim import keyed
from tests.sim.test_drivers_agree import _PROBE, _probe_mutant

SEEDS = range(30)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_keyed_seed_gives_one_history_through_either_driver(seed):
    by_sync, sync_report = keyed.run(seed, "sync")
    by_async, async_report = keyed.run(seed, "async")
    assert by_async == by_sync
    assert sync_report.violations == [] and async_report.violations == []


def test_the_keyed_workload_reaches_takeovers_replays_and_refusals():
    # Over the seeds, every outcome the checks judge happens (else they could not fail)
    seen: Counter[str] = Counter()
    for seed in SEEDS:
        history, _ = keyed.run(seed, "sync")
        owners: dict[str, set[str]] = {}
        for line in history.splitlines():
            if not line.startswith("["):
                continue
            op = json.loads(line)
            value = op[7] or {}
            if op[2] == "begin" and "token" in value:
                owners.setdefault(op[3]["key"], set()).add(op[1])
            seen["replay"] += "replay" in value
            seen[str(value.get("error"))] += "error" in value
            seen[f"complete {value.get('completed')}"] += op[2] == "complete" and op[6] == "ok"
        seen["taken over"] += sum(len(processes) > 1 for processes in owners.values())
    assert seen["replay"] and seen["KeyReused"] and seen["StillRunning"], seen
    assert seen["taken over"] and seen["complete True"] and seen["complete False"], seen


@pytest.mark.parametrize("number", ["20", "29"])
def test_an_idempotency_mutant_is_killed_through_both_drivers(number, tmp_path):
    probe = _PROBE.replace("from sim import stock", "from sim import keyed")
    first = _probe_mutant(number, tmp_path, probe.replace("stock.run", "keyed.run"))
    assert set(first) == {"sync", "async"}, first
    assert first["sync"] == first["async"]
