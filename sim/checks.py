"""Judging a simulated history: chaos's checkers where their history format fits, plus one
property chaos does not check (its lease checker judges fences, not time).

* purchases: :func:`chaos.checkers.purchases` (no oversell, stock accounting, a linearizable
  counter);
* leases: :func:`chaos.checkers.leases` (one holder per fence, fences increase, no stale fenced
  write, fenced writes accounted), and two properties chaos does not check:
  :func:`overlapping_holds` and :func:`granted_as_asked`;
* reservations: :func:`chaos.checkers.inventory` (no unit held twice, exactly q units or none,
  sold once, sold units accounted, the table against the history) and :func:`bounded_cost`;
* sharded products: :func:`sharded_stock` (chaos's purchase checker assumes no restocks and a
  linearizable remaining stock, which a sharded receipt does not promise);
* the lease queue: :func:`chaos.checkers.queue` (run in :mod:`sim.run`), with
  :func:`overlapping_holds` and :func:`granted_as_asked` over its holds too.
* reservation edges (:mod:`sim.reservation_edges`): :func:`chaos.checkers.inventory`,
  :func:`late_confirms`, :func:`live_confirms` and :func:`inventory_views`.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from chaos.checkers import Report
from chaos.history import FAIL, OK, UNKNOWN, Op
from sim.scheduler import EPOCH
from sim.workloads import Cost, Hold


def overlapping_holds(holds: list[Hold]) -> Report:
    """No two holders of one resource believed they held it at the same virtual time.

    A holder believes it holds from its acquisition's reply until it releases or its own clock
    passes ``expiresAt`` minus the safety margin (see :class:`sim.workloads.Hold`); with every
    client's skew inside the bound lease.py assumes, those intervals must not intersect.
    """
    report = Report()
    by_resource: dict[str, list[Hold]] = defaultdict(list)
    for hold in holds:
        by_resource[hold.resource].append(hold)
    for resource, mine in by_resource.items():
        mine.sort(key=lambda h: (h.start, h.fence))
        for earlier, later in itertools.pairwise(mine):
            report.expect(
                earlier.end <= later.start,
                "leases",
                "no overlapping holders",
                f"{resource}: {earlier.owner} (fence {earlier.fence}) held until "
                f"{earlier.end - EPOCH:.3f}, {later.owner} (fence {later.fence}) from "
                f"{later.start - EPOCH:.3f} (virtual seconds)",
                [earlier.op, later.op],
            )
    return report


def granted_as_asked(holds: list[Hold]) -> Report:
    """A granted lease lasts what was asked: its expiry, on the holder's clock, is at least the
    asked length after the acquisition began, and at most that length after its answer. (A lease
    cut short by something else, for example a deadline meant only to bound the wait, breaks the
    first; an expiry computed from a stale or foreign clock can break either.)"""
    report = Report()
    for hold in holds:
        # 1 ms either side: clocks are read as float seconds and rounded to whole ms.
        earliest = hold.asked_at_ms + hold.asked_ms - 1
        latest = hold.answered_at_ms + hold.asked_ms + 1
        report.expect(
            earliest <= hold.expires_at_ms <= latest,
            "leases",
            "a granted lease lasts what was asked",
            f"{hold.owner} asked {hold.asked_ms} ms at {hold.asked_at_ms}, answered at "
            f"{hold.answered_at_ms} with expiresAt {hold.expires_at_ms} (holder's clock, ms)",
            [hold.op],
        )
    return report


def bounded_cost(costs: list[Cost]) -> Report:
    """A reservation's cost is bounded: however it races, is refused or faulted, it sends at most
    the calls its bound allows (a bounded number of rounds, each a bounded read per pool and one
    transaction; see :meth:`sim.workloads.Reservations.call_bound`)."""
    report = Report()
    for cost in costs:
        report.expect(
            cost.calls <= cost.bound,
            "inventory",
            "a reservation's cost is bounded",
            f"{cost.op.process} sent {cost.calls} calls for one reservation, bound {cost.bound}",
            [cost.op],
        )
    return report


def _sums(amounts: list[int]) -> set[int]:
    """Every total a subset of ``amounts`` adds up to."""
    reachable = {0}
    for amount in amounts:
        reachable |= {total + amount for total in reachable}
    return reachable


def sharded_stock(
    ops: list[Op], products: list[tuple[str, int, int]], final: dict[str, list[int]]
) -> Report:
    """Sharded products, per product: no shard below zero (so no oversell, whatever raced), and
    the final total explained by the history: initial + the acknowledged restocks + some of the
    unknown ones - the acknowledged sales - some of the unknown ones (each acknowledged sale
    subtracted exactly once, each acknowledged restock added exactly once). Refusals are not
    judged: restocks race with them, so a refusal's ``available`` proves nothing."""
    report = Report()
    for product_id, initial, _ in products:
        mine = [op for op in ops if op.args.get("product") == product_id]
        shards = final[product_id]
        report.expect(
            all(count >= 0 for count in shards),
            "sharded",
            "no shard below zero",
            f"{product_id}: shards {shards}",
            [op for op in mine if op.type == OK][-5:],
        )
        sales = [op for op in mine if op.f == "purchase"]
        restocks = [op for op in mine if op.f == "restock"]
        sold = sum(op.args["quantity"] for op in sales if op.type == OK)
        added = sum(op.args["units"] for op in restocks if op.type == OK)
        maybe_sold = _sums([op.args["quantity"] for op in sales if op.type == UNKNOWN])
        maybe_added = _sums([op.args["units"] for op in restocks if op.type == UNKNOWN])
        # initial + added + (some unknown restocks) - sold - (some unknown sales) == total
        gap = initial + added - sold - sum(shards)
        report.expect(
            any(gap + extra in maybe_sold for extra in maybe_added),
            "sharded",
            "stock accounting",
            f"{product_id}: initial {initial} + restocked {added} - sold {sold} - final "
            f"{sum(shards)} = {gap}, not unknown sales minus unknown restocks",
            [op for op in mine if op.type == UNKNOWN][:5]
            + [op for op in sales if op.type == OK][-3:],
        )
    return report


def _reserved(ops: list[Op]) -> dict[str, Op]:
    """The acknowledged reservations, by reservation id."""
    return {op.value["reservationId"]: op for op in ops if op.f == "reserve" and op.type == OK}


def late_confirms(ops: list[Op]) -> Report:
    """A confirm at or after its hold's end is refused: an acknowledged confirm whose ``now`` (the
    client's clock as the library read it and sent it) is at or past the reservation's
    ``expiresAt`` sold a hold that had ended, whose units a claim may take from that millisecond
    on. (A confirm that sent no ``now``, for example a repeat answered from its sold lead unit, is
    not judged.)"""
    report = Report()
    reservations = _reserved(ops)
    for op in ops:
        reservation = reservations.get(op.args.get("reservation", ""))
        if op.f != "confirm" or op.type != OK or "now" not in op.args or reservation is None:
            continue
        until = int(reservation.value["expiresAt"])
        report.expect(
            int(op.args["now"]) < until,
            "inventory",
            "a confirm at or after its hold's end is refused",
            f"{op.args['sku']}: {op.process} confirmed {op.args['reservation']} at "
            f"{op.args['now']} (its clock, ms), {int(op.args['now']) - until} ms after its hold "
            f"ended at {until}",
            [reservation, op],
        )
    return report


# Refusals after which nothing was written (a throttled call may have written: not definite).
_NOT_APPLIED = frozenset({"OUT_OF_STOCK", "Expired", "NotFound", "AlreadyConfirmed"})


def live_confirms(ops: list[Op]) -> Report:
    """A live holder's confirm succeeds, or its units were taken by a claim: a confirm refused
    (``Expired``, or ``NotFound`` once its lead unit names it no more) although its hold was live
    on its own clock (its ``now``, or, when it sent none, its clock when it began, before the
    reservation's ``expiresAt``) is explained by another reservation of the sku that may have
    claimed one of its units while it ran (acknowledged with one of them, or unanswered, or
    throttled), or by a cancel of its own. Nothing else takes or frees a held unit, so an
    unexplained refusal is a unit freed from under its live holder (a release that did not
    check whose the unit was)."""
    report = Report()
    reservations = _reserved(ops)
    for op in ops:
        reservation = reservations.get(op.args.get("reservation", ""))
        if op.f != "confirm" or op.type != FAIL or reservation is None:
            continue
        if (op.value or {}).get("error") not in ("Expired", "NotFound"):
            continue
        at = int(op.args.get("now", op.args["clock"]))
        until = int(reservation.value["expiresAt"])
        if at >= until:
            continue
        units = set(reservation.value["units"])
        rid = reservation.value["reservationId"]
        explained = [
            other
            for other in ops
            if other.invoked < op.completed
            and other.args.get("sku") == op.args["sku"]
            and (
                (other.f == "cancel" and other.args["reservation"] == rid)
                or (
                    other.f == "reserve"
                    and other is not reservation
                    and other.completed > reservation.invoked
                    and (
                        other.type == UNKNOWN
                        or (other.type == FAIL and other.value.get("error") not in _NOT_APPLIED)
                        or (other.type == OK and units & set(other.value["units"]))
                    )
                )
            )
        ]
        report.expect(
            bool(explained),
            "inventory",
            "a live holder's confirm succeeds",
            f"{op.args['sku']}: {op.process}'s confirm of {rid} (units {sorted(units)}) was "
            f"refused ({op.value['error']}) at {at} (its clock, ms), {until - at} ms before its "
            "hold ended, and no other reservation claimed any of its units",
            [reservation, op],
        )
    return report


def _overlap(a: Op, b: Op) -> bool:
    return a.invoked < b.completed and b.invoked < a.completed


def inventory_views(ops: list[Op]) -> Report:
    """The inventory view (``Inventory.exact``: counts from the units themselves) shows what the
    history left in the sku at the view's ``now`` (the clock it read): the units of acknowledged
    confirms sold, the units of the latest acknowledged reservation of each unit reserved while
    its ``expiresAt`` is after ``now`` (a hold at exactly its end is over: claimable, so
    available), every other unit available. Judged only where the history decides the sku's
    state: nothing on the sku overlapped the view, and every earlier operation on it was answered
    (acknowledged, or refused without writing), one after another."""
    report = Report()
    for view in ops:
        if view.f != "view" or view.type != OK or "now" not in view.args:
            continue
        sku = view.args["sku"]
        mine = [op for op in ops if op.args.get("sku") == sku and op.f != "view"]
        if any(_overlap(op, view) for op in mine):
            continue
        earlier = sorted(
            (op for op in mine if op.completed <= view.invoked), key=lambda o: o.invoked
        )
        definite = all(
            op.type == OK or (op.type == FAIL and op.value.get("error") in _NOT_APPLIED)
            for op in earlier
        )
        if not definite or any(_overlap(a, b) for a, b in itertools.pairwise(earlier)):
            continue
        units: dict[str, tuple[str, str, int]] = {}  # unit -> (status, holder, holdUntil)
        for op in earlier:
            if op.type != OK:
                continue
            if op.f == "reserve":
                for unit in op.value["units"]:
                    units[unit] = ("held", op.value["reservationId"], int(op.value["expiresAt"]))
            elif op.f in ("confirm", "cancel"):
                status = "sold" if op.f == "confirm" else "free"
                for unit, (was, holder, until) in list(units.items()):
                    if was == "held" and holder == op.args["reservation"]:
                        units[unit] = (status, holder, until)
        now = int(view.args["now"])
        sold = sum(1 for status, _, _ in units.values() if status == "sold")
        reserved = sum(1 for status, _, until in units.values() if status == "held" and until > now)
        expected = {
            "available": int(view.value["units"]) - sold - reserved,
            "reserved": reserved,
            "sold": sold,
        }
        shown = {name: int(view.value[name]) for name in expected}
        ends = {until for status, _, until in units.values() if status == "held"}
        report.expect(
            shown == expected,
            "inventory",
            "the inventory view shows the history's units",
            f"{sku}: the view at {now} (its clock, ms) shows {shown}, the history leaves "
            f"{expected} (holds ending at {sorted(ends)})",
            [*earlier[-3:], view],
        )
    return report
