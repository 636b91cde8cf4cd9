"""The nemesis's checkers, fed hand-made histories: each violation they guard against must fail
them, and a correct history of the same shape must pass (so neither side is vacuous)."""

from __future__ import annotations

from typing import Any

from chaos import checkers, linear
from chaos.history import FAIL, OK, UNKNOWN, Op
from service.domain.events import Events
from service.domain.products import Products

INF = float("inf")


def op(
    f: str,
    start: float,
    end: float,
    outcome: str = OK,
    value: Any = None,
    *,
    pattern: str = "p",
    status: int | None = None,
    attempts: list[tuple[int | None, Any]] | None = None,
    **args: Any,
) -> Op:
    made = Op(0, pattern, "c", f, args, start, int(start * 1000))
    made.type = outcome
    made.completed = INF if outcome == UNKNOWN else end
    made.completed_ms = int(end * 1000)
    made.value = value
    made.status = status if status is not None else (201 if outcome == OK else 409)
    made.attempts = attempts if attempts is not None else [(made.status, value)]
    return made


def numbered(ops: list[Op]) -> list[Op]:
    for index, one in enumerate(ops):
        one.index = index
    return ops


def names(report: checkers.Report) -> set[str]:
    return {v.check for v in report.violations}


# -- the counter search ------------------------------------------------------------------------


def test_linear_accepts_a_serial_order_that_needs_an_unknown_purchase() -> None:
    ops = [
        linear.CounterOp("buy", 1, 9, 0.0, 1.0),
        linear.CounterOp("maybe", 2, None, 0.5, INF),
        linear.CounterOp("buy", 1, 6, 2.0, 3.0),  # 9 - 2 (the unknown one) - 1
    ]
    assert linear.check(ops, 10, 6).ok


def test_linear_refuses_remaining_values_that_break_real_time_order() -> None:
    # The buy that finished first left 8, the one invoked after it left 9: impossible.
    ops = [linear.CounterOp("buy", 1, 8, 0.0, 1.0), linear.CounterOp("buy", 1, 9, 2.0, 3.0)]
    verdict = linear.check(ops, 10, 8)
    assert not verdict.ok
    assert verdict.stuck_at


def test_linear_refuses_two_sales_reporting_the_same_remaining_stock() -> None:
    ops = [linear.CounterOp("buy", 1, 9, 0.0, 1.0), linear.CounterOp("buy", 1, 9, 0.0, 1.0)]
    assert not linear.check(ops, 10, 8).ok


def test_linear_refuses_an_out_of_stock_while_stock_was_there() -> None:
    ops = [
        linear.CounterOp("buy", 1, 4, 0.0, 1.0),
        linear.CounterOp("refuse", 2, 0, 2.0, 3.0),  # said 0 left, but 4 were
    ]
    assert not linear.check(ops, 5, 4).ok
    fine = [linear.CounterOp("buy", 1, 4, 0.0, 1.0), linear.CounterOp("refuse", 5, 4, 2.0, 3.0)]
    assert linear.check(fine, 5, 4).ok


# -- purchases ---------------------------------------------------------------------------------


def purchase(start: float, end: float, outcome: str, value: Any, q: int = 1, **extra: Any) -> Op:
    return op(
        "purchase",
        start,
        end,
        outcome,
        value,
        pattern="purchases",
        product="p",
        quantity=q,
        **extra,
    )


def test_purchases_pass_a_correct_history() -> None:
    history = numbered(
        [
            purchase(0, 1, OK, {"purchaseId": "a", "remainingStock": 2}),
            purchase(0.5, 1.5, UNKNOWN, None),
            purchase(2, 3, OK, {"purchaseId": "b", "remainingStock": 0}),
            purchase(4, 5, FAIL, {"error": "OUT_OF_STOCK", "available": 0}),
        ]
    )
    report = checkers.purchases(history, [("p", 3)], {"p": 0})
    assert report.violations == []
    assert report.checks >= 4


def test_purchases_catch_an_oversell() -> None:
    history = numbered(
        [
            purchase(0, 1, OK, {"purchaseId": "a", "remainingStock": 0}),
            purchase(0, 1, OK, {"purchaseId": "b", "remainingStock": 0}),
        ]
    )
    report = checkers.purchases(history, [("p", 1)], {"p": 0})
    assert {"no oversell", "linearizable counter"} <= names(report)


def test_purchases_catch_stock_that_no_subset_of_unknown_purchases_explains() -> None:
    history = numbered(
        [
            purchase(0, 1, OK, {"purchaseId": "a", "remainingStock": 9}),
            purchase(2, 3, UNKNOWN, None, q=2),
        ]
    )
    report = checkers.purchases(history, [("p", 10)], {"p": 8})  # a lost unit: 10 - 1 - {0, 2}
    assert "stock accounting" in names(report)


def test_purchases_catch_a_key_with_two_effects() -> None:
    keyed = purchase(
        0,
        2,
        OK,
        {"purchaseId": "b", "remainingStock": 8},
        key="k",
        attempts=[(201, {"purchaseId": "a", "remainingStock": 9}), (201, {"purchaseId": "b"})],
    )
    report = checkers.purchases(numbered([keyed]), [("p", 10)], {"p": 8})
    assert "one effect per key" in names(report)


# -- registrations -----------------------------------------------------------------------------


def reg(f: str, start: float, end: float, outcome: str, value: Any, user: str = "u1") -> Op:
    return op(f, start, end, outcome, value, pattern="registrations", event="e", user=user)


def state(
    registered: int, users: set[str], requests: dict[str, str] | None = None
) -> dict[str, checkers.EventState]:
    return {"e": checkers.EventState(2, registered, users, requests or {})}


def test_registrations_pass_a_correct_history() -> None:
    history = numbered(
        [
            reg("register", 0, 1, OK, {"registeredAt": "t1"}),
            reg("cancel", 2, 3, OK, None),
            reg("register", 4, 5, OK, {"registeredAt": "t2"}),
            reg("request", 0, 1, OK, {"requestId": "r1"}, user="u2"),
            reg("request", 0, 1, OK, {"requestId": "r2"}, user="u3"),
        ]
    )
    report = checkers.registrations(
        history, state(2, {"u1", "u2"}, {"r1": "ACCEPTED"}), set(), {"r2"}
    )
    assert report.violations == []


def test_registrations_catch_over_capacity_and_a_drifting_counter() -> None:
    report = checkers.registrations([], state(3, {"a", "b"}), set(), set())
    assert names(report) == {"capacity", "counter matches registrations"}


def test_registrations_catch_a_second_seat_without_a_cancel() -> None:
    history = numbered(
        [
            reg("register", 0, 1, OK, {"registeredAt": "t1"}),
            reg("cancel", 2, 3, FAIL, {"error": "NOT_FOUND"}),  # definitely did nothing
            reg("register", 4, 5, OK, {"registeredAt": "t2"}),
        ]
    )
    report = checkers.registrations(history, state(1, {"u1"}), set(), set())
    assert "nobody twice" in names(report)


def test_registrations_catch_a_request_left_pending_or_lost() -> None:
    history = numbered(
        [
            reg("request", 0, 1, OK, {"requestId": "r1"}),
            reg("request", 0, 1, OK, {"requestId": "r2"}, user="u2"),
        ]
    )
    report = checkers.registrations(history, state(0, set(), {"r1": "PENDING"}), set(), set())
    assert [v.check for v in report.violations] == ["async request decided"] * 2
    dead = checkers.registrations(history, state(0, set(), {"r1": "PENDING"}), {"r1", "r2"}, set())
    assert dead.violations == []


# -- leases ------------------------------------------------------------------------------------


def acquire(start: float, end: float, fence: int, owner: str) -> Op:
    return op(
        "acquire", start, end, OK, {"fence": fence}, pattern="leases", resource="r", owner=owner
    )


def write(start: float, end: float, fence: int, outcome: str = OK) -> Op:
    return op("write", start, end, outcome, None, pattern="leases", resource="r", fence=fence)


def test_leases_pass_a_correct_history() -> None:
    history = numbered(
        [
            acquire(0, 1, 1, "a"),
            write(1, 2, 1),
            acquire(3, 4, 2, "b"),
            write(1.5, 5, 1, FAIL),  # a paused holder, refused
            write(4, 5, 2, UNKNOWN),
        ]
    )
    assert checkers.leases(history, {"r": [1, 2]}).violations == []


def test_leases_catch_two_holders_of_one_fence_and_a_fence_going_back() -> None:
    history = numbered([acquire(0, 1, 2, "a"), acquire(2, 3, 2, "b"), acquire(4, 5, 1, "c")])
    found = names(checkers.leases(history, {}))
    assert {"one holder per fence", "fences increase"} <= found


def test_leases_catch_a_stale_fenced_write() -> None:
    history = numbered(
        [acquire(0, 1, 1, "a"), acquire(2, 3, 2, "b"), write(3, 4, 2), write(5, 6, 1)]
    )
    report = checkers.leases(history, {"r": [2, 1]})
    stale = [v for v in report.violations if v.check == "no stale fenced write"]
    assert len(stale) == 2  # from the item's order, and from the history


def test_leases_catch_a_lost_or_invented_fenced_write() -> None:
    history = numbered([acquire(0, 1, 1, "a"), write(1, 2, 1)])
    assert "fenced writes accounted" in names(checkers.leases(history, {"r": []}))
    assert "fenced writes accounted" in names(checkers.leases(history, {"r": [1, 3]}))


# -- the lease queue -----------------------------------------------------------------------------

BOUNDS = checkers.QueueBounds(heartbeat_s=0.5, expiry_s=1.5, poll_s=0.05, slack_s=1.0)


def served(
    start: float,
    end: float,
    fence: int,
    ticket: int,
    owner: str,
    *,
    tickets: list[int] | None = None,
    role: str = "normal",
    process: str = "c",
    ticketed_at: float | None = None,
) -> Op:
    value: dict[str, Any] = {"fence": fence, "ticket": ticket, "tickets": tickets or [ticket]}
    if ticketed_at is not None:
        value["ticketedAt"] = ticketed_at  # when it first queued (the history's clock)
    made = op(
        "acquire",
        start,
        end,
        OK,
        value,
        pattern="queue",
        resource="r",
        owner=owner,
        role=role,
    )
    made.process = process
    return made


def killed(start: float, fence: int, process: str = "k") -> Op:
    made = op("kill", start, start, OK, None, pattern="queue", resource="r", owner="x", fence=fence)
    made.process = process
    return made


def test_queue_passes_a_fifo_history_with_an_excused_pass_over_and_a_prompt_takeover() -> None:
    history = numbered(
        [
            served(0, 1, 1, 1, "a"),
            # b was passed over once (ticket 2), while a pause hit its own thread
            served(0.5, 4, 3, 4, "b", tickets=[2, 4], process="b"),
            served(0.6, 2, 2, 3, "c"),
            killed(4.1, 3),
            served(4.2, 4.1 + 2.5, 4, 5, "d"),  # within L + H + poll + slack = 3.05 s
        ]
    )
    faults = [checkers.Disturbance(1.0, "pause", "b")]
    report = checkers.queue(history, {"r": []}, faults, BOUNDS)
    assert report.violations == [], report.violations


def test_queue_catches_a_waiter_served_out_of_ticket_order() -> None:
    history = numbered([served(0, 1, 1, 2, "a"), served(0, 2, 2, 1, "b")])
    report = checkers.queue(history, {}, [], BOUNDS)
    assert names(report) == {"FIFO order"}


def test_queue_catches_a_live_waiter_passed_over() -> None:
    # b took a second ticket, yet nothing happened to it and no clock was skewed
    history = numbered([served(0, 1, 1, 1, "a"), served(0.5, 4, 2, 3, "b", tickets=[2, 3])])
    assert names(checkers.queue(history, {}, [], BOUNDS)) == {"no live waiter passed over"}
    # the same pass-over while some queue client's clock ran 2 s ahead is excused
    skew = [checkers.Disturbance(0.2, "clock_skew", "c", 2.0)]
    assert checkers.queue(history, {}, skew, BOUNDS).violations == []


def test_queue_catches_a_takeover_slower_than_the_bound() -> None:
    # the holder of fence 1 died at 1.0; d, waiting since 1.2, was served only 5 s later
    history = numbered([served(0, 1, 1, 1, "a"), killed(1.0, 1), served(1.2, 6.0, 2, 2, "d")])
    report = checkers.queue(history, {}, [], BOUNDS)
    assert names(report) == {"takeover bound"}
    # unless a dead waiter was ahead of it (its row expires L later)
    ahead = [checkers.Disturbance(1.1, "kill", "w")]
    assert checkers.queue(history, {}, ahead, BOUNDS).violations == []


def plain(start: float, end: float, fence: int, owner: str) -> Op:
    made = op(
        "acquire",
        start,
        end,
        OK,
        {"fence": fence, "ticket": None, "tickets": []},
        pattern="queue",
        resource="r",
        owner=owner,
        role="plain",
    )
    made.process = "p"
    return made


def test_queue_catches_a_live_waiter_overtaken_by_a_later_arrival() -> None:
    # w took its ticket at 0.2 while a held the lease; p, a plain acquisition arriving at 1.5,
    # was served (fence 2) before w (fence 3), and nothing happened to w
    a = served(0, 0.1, 1, 1, "a")
    w = served(0.1, 4, 3, 2, "w", ticketed_at=0.2, process="w")
    history = numbered([a, w, plain(1.5, 1.6, 2, "p")])
    overtaken = "no live waiter overtaken by a later arrival"
    assert names(checkers.queue(history, {}, [], BOUNDS)) == {overtaken}
    # a fault on w's own thread (silent past L: rightly passed over) excuses it
    pause = [checkers.Disturbance(1.0, "pause", "w")]
    assert checkers.queue(history, {}, pause, BOUNDS).violations == []
    # and a plain acquisition that arrived before w's ticket may rightly be served first
    earlier = numbered([a, w, plain(0.15, 0.3, 2, "p")])
    assert checkers.queue(earlier, {}, [], BOUNDS).violations == []


def test_queue_counts_the_queued_acquisitions_served_and_refused() -> None:
    refused = op("acquire", 0, 3, FAIL, {"tickets": [3], "at": 0}, pattern="queue", resource="r")
    refused.status = 409
    refused.args.update(owner="r", role="normal")
    history = numbered([served(0, 1, 1, 1, "a", ticketed_at=0.1), plain(1.5, 1.6, 2, "p"), refused])
    assert checkers.queue(history, {}, [], BOUNDS).notes == [
        "queue: 1 queued acquisitions served, 1 refused at their deadline, 0 unknown, 0 killed; "
        "plain: 1 served, 0 refused; 1 live waiters checked for overtaking"
    ]


def test_queue_runs_the_lease_checks_too() -> None:
    history = numbered([served(0, 1, 1, 1, "a"), served(2, 3, 1, 2, "b")])
    assert "one holder per fence" in names(checkers.queue(history, {}, [], BOUNDS))


# -- wallets -----------------------------------------------------------------------------------


def top_up(outcome: str, amount: int, value: Any = None, **extra: Any) -> Op:
    return op("top-up", 0, 1, outcome, value, pattern="wallets", wallet="w", amount=amount, **extra)


def charge(charge_id: str, amount: int, refunded: bool = False) -> checkers.Charge:
    return checkers.Charge(charge_id, "w", amount, refunded)


def test_wallets_pass_a_correct_history() -> None:
    history = numbered(
        [
            top_up(OK, 5, {"topUpId": "t1", "chargeId": "c1"}),
            top_up(UNKNOWN, 7),  # charged, then the write failed unseen: not refunded (README)
            top_up(FAIL, 3, {"error": "LOCK_LOST"}),
        ]
    )
    charges = [charge("c1", 5), charge("c2", 7), charge("c3", 3, refunded=True)]
    assert checkers.wallets(history, {"w": (5, 1)}, charges).violations == []


def test_wallets_catch_a_credit_applied_twice() -> None:
    history = numbered([top_up(OK, 5, {"topUpId": "t1", "chargeId": "c1"})])
    report = checkers.wallets(history, {"w": (10, 2)}, [charge("c1", 5)])
    assert {"balance accounting", "one charge per credit"} <= names(report)


def test_wallets_catch_a_refunded_charge_that_was_credited() -> None:
    history = numbered([top_up(OK, 5, {"topUpId": "t1", "chargeId": "c1"})])
    report = checkers.wallets(history, {"w": (5, 1)}, [charge("c1", 5, refunded=True)])
    assert {"acknowledged charge stands", "one charge per credit"} <= names(report)


def test_wallets_catch_a_second_charge_without_an_unknown_top_up() -> None:
    history = numbered([top_up(OK, 5, {"topUpId": "t1", "chargeId": "c1"})])
    report = checkers.wallets(history, {"w": (5, 1)}, [charge("c1", 5), charge("c2", 5)])
    assert names(report) == {"one charge per credit"}


# -- inventory ---------------------------------------------------------------------------------


def reserve(
    start: float, end: float, rid: str, units: list[str], expires: float, held: float | None = None
) -> Op:
    """A reservation the server decided at ``held`` (default: when it was invoked)."""
    value = {"reservationId": rid, "units": units, "expiresAt": int(expires * 1000)}
    hold = expires - (start if held is None else held)
    return op(
        "reserve",
        start,
        end,
        OK,
        value,
        pattern="inventory",
        sku="s",
        quantity=len(units),
        hold=hold,
    )


def after(f: str, start: float, end: float, rid: str, outcome: str = OK) -> Op:
    return op(f, start, end, outcome, None, pattern="inventory", sku="s", reservation=rid)


def sku(units: dict[str, str], summary: dict[str, int] | None = None) -> dict[str, Any]:
    return {"s": checkers.SkuState(units, summary)}


def test_inventory_passes_a_correct_history() -> None:
    history = numbered(
        [
            reserve(0, 1, "r1", ["u1"], expires=3),
            reserve(4, 5, "r2", ["u1"], expires=9),  # r1 lapsed first
            after("confirm", 5, 6, "r2"),
            reserve(0, 1, "r3", ["u2"], expires=30),
            after("cancel", 1, 2, "r3"),
            reserve(2.5, 3, "r4", ["u2"], expires=30),
        ]
    )
    final = sku(
        {"u1": "sold", "u2": "held", "u3": "free"}, {"available": 1, "reserved": 1, "sold": 1}
    )
    assert checkers.inventory(history, final).violations == []


def test_inventory_orders_holds_by_when_the_server_took_them_not_by_when_replies_came() -> None:
    # Seed 7: r1 took the unit (0.5 s hold) but answered late; r2 took the lapsed hold after it
    # and answered first. Not a double hold.
    history = numbered(
        [
            reserve(0.0, 1.0, "r1", ["u1"], expires=0.6, held=0.1),
            reserve(0.5, 0.9, "r2", ["u1"], expires=2.7, held=0.7),
        ]
    )
    assert checkers.inventory(history, sku({"u1": "held"})).violations == []


def test_inventory_lets_a_slow_hold_decided_first_land_after_a_cancelled_one() -> None:
    # Seed 181554: r1 decided first (its server clock) but its write was slow; r2 took the unit,
    # was cancelled, and only then did r1's write land. One order explains it: not a double hold.
    history = numbered(
        [
            reserve(0.0, 2.0, "r1", ["u1"], expires=1.1, held=0.1),
            reserve(0.1, 0.3, "r2", ["u1"], expires=0.7, held=0.2),
            after("cancel", 0.4, 0.5, "r2"),
        ]
    )
    assert checkers.inventory(history, sku({"u1": "held"})).violations == []
    # Without r2's cancel neither order explains it
    held_twice = numbered(history[:2])
    assert names(checkers.inventory(held_twice, sku({"u1": "held"}))) == {"no unit held twice"}


def test_inventory_lets_a_slow_hold_land_after_a_third_reservation_freed_the_unit() -> None:
    # Seed 832883: r2 decided while r1 still held the unit, but its write was retried for 1.7 s;
    # meanwhile r1 lapsed, r3 took the unit and was cancelled, and r2's write landed on the
    # free unit. Sorted by when they were decided, r2 comes between r1 and r3.
    history = numbered(
        [
            reserve(0.0, 0.3, "r1", ["u1"], expires=1.0, held=0.0),
            reserve(0.5, 2.3, "r2", ["u1"], expires=1.03, held=0.53),
            reserve(1.1, 1.2, "r3", ["u1"], expires=3.1, held=1.1),
            after("cancel", 1.3, 1.4, "r3"),
        ]
    )
    assert checkers.inventory(history, sku({"u1": "held"})).violations == []
    # Without r3's cancel the unit was never free for r2's write
    held_twice = numbered(history[:3])
    assert "no unit held twice" in names(checkers.inventory(held_twice, sku({"u1": "held"})))


def test_inventory_catches_a_unit_held_twice() -> None:
    history = numbered(
        [reserve(0, 1, "r1", ["u1"], expires=30), reserve(2, 3, "r2", ["u1"], expires=30)]
    )
    assert names(checkers.inventory(history, sku({"u1": "held"}))) == {"no unit held twice"}


def test_inventory_catches_a_sold_unit_reserved_again_and_sold_twice() -> None:
    history = numbered(
        [
            reserve(0, 1, "r1", ["u1"], expires=2),
            after("confirm", 1, 1.5, "r1"),
            reserve(3, 4, "r2", ["u1"], expires=9),
            after("confirm", 4, 5, "r2"),
        ]
    )
    found = names(checkers.inventory(history, sku({"u1": "sold"})))
    assert {"no unit held twice", "sold once"} <= found


def test_inventory_catches_unaccounted_sales_and_a_summary_that_did_not_converge() -> None:
    history = numbered([reserve(0, 1, "r1", ["u1"], expires=9), after("confirm", 1, 2, "r1")])
    final = sku({"u1": "free", "u2": "sold"}, {"available": 2, "reserved": 0, "sold": 0})
    assert names(checkers.inventory(history, final)) == {
        "sold units accounted",
        "summary converges",
    }


def lost_reserve(start: float, quantity: int) -> Op:
    return op(
        "reserve", start, start, UNKNOWN, None, pattern="inventory", sku="s", quantity=quantity
    )


def held_by(units: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """Final state with holders: unit -> (status, holder)."""
    state = checkers.SkuState(
        {u: status for u, (status, _) in units.items()},
        None,
        {u: holder for u, (_, holder) in units.items() if holder},
    )
    return {"s": state}


def test_inventory_table_passes_pooled_units_sold_whole_and_a_lost_reply_holding_its_q() -> None:
    # r1 took u1 and u7 (two pools) and was confirmed; a reservation of 2 whose reply was lost
    # holds u3 and u9; r2 lapsed and one of its units went back to free
    history = numbered(
        [
            reserve(0, 1, "r1", ["u1", "u7"], expires=30),
            after("confirm", 1, 2, "r1"),
            lost_reserve(2, 2),
            reserve(3, 4, "r2", ["u4", "u5"], expires=5),
        ]
    )
    final = held_by(
        {
            "u1": ("sold", "r1"),
            "u7": ("sold", "r1"),
            "u3": ("held", "x1"),
            "u9": ("held", "x1"),
            "u4": ("held", "r2"),
            "u5": ("free", ""),
        }
    )
    assert checkers.inventory(history, final).violations == []


def test_inventory_table_catches_part_of_a_reservation_sold_and_a_stranger_holding_units() -> None:
    history = numbered(
        [
            reserve(0, 1, "r1", ["u1", "u7"], expires=30),
            after("confirm", 1, 2, "r1"),
            lost_reserve(2, 1),
        ]
    )
    # r1 has only one of its two units sold; x1 and x2 hold units with one lost reply between
    # them, and x1 holds more units than any lost reservation asked for
    final = held_by(
        {
            "u1": ("sold", "r1"),
            "u7": ("held", "r1"),
            "u3": ("held", "x1"),
            "u4": ("held", "x1"),
            "u9": ("sold", "x2"),
        }
    )
    report = checkers.inventory(history, final)
    messages = " | ".join(v.message for v in report.violations)
    assert names(report) == {
        "exactly q units or none",
        "no unit held twice",
        "sold units accounted",
    }
    assert "r1 of 2 has ['u1'] sold" in messages
    assert "held by x1, which no reservation explains" in messages
    assert "2 reservations without a reply hold units, but only 1" in messages


def test_inventory_table_catches_a_unit_held_by_a_reservation_that_did_not_list_it() -> None:
    history = numbered([reserve(0, 1, "r1", ["u1"], expires=30)])
    final = held_by({"u1": ("held", "r1"), "u2": ("held", "r1")})
    assert names(checkers.inventory(history, final)) == {"no unit held twice"}


# -- the report --------------------------------------------------------------------------------


def test_a_violation_prints_its_history_and_faults_and_the_last_line_counts_it() -> None:
    import io

    from chaos.history import History
    from chaos.nemesis import Nemesis
    from chaos.runner import Result

    history = History()
    first = history.invoke("leases", "c1", "acquire", resource="r", owner="a")
    History.complete(first, OK, 201, {"fence": 2})
    second = history.invoke("leases", "c2", "acquire", resource="r", owner="b")
    History.complete(second, OK, 201, {"fence": 2})
    lost = history.invoke("leases", "c3", "acquire", resource="r", owner="c")
    History.complete(lost, UNKNOWN, None, "reply lost")
    nemesis = Nemesis(42, start=history.start)
    nemesis.log("lost_after", "c2 UpdateItem")
    nemesis.log("throttle", "c9 GetItem")  # another client: not printed
    report = checkers.leases(history.of("leases"), {})
    out = io.StringIO()
    Result(42, 1.0, history, nemesis, report).print(out)
    text = out.getvalue()
    assert "VIOLATION [leases] one holder per fence" in text
    assert "* " in text and "acquire(resource=r, owner=b)" in text
    assert "fault lost_after" in text and "c9 GetItem" not in text
    assert text.rstrip().splitlines()[-1] == (
        "chaos: 3 operations, 2 faults, 1 unknown, 2 violations, seed 42"  # and fences increase
    )


def test_a_500_is_a_violation_and_a_503_is_not() -> None:
    history = numbered(
        [
            op("purchase", 0, 1, UNKNOWN, {"error": "THROTTLED"}, status=503),
            op("purchase", 0, 1, UNKNOWN, {"error": "INTERNAL"}, status=500),
        ]
    )
    report = checkers.no_bugs(history)
    assert [(v.check, v.ops[0].index) for v in report.violations] == [("no 500", 1)]


def test_queue_excuses_a_waiter_killed_up_to_i_before_a_holder_dies() -> None:
    # a waiter ahead was killed 4 s before the holder of fence 1 died: with L = 1.5 s alone that
    # is no excuse, but a waiter that never said it was next may hold the queue up for I = 6 s
    history = numbered([served(0, 1, 1, 1, "a"), killed(5.0, 1), served(5.2, 10.0, 2, 2, "d")])
    early = [checkers.Disturbance(1.0, "kill", "w")]
    assert names(checkers.queue(history, {}, early, BOUNDS)) == {"takeover bound"}
    idle = checkers.QueueBounds(heartbeat_s=0.5, expiry_s=1.5, poll_s=0.05, idle_s=6.0)
    assert checkers.queue(history, {}, early, idle).violations == []


# -- resizing: an adaptive product bought from while a resizer grows and shrinks its shards -----


def adaptive_purchase(start: float, end: float, outcome: str, value: Any, q: int = 1) -> Op:
    return op("purchase", start, end, outcome, value, pattern="resizing", product="a", quantity=q)


def resize(start: float, end: float, outcome: str, value: Any, shards: int) -> Op:
    return op("resize", start, end, outcome, value, pattern="resizing", counter="a", shards=shards)


def shard_rows(counts: list[int], shards: int, generation: int) -> dict[str, dict[str, Any]]:
    return {
        f"a#{k}": {"productId": f"a#{k}", "stock": count, "shards": shards, "layout": generation}
        for k, count in enumerate(counts)
    }


# the adaptive product "a"'s counter, built as the service builds it (one shard at creation)
STOCK = Products(None, "products").counter("a", 1)


def grown(generation: int, before: int, after: int) -> dict[str, int]:
    return {
        "before": before,
        "after": after,
        "generation": generation,
        "moved": 1,
        "items": after,
        "steps": 1,
    }


def resizing_history(second_sale: str = "b") -> list[Op]:
    return numbered(
        [
            adaptive_purchase(0, 1, OK, {"purchaseId": "a1", "remainingStock": 9}),
            resize(1, 2, OK, grown(1, 1, 3), 3),
            adaptive_purchase(2, 3, OK, {"purchaseId": second_sale, "remainingStock": 2}, q=2),
            adaptive_purchase(2.5, 3.5, UNKNOWN, None, q=3),
            resize(3, 4, FAIL, {"error": "LostEveryRace"}, 1),
            resize(4, 5, UNKNOWN, None, 2),
        ]
    )


def test_resizing_passes_a_correct_history() -> None:
    # 10 units: 1 + 2 sold, the unknown 3 did not apply; the shards hold 7 at generation 1
    final = {"a": checkers.ShardedState(STOCK, shard_rows([3, 2, 2], 3, 1))}
    report = checkers.resizing(resizing_history(), [("a", 10)], final)
    assert report.violations == [], report.violations
    assert report.checks >= 6


def test_resizing_catches_a_unit_sold_twice() -> None:
    # the second sale answered the first one's receipt: one unit sold twice
    final = {"a": checkers.ShardedState(STOCK, shard_rows([3, 2, 2], 3, 1))}
    report = checkers.resizing(resizing_history(second_sale="a1"), [("a", 10)], final)
    assert names(report) == {"one effect per key"}


def test_resizing_catches_a_lost_unit() -> None:
    # 10 - 3 acknowledged leaves 7, or 4 with the unknown sale: 6 is neither
    final = {"a": checkers.ShardedState(STOCK, shard_rows([2, 2, 2], 3, 1))}
    report = checkers.resizing(resizing_history(), [("a", 10)], final)
    assert names(report) == {"stock accounting"}


def test_resizing_catches_a_negative_shard() -> None:
    final = {"a": checkers.ShardedState(STOCK, shard_rows([8, -1, 0], 3, 1))}
    report = checkers.resizing(resizing_history(), [("a", 10)], final)
    assert "no oversell" in names(report)


def test_resizing_catches_two_layouts_and_a_missing_shard() -> None:
    two = shard_rows([3, 2, 2], 3, 1)
    two["a#2"]["layout"] = 2  # shard 2 is of another generation than 0 and 1
    report = checkers.resizing(
        resizing_history(), [("a", 10)], {"a": checkers.ShardedState(STOCK, two)}
    )
    assert names(report) == {"one layout"}
    gap = shard_rows([3, 2, 2], 3, 1)
    gap["a#3"] = {**gap.pop("a#2"), "productId": "a#3"}  # shards 0, 1 and 3 of three
    report = checkers.resizing(
        resizing_history(), [("a", 10)], {"a": checkers.ShardedState(STOCK, gap)}
    )
    assert names(report) == {"shards 0 to N-1"}


def test_resizing_catches_an_acknowledged_resize_the_layout_does_not_show() -> None:
    # generation 0: the acknowledged grow to 3 shards never happened
    final = {"a": checkers.ShardedState(STOCK, shard_rows([7], 1, 0))}
    report = checkers.resizing(resizing_history(), [("a", 10)], final)
    assert names(report) == {"each resize raised the generation"}


# the adaptive event "e": capacity 4, its seats' counter as the service builds it
SEATS = Events(None, "events").shards_of("e", 1)


def seat_rows(counts: list[int], limits: list[int], generation: int) -> dict[str, dict[str, Any]]:
    return {
        f"e#{k}": {
            "eventId": f"e#{k}",
            "sk": "SHARD",
            "registered": count,
            "capacity": limit,
            "shards": len(counts),
            "layout": generation,
        }
        for k, (count, limit) in enumerate(zip(counts, limits, strict=True))
    }


def sign_up(start: float, end: float, outcome: str, user: str, f: str = "register") -> Op:
    value = {"registeredAt": f"t{start}"} if f == "register" and outcome == OK else None
    return op(f, start, end, outcome, value, pattern="resizing", event="e", user=user)


def event_history() -> list[Op]:
    return numbered(
        [
            sign_up(0, 1, OK, "u1"),
            sign_up(0, 1, OK, "u2"),
            op("resize", 1, 2, OK, grown(1, 1, 2), pattern="resizing", counter="e", shards=2),
            sign_up(2, 3, OK, "u3"),
            sign_up(3, 4, OK, "u2", f="cancel"),
            sign_up(4, 5, UNKNOWN, "u4"),
        ]
    )


def seats(counts: list[int], limits: list[int], members: set[str]) -> checkers.Report:
    final = {"e": checkers.ShardedState(SEATS, seat_rows(counts, limits, 1), members)}
    return checkers.resizing(event_history(), [], final, [("e", 4)])


def test_resizing_passes_a_correct_event() -> None:
    # u1 and u3 hold places; u4's sign-up of unknown outcome did not apply
    report = seats([1, 1], [2, 2], {"u1", "u3"})
    assert report.violations == [], report.violations
    assert report.checks >= 7


def test_resizing_catches_a_member_counted_twice() -> None:
    assert names(seats([2, 1], [2, 2], {"u1", "u3"})) == {"counter matches registrations"}


def test_resizing_catches_a_shard_over_its_limit_and_places_lost() -> None:
    assert names(seats([2, 0], [1, 3], {"u1", "u3"})) == {"never over the limit"}
    assert names(seats([1, 1], [2, 1], {"u1", "u3"})) == {"places kept"}


def test_resizing_catches_a_shard_item_without_its_count() -> None:
    # an update upserted shard 2 (a layout and nothing else): reported, not a KeyError
    rows = shard_rows([3, 4, 0], 3, 1)
    del rows["a#2"]["stock"]
    report = checkers.resizing(
        resizing_history(), [("a", 10)], {"a": checkers.ShardedState(STOCK, rows)}
    )
    assert names(report) == {"shards 0 to N-1"}
