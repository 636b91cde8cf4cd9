"""The simulator (sim/): deterministic from its seed, clean on the library as it is, and able to
fail: deliberately broken variants of the library, monkeypatched here, are caught."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sim.ddb import Faults, moto_dynamodb
from sim.model import Model
from sim.run import Config, default_sizes, describe, repro, run_seed, shrink
from sim.workloads import INVENTORY_TABLE, PRODUCTS_TABLE
from turnstile_ddb import (
    _core,
    _lease_item,
    _queue_waiting,
    _sharded_take,
    codec,
    lease,
    transact,
    versioned,
)

# The in-suite seed budget, fixed: CHUNKS tests of SEEDS_PER_CHUNK seeds each (every workload),
# about 30 s on a quiet 2-core machine (make sim SEEDS=N runs more).
SEEDS_PER_CHUNK = 25
CHUNKS = range(8)
ROOT = Path(__file__).resolve().parents[2]
SMALL_FLAGS = ["--buyers", "2", "--holders", "2", "--purchases", "5", "--acquisitions", "3"]


def test_the_same_seed_gives_a_byte_identical_history():
    first = run_seed(11)
    again = run_seed(11)
    assert first.calls > 50 and first.faults > 0
    assert first.history == again.history


def test_a_seed_replays_byte_identically_in_a_fresh_process_with_another_hash_seed():
    """The repro line runs in a new process: string hashing (PYTHONHASHSEED) must not matter."""
    command = [sys.executable, "-m", "sim", "--seed", "5", "--show", *SMALL_FLAGS]
    histories = []
    for hash_seed in ("1", "2"):
        environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
        shown = subprocess.run(
            command, cwd=ROOT, env=environment, capture_output=True, text=True, check=True
        ).stdout
        history, summary = shown.rstrip("\n").rsplit("\n", 1)
        assert summary.startswith("sim: 1 seeds,") and " 0 violations," in summary
        histories.append(history)
    assert histories[0] == histories[1]
    assert histories[0].count("\n") > 40


def test_a_seed_run_after_others_on_one_dynamodb_gives_the_same_history():
    """make sim reuses one DynamoDB for every seed: what ran before must not leak into a seed."""
    small = Config(purchase_clients=2, lease_clients=2, purchases_each=6, leases_each=3)
    shared = Model()
    run_seed(3, small, real=shared)
    after = run_seed(4, small, real=shared)
    assert after.history == run_seed(4, small).history


_IDS = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.mark.parametrize("seed", range(3))
def test_the_model_and_moto_give_the_same_history(seed):
    """A differential test at the level of whole runs: the simulator's in-memory DynamoDB and
    moto's backend answer every call of a faulted run alike, so the histories match call for
    call. Only ids differ (moto draws request ids from the same seeded uuid4), so they are
    masked."""
    # Purchases and leases: the reservation workloads' index reads end their pages where
    # DynamoDB Local does, which moto does not (docs/sim.md); the streams workload reads the
    # model's stream log, which moto has not.
    kinds = {name: size for name, size in default_sizes().items() if name != "edges"}
    config = Config(reservation_clients=0, sizes_by_kind={**kinds, "streams": (0, 0)})
    with moto_dynamodb() as real:
        on_moto = run_seed(seed, config, real=real).history
    on_model = run_seed(seed, config).history
    assert on_model.count("\n") > 100
    assert _IDS.sub("<id>", on_model) == _IDS.sub("<id>", on_moto)


def test_different_seeds_interleave_differently():
    small = Config(purchase_clients=2, lease_clients=2, purchases_each=4, leases_each=2)
    assert run_seed(1, small).history != run_seed(2, small).history


@pytest.mark.parametrize("chunk", CHUNKS)
def test_a_fixed_budget_of_seeds_runs_clean(chunk):
    start = chunk * SEEDS_PER_CHUNK
    for seed in range(start, start + SEEDS_PER_CHUNK):
        result = run_seed(seed)
        assert result.finished, describe(result)
        assert not result.report.violations, describe(result)
        assert result.report.checks > 0


def _first_violations(config: Config, seeds: range) -> list[str]:
    for seed in seeds:
        result = run_seed(seed, config)
        if result.report.violations:
            return [f"{v.pattern}/{v.check}" for v in result.report.violations]
    return []


@pytest.fixture
def unversioned_purchases(monkeypatch):
    """The read-decide-write purchase path (strategy "versioned") losing its version check."""
    real = versioned._update_parts

    def unguarded(*args, **kwargs):
        parts = real(*args, **kwargs)
        parts.pop("ConditionExpression")
        parts["ExpressionAttributeValues"].pop(":expected", None)
        return parts

    monkeypatch.setattr(versioned, "_update_parts", unguarded)


def test_a_purchase_written_without_its_version_condition_is_caught(unversioned_purchases):
    """Lost updates, so the stock no longer adds up (a mutant a 120 s chaos run barely caught)."""
    found = _first_violations(Config(purchase_clients=5, lease_clients=0), range(5))
    assert any(name.startswith("purchases/") for name in found), found


def test_a_failing_seed_is_described_with_its_repro_line(unversioned_purchases):
    config = Config(purchase_clients=5, lease_clients=0)
    result = next(r for r in (run_seed(s, config) for s in range(5)) if r.violations)
    text = describe(result)
    assert f"seed {result.seed}: {result.violations} violation(s)" in text
    assert "[purchases] no oversell" in text or "[purchases] stock accounting" in text
    assert text.splitlines()[-1].strip() == f"repro: {repro(result.seed, config)}"
    assert "--buyers 5 --holders 0" in text.splitlines()[-1]


def test_a_keyed_purchase_committed_without_its_version_condition_is_caught(monkeypatch):
    """Only the transactional path (a keyed purchase: the versioned write and its stored answer in
    one transaction) loses its version check; before this simulator only the short nemesis run
    in make test caught it. (versioned runs transact's protocol, so the mutant is put there: both
    front doors, sync and turnstile_ddb.aio, run it.)"""
    real = transact.transact_write_protocol

    def unversioned(items, **kwargs):
        first = items[0].get("Update", {})
        if first.get("TableName") == PRODUCTS_TABLE and "ConditionExpression" in first:
            values = {k: v for k, v in first["ExpressionAttributeValues"].items()}
            values.pop(":expected", None)
            first = {**first, "ExpressionAttributeValues": values}
            first.pop("ConditionExpression")
            items = [{"Update": first}, *items[1:]]
        return real(items, **kwargs)

    monkeypatch.setattr(transact, "transact_write_protocol", unversioned)
    found = _first_violations(Config(purchase_clients=5, lease_clients=0), range(8))
    assert any(name.startswith("purchases/") for name in found), found


def test_a_failing_seed_shrinks_to_a_smaller_run_that_still_fails(unversioned_purchases):
    start = Config(purchase_clients=4, lease_clients=0, purchases_each=8)
    with contextlib.nullcontext(Model()) as real:
        seed = next(s for s in range(8) if run_seed(s, start, real=real).violations)
        small, result = shrink(seed, start, real=real)
    assert result.violations and result.config == small
    assert small.purchase_clients <= start.purchase_clients
    assert small.purchases_each <= start.purchases_each
    assert small != start
    assert f"--seed {seed} --buyers {small.purchase_clients}" in repro(seed, small)


def test_a_lease_taken_while_its_holder_is_live_is_caught(monkeypatch):
    """An acquisition that ignores the holder's expiry: two live holders at once (what chaos's
    fence-only lease checker cannot see), found by sim.checks.overlapping_holds."""
    monkeypatch.setattr(
        _lease_item,
        "FREE_AND_NO_QUEUE",
        "attribute_not_exists(#resource) OR #expiresAt < :expiresAt",
    )
    found = _first_violations(
        Config(purchase_clients=0, lease_clients=3, faults=Faults.none()), range(5)
    )
    assert "leases/no overlapping holders" in found, found


def test_a_lease_granted_shorter_than_asked_is_caught(monkeypatch):
    """The queued-lease defect's shape: the length granted cut (here to half) by something other
    than the caller's ask, found by sim.checks.granted_as_asked; no fence or overlap breaks."""
    real = lease.Leases.acquire_wait

    def shortened(self, resource, owner, ttl_ms, *args, **kwargs):
        return real(self, resource, owner, ttl_ms // 2, *args, **kwargs)

    monkeypatch.setattr(lease.Leases, "acquire_wait", shortened)
    found = _first_violations(
        Config(purchase_clients=0, lease_clients=2, faults=Faults.none()), range(3)
    )
    assert found and set(found) == {"leases/a granted lease lasts what was asked"}, found


def _reservers_only(**sizes):
    return Config(
        purchase_clients=0, lease_clients=0, reservation_clients=3, sizes_by_kind={}, **sizes
    )


@pytest.fixture
def unguarded_unit_writes(monkeypatch):
    """Every transaction on the units table written without its conditions: a claim no longer
    checks the unit is free, a cancel no longer checks the unit is still its own."""
    real = transact.transact_write_protocol

    def unguarded(items, **kwargs):
        stripped = []
        for item in items:
            ((kind, parts),) = item.items()
            if parts.get("TableName") == INVENTORY_TABLE and "ConditionExpression" in parts:
                parts = {k: v for k, v in parts.items() if k != "ConditionExpression"}
                kept = parts.get("UpdateExpression", "") + " " + str(parts.get("Item", ""))
                values = parts.get("ExpressionAttributeValues", {})
                parts["ExpressionAttributeValues"] = {k: v for k, v in values.items() if k in kept}
                if not parts["ExpressionAttributeValues"]:
                    parts.pop("ExpressionAttributeValues")
                names = parts.get("ExpressionAttributeNames", {})
                parts["ExpressionAttributeNames"] = {k: v for k, v in names.items() if k in kept}
                if not parts["ExpressionAttributeNames"]:
                    parts.pop("ExpressionAttributeNames")
                if kind == "ConditionCheck":
                    continue
            stripped.append({kind: parts})
        return real(stripped, **kwargs)

    # The protocol every transaction runs (the library's own protocols yield from it, and
    # transact_write drives it): patched once, both are stripped.
    monkeypatch.setattr(transact, "transact_write_protocol", unguarded)


def _operations(history):
    """The history's operations: (f, type, value) of each."""
    lines = history.split("# operations\n", 1)[1].split("# final", 1)[0].splitlines()
    return [(row[2], row[6], row[7]) for row in map(json.loads, lines)]


def test_reservations_run_clean_and_do_reach_every_outcome():
    """Not vacuous: reservations are granted and refused, confirmed, cancelled and lapse."""
    seen = set()
    for seed in range(4):
        result = run_seed(seed, _reservers_only())
        assert not result.report.violations, describe(result)
        for f, outcome, value in _operations(result.history):
            seen.add((f, outcome, (value or {}).get("error") if outcome == "fail" else None))
    expected = {
        ("reserve", "ok", None),
        ("reserve", "fail", "OUT_OF_STOCK"),
        ("confirm", "ok", None),
        ("confirm", "fail", "Expired"),
        ("cancel", "ok", None),
    }
    assert expected <= seen, seen


def test_unit_claims_written_without_their_conditions_are_caught(unguarded_unit_writes):
    found = _first_violations(_reservers_only(reservations_each=10), range(6))
    assert any(name.startswith("inventory/") for name in found), found


def test_the_reservation_cost_bound_is_the_documented_one():
    """sim.workloads keeps its own copy of the bounds, so a change to them is a visible one."""
    from service import config
    from sim import workloads
    from turnstile_ddb import claims

    assert workloads.RESERVE_ROUNDS == config.INVENTORY_RESERVE_ROUNDS
    assert workloads.PAGES_PER_POOL == claims.PAGES_PER_POOL


def _only(**sizes):
    """A run of one workload's clients (every other workload's clients left out)."""
    none = {
        "purchase_clients": 0,
        "lease_clients": 0,
        "reservation_clients": 0,
        "sharded_clients": 0,
        "queue_clients": 0,
        "sizes_by_kind": {},
    }
    return Config(**{**none, **sizes})


def test_sharded_products_run_clean_and_do_reach_every_outcome():
    """Not vacuous: sharded purchases succeed, across several shards too, are refused, and
    restocks land among them; the stock accounting was judged."""
    seen = set()
    for seed in range(4):
        result = run_seed(seed, _only(sharded_clients=3, sharded_each=12))
        assert not result.report.violations, describe(result)
        assert result.report.checks >= 4
        for f, outcome, value in _operations(result.history):
            error = (value or {}).get("error") if outcome == "fail" else None
            seen.add((f, outcome, error))
    expected = {
        ("purchase", "ok", None),
        ("purchase", "fail", "OUT_OF_STOCK"),
        ("restock", "ok", None),
    }
    assert expected <= seen, seen


def test_a_take_without_its_per_shard_condition_is_caught(monkeypatch):
    """A sharded take whose writes lost their ``#count >= q`` guard, the one-shard write and the
    transaction over several shards alike: takes on a shard that holds too little (a stale hint,
    a race) drive it below zero."""

    # (the take's protocol builds its requests with these two; the driver sends them)
    def unguarded_one(counter, shard, quantity):
        return _core.Call(
            "update_item",
            dict(
                TableName=counter.table,
                Key=counter.wire_key(shard),
                UpdateExpression="SET #count = #count - :q",
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={"#pk": counter.key_attr, "#count": counter.count_attr},
                ExpressionAttributeValues=codec.values(q=quantity),
                ReturnValues="ALL_NEW",
            ),
        )

    def unguarded(counter, takes):
        return _core.Call(
            "transact_write_items",
            dict(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": counter.table,
                            "Key": counter.wire_key(shard),
                            "UpdateExpression": "SET #count = #count - :take",
                            "ExpressionAttributeNames": {"#count": counter.count_attr},
                            "ExpressionAttributeValues": codec.values(take=take),
                        }
                    }
                    for shard, take in takes.items()
                ],
            ),
        )

    monkeypatch.setattr(_sharded_take, "_decrement", unguarded_one)
    monkeypatch.setattr(_sharded_take, "_decrement_many", unguarded)
    found = _first_violations(
        _only(sharded_clients=4, sharded_each=12, faults=Faults.none()), range(10)
    )
    assert any(name.startswith("sharded/") for name in found), found


def test_the_lease_queue_runs_clean_and_does_reach_every_outcome():
    """Not vacuous: queued waiters are served (some after a pass-over or with renewals), time
    out, plain acquisitions are served and refused, and the FIFO and overtaking checks ran."""
    seen = set()
    notes = []
    for seed in range(4):
        result = run_seed(seed, _only(queue_clients=3, queue_each=5))
        assert not result.report.violations, describe(result)
        notes += result.report.notes
        for row in map(
            json.loads,
            result.history.split("# operations\n", 1)[1].split("# final", 1)[0].splitlines(),
        ):
            f, args, outcome = row[2], row[3], row[6]
            seen.add((f, args.get("role"), outcome))
        assert ":beat " in result.history  # heartbeats ran as clients of their own
    expected = {
        ("acquire", "normal", "ok"),
        ("acquire", "normal", "fail"),
        ("acquire", "plain", "ok"),
        ("acquire", "plain", "fail"),
        ("write", None, "ok"),
    }
    assert expected <= seen, seen
    found = [re.search(r"(\d+) live waiters checked", note) for note in notes]
    checked = [int(match[1]) for match in found if match]
    assert sum(checked) > 0, notes


@pytest.fixture
def eager_pass_over(monkeypatch):
    """A queue whose pass-over takes any head for dead the moment the lease is free: it ignores
    the head's beats, how long it has been the head, and L (both the waiter's decision and the
    write's condition; every name and value is still used, as DynamoDB demands)."""
    monkeypatch.setattr(
        _lease_item,
        "STALE_HEAD",
        "(#expiresAt < :stale OR #expiresAt >= :stale) AND (attribute_not_exists(#releasedAt) "
        "OR #releasedAt <> :stale) AND (attribute_not_exists(#skippedAt) OR #skippedAt <> :stale)",
    )
    monkeypatch.setattr(
        _lease_item,
        "SILENT_HEAD",
        "(attribute_not_exists(#beatTicket) OR #beatTicket = :head OR #beatTicket <> :head "
        "OR attribute_not_exists(#beatAt) OR #beatAt < :stale OR #beatAt >= :stale "
        "OR #acquiredAt < :idle OR #skippedAt < :idle)",
    )
    monkeypatch.setattr(_queue_waiting, "_stale", _always_stale)


def _always_stale(queue, wait, now):
    """The waiter's own decision (a protocol step, turnstile_ddb._queue_waiting): always stale."""
    return True
    yield  # a generator, as the step it replaces


def test_a_queue_that_passes_over_a_live_waiter_is_caught(eager_pass_over):
    found = _first_violations(_only(queue_clients=4, queue_each=5, faults=Faults.none()), range(8))
    assert any(name.startswith("queue/") for name in found), found


class _Counting:
    """A registered workload of the test's own: each client makes ``each`` reads of nothing and
    its check fails when told to, so the test sees its clients run and its report merged."""

    def __init__(self, each: int, fail: bool) -> None:
        self.each, self.fail, self.ran = each, fail, 0

    def setup(self, real):
        pass

    def body(self, recorder, client):
        def run(task):
            for _ in range(self.each):
                task.sleep(0.01)
                self.ran += 1

        return run

    def check(self, recorder, stats, real):
        from chaos.checkers import Report

        report = Report()
        report.expect(not self.fail, "counting", "told to fail", f"ran {self.ran}")
        return report

    def final(self, real):
        return {"ran": self.ran}


def test_a_registered_workload_runs_its_clients_is_judged_and_shrinks_by_its_size():
    from sim.kinds import KINDS, Kind
    from sim.run import repro, shrink

    made: list[_Counting] = []

    def make(each: int, fail: bool = False) -> _Counting:
        made.append(_Counting(each, fail))
        return made[-1]

    KINDS.append(Kind("counting", make, clients=3, each=4))
    try:
        result = run_seed(1, _only(sizes_by_kind={"counting": (3, 4)}))
        assert result.violations == 0
        assert made[-1].ran == 12
        assert '"counting": {"ran": 12}' in result.history
        KINDS[-1] = Kind("counting", lambda each: make(each, fail=True), clients=3, each=4)
        config, small = shrink(1, _only(sizes_by_kind={"counting": (3, 4)}))
        assert small.violations == 1
        assert config.sizes_by_kind == {"counting": (1, 1)}
        assert "--size counting=1:1" in repro(1, config)
    finally:
        KINDS.pop()


def test_a_long_run_prints_its_summary_so_far_on_stderr(monkeypatch, capsys):
    import sim.__main__ as cli

    monkeypatch.setattr(cli, "PROGRESS_SECONDS", 0.0)
    assert cli.main(["--seeds", "2", *SMALL_FLAGS, "--size", "streams=0:0"]) == 0
    captured = capsys.readouterr()
    progress = captured.err.splitlines()
    assert [line.split(",")[0] for line in progress] == ["sim: 1 seeds", "sim: 2 seeds"]
    assert all(line.endswith("(of 2)") for line in progress)
    assert captured.out.splitlines()[-1].startswith("sim: 2 seeds,")


_FAST_REAL_CLOCKS = """
import hashlib, sys, time
# Real clocks a thousand times fast, installed before the library is imported (its defaults
# bind time.monotonic and time.time when its modules load): a simulated client that reads a
# real clock anywhere then decides differently.
monotonic, wall = time.monotonic, time.time
start_m, start_w = monotonic(), wall()
if sys.argv[2] == "fast":
    time.monotonic = lambda: start_m + (monotonic() - start_m) * 1000
    time.time = lambda: start_w + (wall() - start_w) * 1000
from sim.run import run_seed
print(hashlib.sha256(run_seed(int(sys.argv[1])).history.encode()).hexdigest())
"""


def test_no_simulated_client_reads_a_real_clock():
    """Virtual time only: with the process's real clocks running a thousand times fast, a seed's
    history is the same (a hint or cache left on the real clock once made a history depend on
    how long the run took in wall time)."""
    environment = {**os.environ, "PYTHONPATH": f"{ROOT / 'functions'}{os.pathsep}{ROOT}"}
    digests = {
        speed: subprocess.run(
            [sys.executable, "-c", _FAST_REAL_CLOCKS, "3", speed],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for speed in ("real", "fast")
    }
    assert digests["real"] == digests["fast"]
