"""The mutant set (tests/mutants/*.patch, docs/mutants.md) stays usable and the simulator keeps
killing the mutants it can see.

Every patch must apply to the current tree, or it silently stops testing anything. Each mutant in
:data:`SIM_KILLED` is applied to a temporary copy of ``functions/`` and run under the simulator
(``sim.run.run_seed``) in a subprocess whose ``PYTHONPATH`` puts that copy first; it must show a
violation of the named workload within a few seeds. :data:`NOT_SIM_KILLABLE` says, for every
other mutant, which property or workload the simulator lacks (``python -m sim.mutants`` measures
what the other layers catch).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sim.mutants import Mutant, applies, mutants

ROOT = Path(__file__).resolve().parents[2]

# mutant name -> the workload whose checks must report it (sim.run's violation ``pattern``).
SIM_KILLED: dict[str, str | tuple[str, ...]] = {
    "01-versioned-version-check-dropped": "purchases",
    "02-keyed-purchase-unversioned": "purchases",
    "03-decrement-unchecked": "purchases",
    "04-claim-ignores-unit-free": "inventory",
    "05-release-frees-others-units": "inventory",
    "06-hold-expiry-boundary": "inventory",
    "07-sharded-multi-take-unchecked": "sharded",
    "08-sharded-shard-overdrawn": "sharded",
    "09-lease-acquire-ignores-expiry": "leases",
    "10-lease-expiry-boundary": "leases",
    "11-lease-fence-not-incremented": "leases",
    "12-lease-granted-shorter": "leases",
    "13-lease-release-any-owner": "leases",
    "14-fenced-transact-after-expiry": "leases",
    "15-fenced-update-same-fence": "fenced",
    "17-capacity-limit-dropped": "registrations",
    "18-capacity-off-by-one": "registrations",
    "19-slot-booked-twice": "slots",
    "20-idempotency-other-fingerprint": "idempotency",
    "21-retry-resends-non-idempotent": "purchases",  # and slots: a release resent
    "22-transact-fresh-token": "purchases",  # the lease queue and the leases see it too
    # The retry layer under every workload: whichever meets it first (not "sim", an exception).
    "23-lost-reply-not-applied": ("purchases", "leases", "queue", "inventory", "registrations"),
    "24-inventory-view-hold-boundary": "inventory",
    "25-summary-counts-redelivered-twice": "inventory",
    "26-claim-answered-after-hold-ended": "inventory",
    # Issue 39: bugs no client acted on until the adversarial clients and the boundary clock.
    "27-lease-renew-any-owner": "adversary",  # an intruder's renewal acknowledged
    "28-claim-hold-end-still-live": "inventory",  # the edges' "answered at the end" episode
    "29-idempotency-complete-after-takeover": "adversary",  # a late first owner's completion
    # Resizing a sharded counter online: the resizing workload's checks.
    "30-sharded-read-accepts-stale-layout": "resizing",  # shards left past N, a total wrong
    "31-resize-moved-units-counted-twice": "resizing",  # the total grows by a grow's moves
    "32-resize-shrink-drops-nonempty-shard": "resizing",  # a join or a sale on a dropped shard
    "33-resize-generation-unchecked": "resizing",  # two resizes answer one generation
}

# mutant name -> why the simulator does not kill it (yet).
NOT_SIM_KILLABLE = {
    "16-queue-pass-over-ignores-beat": (
        "the beat clause never decides for a head that is live by the queue's timing; "
        "tests/integration/test_lease_queue_beat.py builds the interleaving where it does"
    ),
}

# Seeds tried per mutant (each stops at the first seed its named workload reports it). 45: the
# resize mutants are narrow kills (32, a shrink dropping a non-empty shard, first at seed 35 of
# the default configuration once leaves gave places back at other shards and the draws shifted).
SEEDS = 45

_PROBE = """
import json, sys
from sim.run import Config, run_seed
seen = set()
for seed in range(int(sys.argv[1])):
    result = run_seed(seed, Config())
    seen |= {v.pattern for v in result.report.violations}
    if seen & set(sys.argv[2:]):
        break
print(json.dumps(sorted(seen)))
"""


def test_every_patch_applies_to_the_current_tree():
    found = mutants()
    assert len(found) >= 20
    refused = {m.name: applies(m).stderr.strip() for m in found if applies(m).returncode != 0}
    assert not refused, refused


def test_every_patch_says_its_bug_and_is_classified():
    for mutant in mutants():
        assert mutant.path.read_text().startswith("# "), mutant.name
        assert mutant.bug, mutant.name
    names = {m.name for m in mutants()}
    assert names == set(SIM_KILLED) | set(NOT_SIM_KILLABLE)
    assert not set(SIM_KILLED) & set(NOT_SIM_KILLABLE)


def _violated_patterns(mutant: Mutant, scratch: Path, expected: tuple[str, ...]) -> list[str]:
    """The workloads with violations under ``mutant``, over the seeds up to the first one in
    which one of ``expected`` reports one (or all of them): the other workloads' checks may see the
    same bug first, and which seed that is moves whenever a workload changes."""
    shutil.copytree(
        ROOT / "functions", scratch / "functions", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run(
        ["git", "apply", "--include=functions/*", str(mutant.path)], cwd=scratch, check=True
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{scratch / 'functions'}{os.pathsep}{ROOT}",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(SEEDS), *expected],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # a bound for a hung run, not a speed claim: 30 seeds take seconds
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("name", sorted(SIM_KILLED))
def test_the_simulator_kills_the_mutant(name, tmp_path):
    (mutant,) = mutants([name])
    named = SIM_KILLED[name]
    expected = (named,) if isinstance(named, str) else named
    assert set(expected) & set(_violated_patterns(mutant, tmp_path, expected))
