"""Judging a simulated history: chaos's checkers where their history format fits, plus one
property chaos does not check (its lease checker judges fences, not time).

* purchases: :func:`chaos.checkers.purchases` (no oversell, stock accounting, a linearizable
  counter), and :func:`keyed_answers` over the keyed ones (an answer under a key is for its own
  request, a key refused as reused only when it was, a stored answer never one said "not
  applied");
* leases: :func:`chaos.checkers.leases` (one holder per fence, fences increase, no stale fenced
  write, fenced writes accounted), and two properties chaos does not check:
  :func:`overlapping_holds` and :func:`granted_as_asked`;
* reservations: :func:`chaos.checkers.inventory` (no unit held twice, exactly q units or none,
  sold once, sold units accounted, the table against the history) and :func:`bounded_cost`;
* sharded products: :func:`sharded_stock` (chaos's purchase checker assumes no restocks and a
  linearizable remaining stock, which a sharded receipt does not promise);
* the lease queue: :func:`chaos.checkers.queue` (run in :mod:`sim.run`), with
  :func:`overlapping_holds` and :func:`granted_as_asked` over its holds too.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
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
