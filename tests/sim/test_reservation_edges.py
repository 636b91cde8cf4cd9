"""The reservation edges workload (sim/reservation_edges.py) reaches its edges, and its
properties (sim.checks) judge what they say; the scheduler's exact sleep lands on its instant."""

from __future__ import annotations

import json
from typing import Any

from chaos.history import FAIL, OK, Op
from sim import checks
from sim.ddb import Faults, SimClient, Stats
from sim.model import Model
from sim.run import Config, describe, run_seed
from sim.scheduler import EPOCH, Scheduler


def _edges_only(**sizes):
    none = {
        "purchase_clients": 0,
        "lease_clients": 0,
        "reservation_clients": 0,
        "sharded_clients": 0,
        "queue_clients": 0,
    }
    return Config(**{**none, "sizes_by_kind": {"edges": (2, 3)}, **sizes})


def _ops(history):
    lines = history.split("# operations\n", 1)[1].split("# final", 1)[0].splitlines()
    return [json.loads(line) for line in lines]


def test_the_edges_run_clean_and_reach_their_edges():
    """Not vacuous: confirms and views land on exactly a hold's end (and the confirms there are
    refused), and late cancels meet a rival's claim of one of their lapsed units."""
    at_end = {"confirm": 0, "view": 0}
    raced = 0
    for seed in range(6):
        result = run_seed(seed, _edges_only())
        assert not result.report.violations, describe(result)
        ops = _ops(result.history)
        ends = {
            row[7]["reservationId"]: row[7]["expiresAt"]
            for row in ops
            if row[2] == "reserve" and row[6] == "ok"
        }
        held: dict[str, list[Any]] = {row[3]["sku"]: [] for row in ops}
        for row in ops:
            if row[2] == "reserve" and row[6] == "ok":
                held[row[3]["sku"]].append(row)
        for row in ops:
            f, args, outcome = row[2], row[3], row[6]
            if f == "confirm" and args.get("now") == ends.get(args["reservation"]):
                assert outcome == "fail", row
                at_end["confirm"] += 1
            if f == "view" and args.get("now") in {r[7]["expiresAt"] for r in held[args["sku"]]}:
                at_end["view"] += 1
            if f == "cancel" and outcome == "ok":
                lead = args["reservation"].split("-")[0]
                raced += any(
                    r[7]["reservationId"] != args["reservation"]
                    and lead not in r[7]["units"]
                    and r[5] < row[4]
                    for r in held[args["sku"]]
                )
    assert at_end["confirm"] >= 2 and at_end["view"] >= 2, at_end
    assert raced >= 2


def _op(index, f, args, outcome, value, invoked, completed):
    op = Op(index, "inventory", f"c{index}", f, args, EPOCH + invoked, 0)
    op.type, op.value, op.completed = outcome, value, EPOCH + completed
    return op


def _reserve(index, units, until, invoked=0.0, completed=0.1):
    value = {"reservationId": f"r{index}", "units": units, "expiresAt": until}
    return _op(
        index, "reserve", {"sku": "s", "quantity": len(units)}, OK, value, invoked, completed
    )


def test_a_confirm_at_its_holds_end_is_judged_late():
    held = _reserve(0, ["1"], 1000)
    on_time = _op(1, "confirm", {"sku": "s", "reservation": "r0", "now": 999}, OK, {}, 1, 2)
    at_end = _op(2, "confirm", {"sku": "s", "reservation": "r0", "now": 1000}, OK, {}, 1, 2)
    assert not checks.late_confirms([held, on_time]).violations
    assert len(checks.late_confirms([held, at_end]).violations) == 1


def test_a_live_confirm_refused_needs_a_rival_claim():
    held = _reserve(0, ["1", "2"], 1000)
    refused = _op(
        1,
        "confirm",
        {"sku": "s", "reservation": "r0", "clock": 900},
        FAIL,
        {"error": "NotFound"},
        1,
        2,
    )
    assert len(checks.live_confirms([held, refused]).violations) == 1
    rival = _reserve(2, ["2"], 2000, invoked=0.5, completed=0.6)
    assert not checks.live_confirms([held, rival, refused]).violations
    elsewhere = _reserve(3, ["3"], 2000, invoked=0.5, completed=0.6)
    assert len(checks.live_confirms([held, elsewhere, refused]).violations) == 1
    late = _op(
        4,
        "confirm",
        {"sku": "s", "reservation": "r0", "clock": 1000},
        FAIL,
        {"error": "Expired"},
        1,
        2,
    )
    assert not checks.live_confirms([held, late]).violations


def test_a_view_at_a_holds_end_counts_the_hold_available():
    held = _reserve(0, ["1", "2"], 1000)

    def view(shown, now=1000):
        value = {"units": 3, **shown}
        return _op(1, "view", {"sku": "s", "now": now}, OK, value, 1, 2)

    right = view({"available": 3, "reserved": 0, "sold": 0})
    wrong = view({"available": 1, "reserved": 2, "sold": 0})
    assert not checks.inventory_views([held, right]).violations
    assert len(checks.inventory_views([held, wrong]).violations) == 1
    assert not checks.inventory_views(
        [held, view({"available": 1, "reserved": 2, "sold": 0}, now=999)]
    ).violations


def test_an_exact_sleep_wakes_on_its_instant_while_others_call():
    """Another client's calls (1 to 10 ms each) never carry the clock past an exact wake-up."""
    scheduler = Scheduler(7)
    real = Model()
    real.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client = SimClient(real, scheduler, Faults.none(), Stats())
    woke: list[float] = []
    targets = [EPOCH + 0.0123 + 0.0371 * n for n in range(20)]

    def busy(task):
        for _ in range(400):
            client.get_item(TableName="t", Key={"id": {"S": "x"}})

    def exact(task):
        for target in targets:
            scheduler.sleep(task, target - scheduler.now, exact=True)
            woke.append(scheduler.now)

    scheduler.spawn("busy", busy)
    scheduler.spawn("exact", exact)
    assert scheduler.run()
    assert woke == targets
