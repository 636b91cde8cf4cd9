"""The adversarial clients (sim/adversary.py) and the boundary clock (sim/boundary.py) reach the
moments they are for, and their properties (sim.checks) judge what they say."""

from __future__ import annotations

import json
from collections import Counter

from chaos.history import FAIL, OK, Op
from sim import checks
from sim.run import Config, describe, run_seed
from sim.scheduler import EPOCH


def _only(sizes_by_kind: dict[str, tuple[int, int]]) -> Config:
    """A configuration running only the registered kinds named (none of the first five)."""
    return Config(
        purchase_clients=0,
        lease_clients=0,
        reservation_clients=0,
        sharded_clients=0,
        queue_clients=0,
        sizes_by_kind=sizes_by_kind,
    )


def _rows(config: Config, seeds: range) -> list[list]:
    rows = []
    for seed in seeds:
        result = run_seed(seed, config)
        assert not result.report.violations, describe(result)
        text = result.history.split("# operations\n", 1)[1].split("# final", 1)[0]
        rows += [json.loads(line) for line in text.splitlines()]
    return rows


def test_the_adversaries_run_clean_and_reach_their_moments():
    """Not vacuous: holders release at exactly their lease's expiry (accepted); intruders
    present fences, some at exactly the holder's expiry, and are all refused; successors begin
    at exactly a lock's end (refused), then take the claim over; first owners complete after a
    takeover and are refused."""
    seen: Counter[str] = Counter()
    for _, process, f, args, _, _, outcome, value, *_ in _rows(
        _only({"adversary": (2, 4)}), range(6)
    ):
        role = process.partition(":")[2]
        exact = args.get("seek") is not None and args.get("now") == args["seek"]
        error = value.get("error") if isinstance(value, dict) else None
        if role == "" and f == "release":
            seen["release at the expiry, accepted"] += exact and outcome == "ok"
        elif role == "intruder":
            assert outcome != "ok", (process, f, args)
            seen["intrusion"] += 1
            seen["intrusion at the expiry"] += exact
        elif role == "successor" and f == "begin":
            seen["begin at the lock's end, refused"] += exact and error == "StillRunning"
            seen["takeover"] += outcome == "ok"
        elif f == "complete" and args.get("first"):
            seen["late completion refused"] += outcome == "fail"
    assert seen["intrusion"] >= 20 and seen["intrusion at the expiry"] >= 5, seen
    assert seen["release at the expiry, accepted"] >= 5, seen
    assert seen["begin at the lock's end, refused"] >= 5, seen
    assert seen["takeover"] >= 5 and seen["late completion refused"] >= 5, seen


def test_a_claims_first_reading_after_its_write_lands_on_the_hold_it_wrote():
    """The edges' "answered at the end" episode: the reading lands on exactly the ``holdUntil``
    the claim wrote, and that hold is given back (``HOLD_LAPSED``), never answered as held.
    (Mutant 28 answers it as held: ``sim.checks.live_on_arrival`` reports it.)"""
    landed = 0
    config = _only({"edges": (2, 5)})
    for row in _rows(config, range(4)):
        args, outcome, value = row[3], row[6], row[7]
        if row[2] == "reserve" and "end" in args and args["read"] == args["end"]:
            assert outcome != "ok", row  # unknown when giving the units back lost its reply
            landed += value == {"error": "HOLD_LAPSED"}
    assert landed >= 3


def _op(process: str, f: str, args: dict, outcome: str, value=None, at=0.0, took=0.01) -> Op:
    op = Op(0, "adversary", process, f, args, EPOCH + at, int((EPOCH + at) * 1000))
    op.type, op.value, op.completed = outcome, value, EPOCH + at + took
    return op


def _intrusion(outcome: str) -> Op:
    args = {"resource": "r", "fence": 3, "owner": "a0/r", "now": 5}
    return _op("a1:intruder", "renew", args, outcome, {"fence": 3, "expiresAt": 9})


def test_an_intruders_call_acknowledged_is_a_violation():
    assert not checks.intruders_refused([_intrusion(FAIL)]).violations
    assert checks.intruders_refused([_intrusion(OK)]).violations


def _begin(process: str, now: int, at: float = 0.0, locked: int = 1300) -> Op:
    value = {"token": process, "lockedUntil": locked}
    return _op(process, "begin", {"key": "k", "now": now}, OK, value, at=at)


def test_a_takeover_at_the_locks_very_millisecond_is_a_violation():
    first = _begin("a0", 1000)
    assert checks.takeovers_after_lock([first, _begin("a0:successor", 1300)]).violations
    assert not checks.takeovers_after_lock([first, _begin("a0:successor", 1301)]).violations


def test_a_first_owner_completing_after_an_acknowledged_takeover_is_a_violation():
    first, takeover = _begin("a0", 1000), _begin("a0:successor", 1301, at=1.0)

    def late(at: float) -> Op:
        return _op("a0", "complete", {"key": "k", "first": True}, OK, True, at=at)

    assert checks.late_completions([first, takeover, late(1.2)]).violations
    # sent before the takeover was answered: it may have come first
    assert not checks.late_completions([first, takeover, late(1.005)]).violations
    refused = _op("a0", "complete", {"key": "k", "first": True}, FAIL, False, at=1.2)
    assert not checks.late_completions([first, takeover, refused]).violations


def test_a_holders_release_refused_while_its_lease_was_live_is_a_violation():
    def release(now: int, error: str = "LeaseLost") -> Op:
        args = {"resource": "r", "holder": True, "expiresAt": 1000, "now": now}
        return _op("a0", "release", args, FAIL, {"error": error})

    assert checks.live_releases([release(1000)]).violations
    assert not checks.live_releases([release(1001)]).violations
    assert not checks.live_releases([release(1000, "RetriesExhausted")]).violations
