"""The two drivers cannot drift: one simulator seed of the stock workload (sim.stock: versioned
and transact only, faults on) run through the synchronous front doors and through
turnstile_ddb.aio gives the same history, call for call and answer for answer."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from sim import leasing, stock
from sim.mutants import ROOT, mutants
from turnstile_ddb import lease
from turnstile_ddb.aio import lease as aio_lease
from turnstile_ddb.aio import versioned as aio_versioned

SEEDS = range(40)
# The mutants of the ported modules (retry, transact, versioned): each must be killed by the stock
# workload through both drivers, at the same seed (the async column of the mutant table).
PORTED_MUTANTS = ("01", "02", "03", "21", "22")
_PROBE = """
import json, sys
from sim import stock
first = {}
for driver in ("sync", "async"):
    for seed in range(40):
        history, report = stock.run(seed, driver)
        if report.violations:
            first[driver] = [seed, sorted({v.check for v in report.violations})]
            break
print(json.dumps(first))
"""


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seed_gives_one_history_through_either_driver(seed):
    by_sync, sync_report = stock.run(seed, "sync")
    by_async, async_report = stock.run(seed, "async")
    assert by_async == by_sync
    assert sync_report.violations == [] and async_report.violations == []
    assert "# operations" in by_sync and by_sync.count(" ok\n") > 0


def test_a_front_door_that_drifts_is_caught(monkeypatch):
    # Given an async decrement that reads the item before writing (one request more than sync)
    real = aio_versioned.decrement

    async def drifted(client: Any, **arguments: Any) -> Any:
        key, table, backoff = arguments["key"], arguments["table"], arguments["backoff"]
        await aio_versioned.read(client, table, key, backoff)
        return await real(client, **arguments)

    monkeypatch.setattr(aio_versioned, "decrement", drifted)
    # Then some seed's histories differ
    differing = [
        seed for seed in range(5) if stock.run(seed, "sync")[0] != stock.run(seed, "async")[0]
    ]
    assert differing


@pytest.mark.parametrize("number", PORTED_MUTANTS)
def test_a_mutant_of_a_ported_primitive_is_killed_through_both_drivers(number, tmp_path):
    first = _probe_mutant(number, tmp_path, _PROBE)
    assert set(first) == {"sync", "async"}, first
    assert first["sync"] == first["async"]


@pytest.mark.parametrize("seed", range(20))
def test_a_lease_seed_gives_one_history_through_either_driver(seed):
    # Given the lease workload (sim.leasing), when one seed runs through each driver
    by_sync, sync_report = leasing.run(seed, "sync")
    by_async, async_report = leasing.run(seed, "async")
    # Then the histories are the same, call for call, and both are clean
    assert by_async == by_sync
    assert sync_report.violations == [] and async_report.violations == []
    assert "transact_write_items ok" in by_sync


def test_a_lease_front_door_that_drifts_is_caught(monkeypatch):
    # Given an async release that renews first (one request more than the sync release)
    real = aio_lease.Leases.release

    async def drifted(self: Any, held: Any) -> None:
        with contextlib.suppress(lease.LeaseLost):
            await self.renew(held, 1_000)
        await real(self, held)

    monkeypatch.setattr(aio_lease.Leases, "release", drifted)
    # Then some seed's histories differ
    assert any(leasing.run(seed, "sync")[0] != leasing.run(seed, "async")[0] for seed in range(3))


def test_the_lease_checks_catch_a_fence_handed_out_twice(monkeypatch):
    # Given a sync acquisition that reports the fence it found, not the one it wrote
    real = lease.Leases._taken

    def stale(resource: str, write: Any, previous: Any, attempts: int) -> Any:
        taken = real(resource, write, previous, attempts)
        return dataclasses.replace(taken, fence=max(1, taken.fence - 1))

    monkeypatch.setattr(lease.Leases, "_taken", staticmethod(stale))
    # Then the fences check fails on some seed
    reports = [leasing.run(seed, "sync")[1] for seed in range(5)]
    assert any(v.check == "fences unique" for report in reports for v in report.violations)


# The mutants of the lease (ported too) that the lease workload kills: each through both drivers,
# at the same seed. The others (a boundary, a shorter grant, a stale fenced transaction) need the
# simulator's lease workloads with the boundary clock and adversaries, synchronous only so far.
LEASE_MUTANTS = ("09", "11", "13")


@pytest.mark.parametrize("number", LEASE_MUTANTS)
def test_a_lease_mutant_is_killed_through_both_drivers(number, tmp_path):
    probe = _PROBE.replace("from sim import stock", "from sim import leasing")
    first = _probe_mutant(number, tmp_path, probe.replace("stock.run", "leasing.run"))
    assert set(first) == {"sync", "async"}, first
    assert first["sync"] == first["async"]


def _probe_mutant(number: str, tmp_path: Any, probe: str) -> dict[str, Any]:
    """The first seed (and its checks) at which ``probe`` finds a violation through each
    driver, with mutant ``number`` applied to a copy of the library."""
    (mutant,) = mutants([number])
    shutil.copytree(
        ROOT / "functions", tmp_path / "functions", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run(
        ["git", "apply", "--include=functions/*", str(mutant.path)], cwd=tmp_path, check=True
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'functions'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # a bound for a hung run, not a speed claim
        check=True,
    )
    first: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    print(mutant.name, first)
    return first
