"""The signup workload (sim/signup.py) reaches its limits, and its properties (sim/checks.py) can
fail. (tests/sim/test_mutants.py shows the simulator killing a capacity row that ignores its limit
or lets one more in, and a slot booked over its holder.)"""

from __future__ import annotations

import json

from chaos.history import FAIL, OK, UNKNOWN, Op
from sim import checks
from sim.run import Config, describe, run_seed


def _signup_only(clients: int = 4, each: int = 8) -> Config:
    return Config(
        purchase_clients=0,
        lease_clients=0,
        reservation_clients=0,
        sharded_clients=0,
        queue_clients=0,
        sizes_by_kind={"signup": (clients, each)},
    )


def test_signup_runs_clean_and_does_reach_every_outcome():
    """Not vacuous: both events fill up (the sharded one too) and refuse, a user already
    registered is refused, seats are cancelled, slots run out and are released."""
    seen = set()
    for seed in range(4):
        result = run_seed(seed, _signup_only())
        assert not result.report.violations, describe(result)
        lines = result.history.split("# operations\n", 1)[1].split("# final", 1)[0].splitlines()
        for row in map(json.loads, lines):
            error = (row[7] or {}).get("error") if row[6] == "fail" else None
            seen.add((row[2], row[6], error, row[3].get("event")))
    expected = {
        ("register", "ok", None, "sync-e0"),
        ("register", "ok", None, "sync-e1"),
        ("register", "fail", "EVENT_FULL", "sync-e0"),
        ("register", "fail", "EVENT_FULL", "sync-e1"),
        ("register", "fail", "ALREADY_REGISTERED", "sync-e0"),
        ("cancel", "ok", None, "sync-e0"),
        ("cancel", "ok", None, "sync-e1"),
        ("book", "ok", None, None),
        ("book", "fail", "NO_FREE_SLOT", None),
        ("release", "ok", None, None),
    }
    assert expected <= seen, expected - seen


def _op(index: int, f: str, at: float, done: float, outcome: str, **args: object) -> Op:
    op = Op(index, "registrations", "c", f, dict(args), at, int(at * 1000))
    op.type, op.completed = outcome, (float("inf") if outcome == UNKNOWN else done)
    return op


def _event(users: dict[str, int], capacity: int = 2) -> dict[str, object]:
    return {"capacity": capacity, "counters": [[len(users), capacity]], "users": users}


def test_seats_in_time_judges_the_history_against_the_table():
    a = _op(0, "register", 1.0, 1.1, OK, event="e", user="a")
    b = _op(1, "register", 1.2, 1.3, OK, event="e", user="b")
    c = _op(2, "register", 1.4, 1.5, OK, event="e", user="c")
    cancel_a = _op(3, "cancel", 1.35, 1.6, OK, event="e", user="a")
    # a's cancel was invoked before c's answer: at most two seats surely held at once
    clean = checks.seats_in_time([a, b, c, cancel_a], {"e": _event({"b": 0, "c": 0})})
    assert not clean.violations
    # the same, cancel invoked after c's answer: three seats at once
    late = _op(3, "cancel", 1.6, 1.7, OK, event="e", user="a")
    found = checks.seats_in_time([a, b, c, late], {"e": _event({"b": 0, "c": 0})})
    assert [v.check for v in found.violations] == ["never more seats than the capacity"]
    # b acknowledged, never cancelled, missing; d registered with nobody asking
    found = checks.seats_in_time([a, b], {"e": _event({"a": 0, "d": 0})})
    assert sorted(v.check for v in found.violations) == [
        "an acknowledged registration exists",
        "every registration was asked for",
    ]
    # a refusal that saw more than the capacity registered
    full = _op(4, "register", 2.0, 2.1, FAIL, event="e", user="z")
    full.value = {"error": "EVENT_FULL", "registered": 3, "capacity": 2}
    found = checks.seats_in_time([full], {"e": _event({})})
    assert [v.check for v in found.violations] == ["a refusal within the capacity"]


def test_capacity_rows_judge_each_counter_and_their_sum():
    event = {"capacity": 4, "counters": [[2, 2], [3, 2]], "users": {"a": 0, "b": 0, "c": 1}}
    found = checks.capacity_rows([], {"e": event})
    assert sorted(v.check for v in found.violations) == [
        "a counter within its limit",
        "the counters count the registrations",
    ]
    # a place given back at another shard than the one recorded is no violation: the sum holds
    moved = {"capacity": 4, "counters": [[1, 2], [2, 2]], "users": {"a": 0, "b": 0, "c": 1}}
    assert not checks.capacity_rows([], {"e": moved}).violations


def _slot_op(
    index: int, f: str, at: float, done: float, outcome: str, value: object = None, **args: object
) -> Op:
    op = Op(index, "slots", "c", f, dict(args), at, int(at * 1000))
    op.type, op.completed, op.value = outcome, done, value
    return op


def test_slots_booked_once_judges_overlaps_and_holders():
    x = _slot_op(0, "book", 1.0, 1.1, OK, {"slot": "s"}, holder="x")
    free = _slot_op(1, "release", 1.2, 1.3, OK, slot="s", holder="x")
    y = _slot_op(2, "book", 1.25, 1.35, OK, {"slot": "s"}, holder="y")
    assert not checks.slots_booked_once([x, free, y], {"s": "y"}).violations
    early = _slot_op(2, "book", 1.05, 1.15, OK, {"slot": "s"}, holder="y")
    found = checks.slots_booked_once([x, free, early], {"s": "y"})
    assert [v.check for v in found.violations] == ["no slot booked twice"]
    found = checks.slots_booked_once([x], {"s": "z"})
    assert sorted(v.check for v in found.violations) == [
        "a booking never released still holds its slot",
        "every holder booked its slot",
    ]
    refused = _slot_op(
        1, "release", 1.2, 1.3, FAIL, {"error": "NOT_HOLDER", "holder": "y"}, slot="s", holder="x"
    )
    found = checks.slots_booked_once([x, refused], {"s": "y"})
    assert "a holder's release is its own" in {v.check for v in found.violations}
