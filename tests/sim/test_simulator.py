"""The simulator (sim/): deterministic from its seed, clean on the library as it is, and able to
fail: deliberately broken variants of the library, monkeypatched here, are caught."""

from __future__ import annotations

import pytest

from sim.ddb import Faults, moto_dynamodb
from sim.run import Config, run_seed
from turnstile_ddb import lease, versioned

# The in-suite seed budget: small, fixed (make sim SEEDS=N runs more).
SEEDS = range(6)


def test_the_same_seed_gives_a_byte_identical_history():
    first = run_seed(11)
    again = run_seed(11)
    assert first.calls > 50 and first.faults > 0
    assert first.history == again.history


def test_a_seed_run_after_others_on_one_moto_gives_the_same_history():
    """make sim reuses one moto for every seed: what ran before must not leak into a seed."""
    with moto_dynamodb() as real:
        run_seed(3, real=real)
        after = run_seed(4, real=real)
    assert after.history == run_seed(4).history


def test_different_seeds_interleave_differently():
    assert run_seed(1).history != run_seed(2).history


@pytest.mark.parametrize("seed", SEEDS)
def test_a_fixed_budget_of_seeds_runs_clean(seed):
    result = run_seed(seed)
    assert result.finished
    assert not result.report.violations, [v.message for v in result.report.violations]
    assert result.report.checks > 0


def _first_violations(config: Config, seeds: range) -> list[str]:
    for seed in seeds:
        result = run_seed(seed, config)
        if result.report.violations:
            return [f"{v.pattern}/{v.check}" for v in result.report.violations]
    return []


def test_a_purchase_written_without_its_version_condition_is_caught(monkeypatch):
    """The read-decide-write purchase path (strategy "versioned") losing its version check: lost
    updates, so the stock no longer adds up (a mutant issue 32 says chaos barely caught)."""
    real = versioned._update_parts

    def unguarded(*args, **kwargs):
        parts = real(*args, **kwargs)
        parts.pop("ConditionExpression")
        parts["ExpressionAttributeValues"].pop(":expected", None)
        return parts

    monkeypatch.setattr(versioned, "_update_parts", unguarded)
    found = _first_violations(Config(purchase_clients=5, lease_clients=0), range(5))
    assert any(name.startswith("purchases/") for name in found), found


def test_a_lease_taken_while_its_holder_is_live_is_caught(monkeypatch):
    """An acquisition that ignores the holder's expiry: two live holders at once (what chaos's
    fence-only lease checker cannot see), found by sim.checks.overlapping_holds."""
    monkeypatch.setattr(
        lease, "FREE_AND_NO_QUEUE", "attribute_not_exists(#resource) OR #expiresAt < :expiresAt"
    )
    found = _first_violations(
        Config(purchase_clients=0, lease_clients=3, faults=Faults.none()), range(5)
    )
    assert "leases/no overlapping holders" in found, found
