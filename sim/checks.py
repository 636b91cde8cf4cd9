"""Judging a simulated history: chaos's checkers where their history format fits, plus one
property chaos does not check (its lease checker judges fences, not time).

* purchases: :func:`chaos.checkers.purchases` (no oversell, stock accounting, a linearizable
  counter), and :func:`keyed_answers` over the keyed ones (an answer under a key is for its own
  request, a key refused as reused only when it was, a stored answer never one said "not
  applied");
* leases: :func:`chaos.checkers.leases` (one holder per fence, fences increase, no stale fenced
  write, fenced writes accounted), and properties chaos does not check:
  :func:`overlapping_holds`, :func:`granted_as_asked`, :func:`granted_when_free` and
  :func:`no_write_after_expiry`;
* reservations: :func:`chaos.checkers.inventory` (no unit held twice, exactly q units or none,
  sold once, sold units accounted, the table against the history) and :func:`bounded_cost`;
* sharded products: :func:`sharded_stock` (chaos's purchase checker assumes no restocks and a
  linearizable remaining stock, which a sharded receipt does not promise);
* the lease queue: :func:`chaos.checkers.queue` (run in :mod:`sim.run`), with
  :func:`overlapping_holds`, :func:`granted_as_asked` and :func:`granted_when_free` over its
  holds too;
* fenced updates (:mod:`sim.fenced`): :func:`fenced_updates`;
* reservation edges (:mod:`sim.reservation_edges`): :func:`chaos.checkers.inventory`,
  :func:`late_confirms`, :func:`live_confirms` and :func:`inventory_views`.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import FAIL, OK, UNKNOWN, Op
from sim.scheduler import EPOCH
from sim.workloads import Cost, Hold
from turnstile_ddb import idempotency


def overlapping_holds(holds: list[Hold]) -> Report:
    """No two holders of one resource believed they held it at the same virtual time.

    A holder believes it holds from its acquisition's reply until it releases or its own clock
    passes ``expiresAt`` minus the safety margin (see :class:`sim.workloads.Hold`); with every
    client's skew inside the bound lease.py assumes, those intervals must not intersect.
    """
    report = Report()
    by_resource: dict[str, list[Hold]] = defaultdict(list)
    for hold in holds:
        # A holder answered only after its own belief ended (its take sent after a pause, its
        # reply late) never believed it held: an empty interval, which overlaps nothing.
        if hold.end > hold.start:
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


def granted_when_free(holds: list[Hold]) -> Report:
    """No lease granted while another was still live: the lease an acquisition replaced (its
    write's ALL_OLD image) was released (``expiresAt`` 0) or had expired strictly before the
    grant's own ``now``.

    The boundary, as ``turnstile_ddb.lease`` decides it: a lease whose ``expiresAt`` equals the
    acquirer's ``now`` is still live (an acquisition needs ``expiresAt < now``). In that same
    millisecond its holder's fenced writes are already refused (the guard needs
    ``expiresAt > now``) while its release is still accepted (``expiresAt >= now``): the last
    millisecond belongs to no writer and to no successor. Both clocks are the ones the condition
    compares (the previous acquirer's and this one's), so this holds to the millisecond whatever
    the skew.
    """
    report = Report()
    for hold in holds:
        if hold.previous is None:
            continue
        expiry = int(hold.previous["expiresAt"])
        report.expect(
            expiry < hold.granted_at_ms,
            "leases",
            "no lease granted while another was live",
            f"{hold.resource}: {hold.owner} (fence {hold.fence}) granted at {hold.granted_at_ms} "
            f"(its clock, ms) over {hold.previous['owner']} (fence {hold.previous['fence']}), "
            f"whose lease ran until {expiry}"
            + (" (the very millisecond: still live)" if expiry == hold.granted_at_ms else ""),
            [hold.op],
        )
    return report


def no_write_after_expiry(ops: list[Op]) -> Report:
    """No fenced transaction (``Leases.transact``) acknowledged when it was sent at or after its
    lease's expiry by the writer's own clock: the guard refuses ``expiresAt <= now`` whether or
    not anyone took the lease since, so a holder paused past its lease writes nothing. (A write
    that pauses *after* reading its clock can still land later: that is what the fence is for,
    judged by ``chaos.checkers.leases``.) Only the plain leases' writes: their lease is never
    renewed, so the expiry the holder knows is the stored one."""
    report = Report()
    for op in ops:
        if op.pattern != "leases" or op.f != "write" or op.type != OK or "at" not in op.args:
            continue
        report.expect(
            int(op.args["at"]) < int(op.args["expiresAt"]),
            "leases",
            "no fenced write under an expired lease",
            f"{op.args['resource']}: {op.process}'s write with fence {op.args['fence']} sent at "
            f"{op.args['at']} (its clock, ms) was accepted; its lease expired at "
            f"{op.args['expiresAt']}",
            [op],
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
    """Sharded products, per product: no shard below zero (so no oversell, whatever raced), in
    the final table nor in any count a client learned meanwhile (``lowestShardSeen``, which a
    later restock cannot hide), and
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
        seen = [op for op in mine if (op.value or {}).get("lowestShardSeen", 0) < 0]
        report.expect(
            not seen,
            "sharded",
            "no shard seen below zero",
            f"{product_id}: a client learned a shard count below zero",
            seen[:5],
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


def fenced_updates(ops: list[Op], logs: dict[str, list[int]]) -> Report:
    """``fenced_update``, per protected item: one accepted write per fence, in fence order.

    * the fences the item accepted (its log, one entry per accepted write) strictly increase: a
      fence accepted twice, or after a newer one, is a write the fence should have refused;
    * every acknowledged write is in the log, and every logged fence was carried by a write that
      was not refused;
    * no write is acknowledged when an acknowledged write answered before it was sent already
      carried its fence or a newer one (a write carrying a fence already used is refused).
    """
    report = Report()
    writes_by: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f in ("write", "write-again"):
            writes_by[op.args["resource"]].append(op)
    for resource in sorted(set(writes_by) | set(logs)):
        writes, log = writes_by.get(resource, []), logs.get(resource, [])
        report.expect(
            all(x < y for x, y in itertools.pairwise(log)),
            "fenced",
            "fences accepted in strictly increasing order",
            f"{resource}: the item accepted fences in the order {log[-12:]}",
            [op for op in writes if op.type == OK][-4:],
        )
        acknowledged = {int(op.args["fence"]) for op in writes if op.type == OK}
        possible = {int(op.args["fence"]) for op in writes if op.type != FAIL}
        report.expect(
            acknowledged <= set(log) <= possible,
            "fenced",
            "fenced writes accounted",
            f"{resource}: acknowledged {sorted(acknowledged - set(log))} missing from the item, "
            f"unexplained {sorted(set(log) - possible)} in it",
            [op for op in writes if int(op.args["fence"]) in acknowledged ^ set(log)][:6],
        )
        accepted = [op for op in writes if op.type == OK]
        for write in accepted:
            earlier = [
                op
                for op in accepted
                if op.completed < write.invoked
                and int(op.args["fence"]) >= int(write.args["fence"])
            ]
            report.expect(
                not earlier,
                "fenced",
                "a fence already used is refused",
                f"{resource}: {write.f} with fence {write.args['fence']} by {write.process} "
                f"accepted after fence {earlier[0].args['fence'] if earlier else '?'} had been",
                [*earlier[:1], write],
            )
    return report


def capacity_rows(ops: list[Op], events: dict[str, Any]) -> Report:
    """Every counter item of an event (the event item, or each shard's counter of a sharded
    event) within its limit and not below zero, and the counters together counting exactly the
    registrations present. Not each shard its own registrations: a cancellation whose shard is
    throttled gives the place back at another shard that counts one
    (:func:`turnstile_ddb.sharded.leave`), so only the sum is the invariant. ``events``:
    :meth:`sim.signup.Signup.state`'s."""
    report = Report()
    for event_id, event in events.items():
        mine = [op for op in ops if op.args.get("event") == event_id and op.type == OK]
        counts = [count for count, _ in event["counters"]]
        for shard, (count, limit) in enumerate(event["counters"]):
            report.expect(
                0 <= count <= limit,
                "registrations",
                "a counter within its limit",
                f"{event_id}: counter {shard} holds {count} of a limit of {limit}",
                mine[-5:],
            )
        report.expect(
            sum(counts) == len(event["users"]),
            "registrations",
            "the counters count the registrations",
            f"{event_id}: counters say {counts}, registrations {event['users']}",
            mine[-5:],
        )
    return report


def _undone_from(op: Op, cancels: list[Op]) -> float:
    """When a registration acknowledged by ``op`` may first have been undone: the invocation of
    the first cancel of the same user that may have taken effect after it (virtual seconds)."""
    return min((c.invoked for c in cancels if c.completed > op.invoked), default=float("inf"))


def seats_in_time(ops: list[Op], events: dict[str, Any]) -> Report:
    """Sign-ups against time, per event: an acknowledged registration surely holds a seat from
    its answer until the first cancel of that user that may have taken effect after it is
    invoked. Never more such seats at one time than the capacity; one never cancelled exists at
    the end; every registration that exists at the end was asked for and not surely cancelled
    afterwards (a register that did not fail, with no acknowledged cancel invoked after its
    answer); and a refusal for a full event never reports more registered than the capacity."""
    report = Report()
    for event_id, event in events.items():
        capacity = event["capacity"]
        mine = [op for op in ops if op.args.get("event") == event_id]
        cancels: dict[str, list[Op]] = defaultdict(list)
        for op in mine:
            if op.f == "cancel":
                cancels[op.args["user"]].append(op)
        seats: list[tuple[float, float, Op]] = []
        for op in mine:
            if op.f == "register" and op.type == OK:
                end = _undone_from(op, cancels[op.args["user"]])
                if end > op.completed:
                    seats.append((op.completed, end, op))
        # a sweep over the seats' starts and ends; at one instant, ends first (half-open)
        marks = sorted(
            [(start, 1, op.index) for start, _, op in seats]
            + [(end, 0, op.index) for _, end, op in seats if end != float("inf")]
        )
        held: set[int] = set()
        worst: set[int] = set()
        for _, starts, index in marks:
            if starts:
                held.add(index)
                if len(held) > len(worst):
                    worst = set(held)
            else:
                held.discard(index)
        report.expect(
            len(worst) <= capacity,
            "registrations",
            "never more seats than the capacity",
            f"{event_id}: {len(worst)} acknowledged registrations held seats at once, "
            f"capacity {capacity}",
            [op for _, _, op in seats if op.index in worst],
        )
        for _, end, op in seats:
            if end == float("inf"):
                report.expect(
                    op.args["user"] in event["users"],
                    "registrations",
                    "an acknowledged registration exists",
                    f"{event_id}: {op.args['user']} was registered, never cancelled, and is not",
                    [op],
                )
        for user in event["users"]:
            asked = [
                op
                for op in mine
                if op.f == "register" and op.args["user"] == user and op.type != FAIL
            ]
            cancelled = [c for c in cancels[user] if c.type == OK]
            report.expect(
                any(all(c.invoked < op.completed for c in cancelled) for op in asked),
                "registrations",
                "every registration was asked for",
                f"{event_id}: {user} is registered, but no sign-up explains it",
                asked[-3:] + cancelled[-3:],
            )
        for op in mine:
            if op.f == "register" and op.type == FAIL and "registered" in (op.value or {}):
                report.expect(
                    op.value["registered"] <= capacity,
                    "registrations",
                    "a refusal within the capacity",
                    f"{event_id}: refused as full with {op.value['registered']} registered, "
                    f"capacity {capacity}",
                    [op],
                )
    return report


def slots_booked_once(ops: list[Op], holders: dict[str, Any]) -> Report:
    """Slots: an acknowledged booking surely holds its slot from its answer until its holder's
    release is invoked; no two of them on one slot overlap. A release by the holder of an
    acknowledged booking is never refused as not the holder's. At the end each slot is held by
    the holder of an acknowledged booking never released, or of a booking whose release was not
    acknowledged, or of a booking whose outcome is unknown; and every acknowledged booking never
    released still holds its slot."""
    report = Report()
    releases = {(op.args["slot"], op.args["holder"]): op for op in ops if op.f == "release"}
    by_slot: dict[str, list[tuple[float, float, Op]]] = defaultdict(list)
    for op in ops:
        if op.f == "book" and op.type == OK:
            slot = op.value["slot"]
            release = releases.get((slot, op.args["holder"]))
            end = release.invoked if release is not None else float("inf")
            by_slot[slot].append((op.completed, end, op))
    for slot, spans in by_slot.items():
        spans.sort(key=lambda span: (span[0], span[2].index))
        latest: tuple[float, float, Op] | None = None
        for span in spans:
            if latest is not None:
                report.expect(
                    latest[1] <= span[0],
                    "slots",
                    "no slot booked twice",
                    f"{slot}: booked by {latest[2].args['holder']} until "
                    f"{latest[1] - EPOCH:.3f} and by {span[2].args['holder']} from "
                    f"{span[0] - EPOCH:.3f} (virtual seconds)",
                    [latest[2], span[2]],
                )
            if latest is None or span[1] > latest[1]:
                latest = span
        for _, end, op in spans:
            if end == float("inf"):
                report.expect(
                    holders.get(slot) == op.args["holder"],
                    "slots",
                    "a booking never released still holds its slot",
                    f"{slot}: booked by {op.args['holder']}, held by {holders.get(slot)}",
                    [op],
                )
    for op in ops:
        if op.f == "release" and op.type == FAIL:
            report.expect(
                op.value.get("error") != "NOT_HOLDER",
                "slots",
                "a holder's release is its own",
                f"{op.args['slot']}: {op.args['holder']} released it, but "
                f"{op.value.get('holder')} held it",
                [op],
            )
    released = {key for key, op in releases.items() if op.type == OK}
    unknown = {op.args["holder"] for op in ops if op.f == "book" and op.type == UNKNOWN}
    for slot, holder in holders.items():
        if holder is None:
            continue
        booked = any(op.args["holder"] == holder for _, _, op in by_slot.get(slot, []))
        report.expect(
            (booked and (slot, holder) not in released) or holder in unknown,
            "slots",
            "every holder booked its slot",
            f"{slot}: held by {holder}, which no unreleased booking explains",
            [op for op in ops if op.args.get("holder") == holder],
        )
    return report


def _request(op: Op) -> tuple[Any, Any]:
    return op.args["product"], op.args["quantity"]


def _receipt_of(answer: Any) -> tuple[Any, Any]:
    """The request a purchase receipt answers (product, quantity)."""
    body = answer if isinstance(answer, dict) else {}
    return body.get("productId"), body.get("quantity")


def keyed_answers(ops: list[Op], records: dict[str, dict[str, Any]]) -> Report:
    """Idempotency keys, over the keyed purchases (some clients reuse a key for another request,
    as a buggy client would) and the keys' records at the end (:meth:`Purchases.records`):

    * **an answer under a key is for its own request**: an acknowledged keyed purchase's receipt
      names its own product and quantity (the first request's answer replayed for another
      request names the first's);
    * **a key is refused as reused only when it was**: ``IDEMPOTENCY_KEY_REUSED`` answers a
      request only after another request was sent under its key;
    * **a stored answer was not answered "not applied"**: a key whose answer is stored (its
      purchase happened: they commit in one transaction) stores it for a request under the key
      that was acknowledged or left unknown, and the answer is that request's. A request answered
      "not applied" (a refusal, a throttle, its key refused as reused) must not have been, and
      a reused key's other request must not have taken the key.
    """
    report = Report()
    by_key: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f == "purchase" and "key" in op.args:
            by_key[op.args["key"]].append(op)
    for key, mine in sorted(by_key.items()):
        for op in mine:
            if op.type == OK:
                first = [o for o in mine if o is not op and o.value == op.value]
                report.expect(
                    _receipt_of(op.value) == _request(op),
                    "idempotency",
                    "an answer under a key is for its own request",
                    f"key {key}: {op.process} asked {_request(op)} and was answered a receipt "
                    f"for {_receipt_of(op.value)}",
                    [op, *first[:1]],
                )
            body = op.value if isinstance(op.value, dict) else {}
            if op.type == FAIL and body.get("error") == "IDEMPOTENCY_KEY_REUSED":
                before = [o for o in mine if o.invoked < op.invoked and o.index != op.index]
                report.expect(
                    any(_request(o) != _request(op) for o in before),
                    "idempotency",
                    "a key is refused as reused only when it was",
                    f"key {key}: {_request(op)} refused as reused; sent before under it: "
                    f"{[_request(o) for o in before]}",
                    [op, *before[:3]],
                )
        record = records.get(key)
        if record is None or record.get("status") != idempotency.COMPLETED:
            continue  # no purchase committed under the key (a claim alone changes nothing)
        owners = [
            op for op in mine if idempotency.fingerprint(*_request(op)) == record["fingerprint"]
        ]
        report.expect(
            any(op.type in (OK, UNKNOWN) for op in owners)
            and _receipt_of(record["answer"]) in {_request(op) for op in owners},
            "idempotency",
            'a stored answer was not answered "not applied"',
            f"key {key} stores a receipt for {_receipt_of(record['answer'])}; its requests: "
            + ", ".join(f"{_request(op)} {op.type}" for op in mine),
            mine[:4],
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


@dataclass(frozen=True)
class OpRule:
    """A property each op it ``applies`` to must have on its own (``holds``); ``message`` says
    how one broke it."""

    pattern: str
    check: str
    applies: Callable[[Op], bool]
    holds: Callable[[Op], bool]
    message: Callable[[Op], str]

    def __call__(self, ops: list[Op]) -> Report:
        report = Report()
        for op in ops:
            if self.applies(op):
                report.expect(self.holds(op), self.pattern, self.check, self.message(op), [op])
        return report


# A reservation answered as held has a hold still live on its client's clock when the answer
# came (``answered``, epoch ms): one whose ``expiresAt`` had passed is dead on arrival (its
# confirm can only be refused, and its units are anyone's).
live_on_arrival = OpRule(
    "inventory",
    "a reservation is answered with a live hold",
    applies=lambda op: op.f == "reserve" and op.type == OK and "answered" in op.args,
    holds=lambda op: int(op.value["expiresAt"]) > int(op.args["answered"]),
    message=lambda op: (
        f"{op.args['sku']}: {op.process}'s reservation was answered at"
        f" {int(op.args['answered'])} (its clock, ms) with a hold that ended at"
        f" {int(op.value['expiresAt'])}"
    ),
)

# No call of an intruder (``<client>:intruder``, :mod:`sim.adversary`) is acknowledged: a caller
# that presents another holder's fence under an owner name of its own may neither renew, nor
# release, nor write fenced.
intruders_refused = OpRule(
    "adversary",
    "a caller that does not hold a lease is refused",
    applies=lambda op: op.process.endswith(":intruder"),
    holds=lambda op: op.type != OK,
    message=lambda op: (
        f"{op.process}'s {op.f} of {op.args['resource']} under {op.args['owner']}'s fence"
        f" {op.args['fence']} was acknowledged (its clock read {op.args.get('now')})"
    ),
)

# A holder's release sent while its lease was live on its own clock (``now`` up to its
# ``expiresAt`` included: the release accepts ``expiresAt >= :now``) is not refused as lost, when
# nobody else could take the lease (:mod:`sim.adversary`: a resource of the holder's own, which
# its intruders cannot acquire).
live_releases = OpRule(
    "adversary",
    "a holder's release of its live lease is accepted",
    applies=lambda op: op.f == "release" and bool(op.args.get("holder")) and "now" in op.args,
    holds=lambda op: (
        not (op.type == FAIL and (op.value or {}).get("error") == "LeaseLost")
        or int(op.args["now"]) > int(op.args["expiresAt"])
    ),
    message=lambda op: (
        f"{op.process}'s release of {op.args['resource']} at {op.args['now']} (its clock, ms)"
        f" was refused although its lease ran until {op.args['expiresAt']}"
    ),
)


def takeovers_after_lock(ops: list[Op]) -> Report:
    """An idempotency claim is taken over only once its lock has passed: a begin acknowledged
    with a claim of a key another caller had claimed (``:now`` its first clock reading) came
    strictly after that claim's ``lockedUntil`` (the lock is live at its very millisecond)."""
    report = Report()
    first: dict[str, Op] = {}
    for op in ops:
        if op.f != "begin" or op.type != OK or "token" not in (op.value or {}):
            continue
        earlier = first.setdefault(op.args["key"], op)
        if earlier is op:
            continue
        locked = int(earlier.value["lockedUntil"])
        report.expect(
            int(op.args["now"]) > locked,
            "adversary",
            "an idempotency claim is taken over only after its lock",
            f"{op.process} took {op.args['key']} over at {op.args['now']} (its clock, ms) from"
            f" {earlier.process}'s claim locked until {locked}",
            [earlier, op],
        )
    return report


def late_completions(ops: list[Op]) -> Report:
    """A first owner whose idempotency claim was taken over cannot complete it: no completion
    of the first claim (``first``) is acknowledged after a takeover of its key was acknowledged
    before the completion was sent."""
    report = Report()
    takeovers: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f == "begin" and op.type == OK and ":" in op.process and "token" in op.value:
            takeovers[op.args["key"]].append(op)
    for op in ops:
        if op.f != "complete" or not op.args.get("first") or op.type != OK:
            continue
        before = [t for t in takeovers[op.args["key"]] if t.completed < op.invoked]
        report.expect(
            not before,
            "adversary",
            "a claim taken over cannot be completed by its first owner",
            f"{op.process} completed {op.args['key']} at {op.invoked_ms} (ms) although"
            f" {before[0].process if before else ''} had taken it over first",
            [*before, op],
        )
    return report
