"""Per-pattern checkers: they judge the history and the final table state, nothing else.

Each checker returns a :class:`Report`: how many checks it ran and the violations it found, each
with the history ops that show it. What is checked, per pattern, is written in each function's
docstring; every check follows the README's guarantees and the HTTP contract (docs/http-api.md),
not incidental behaviour.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos import linear
from chaos.history import FAIL, OK, UNKNOWN, Op
from turnstile_ddb import sharded


@dataclass
class Violation:
    pattern: str
    check: str
    message: str
    ops: list[Op] = field(default_factory=list)


@dataclass
class Report:
    checks: int = 0
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def expect(
        self, holds: bool, pattern: str, check: str, message: str, ops: Iterable[Op] = ()
    ) -> None:
        self.checks += 1
        if not holds:
            self.violations.append(Violation(pattern, check, message, list(ops)))

    def merge(self, other: Report) -> Report:
        self.checks += other.checks
        self.violations.extend(other.violations)
        self.notes.extend(other.notes)
        return self


def subset_sum_reaches(items: Sequence[tuple[int, int]], count: int, total: int) -> bool:
    """Is there a subset of ``items`` (count, amount) pairs adding up to (count, total)?"""
    if count < 0 or total < 0:
        return False
    reachable = {(0, 0)}
    for c, a in items:
        reachable |= {
            (rc + c, ra + a) for rc, ra in reachable if rc + c <= count and ra + a <= total
        }
    return (count, total) in reachable


def _ok_ids(op: Op, field_name: str) -> set[Any]:
    return {
        body[field_name]
        for status, body in op.attempts
        if status is not None and 200 <= status < 300 and isinstance(body, dict)
        if field_name in body
    }


def _one_effect_per_key(
    report: Report, pattern: str, ops: list[Op], field_name: str, *, unique: bool = True
) -> None:
    """A keyed op's attempts all return the same receipt; with ``unique``, no receipt id belongs
    to two ops."""
    owners: dict[Any, Op] = {}
    for op in ops:
        ids = _ok_ids(op, field_name)
        report.expect(
            len(ids) <= 1,
            pattern,
            "one effect per key",
            f"one Idempotency-Key got {len(ids)} different {field_name}s: {sorted(ids)}",
            [op],
        )
        for value in ids if unique else ():
            other = owners.setdefault(value, op)
            report.expect(
                other is op,
                pattern,
                "one effect per key",
                f"{field_name} {value} answered two different operations",
                [other, op],
            )


def no_bugs(ops: list[Op]) -> Report:
    """The contract: a 5xx means an outage (503, 502 from the payment provider) or a bug (500).
    Outages are expected under the nemesis; a 500 never is."""
    report = Report()
    for op in ops:
        for status, body in op.attempts:
            report.expect(
                status != 500,
                op.pattern,
                "no 500",
                f"{op.f} answered 500: {body}",
                [op],
            )
    return report


# -- purchases ---------------------------------------------------------------------------------


def purchases(
    ops: list[Op], products: Sequence[tuple[str, int]], final: dict[str, int | None]
) -> Report:
    """Per product: no oversell (stock >= 0, acknowledged sales <= initial stock); final stock =
    initial - acknowledged sales - some subset of the unknown ones; one effect per key; and the
    acknowledged remaining-stock values (and refusals' ``available``) fit some serial order that
    respects real time (:mod:`chaos.linear`)."""
    report = Report()
    by_product: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f == "purchase":
            by_product[op.args["product"]].append(op)
    _one_effect_per_key(report, "purchases", ops, "purchaseId")
    for product_id, initial in products:
        mine = by_product.get(product_id, [])
        stock = final.get(product_id)
        stock_conserved(report, "purchases", product_id, initial, stock, mine)
        if stock is None:
            continue
        counter_ops = []
        for op in mine:
            body = op.value if isinstance(op.value, dict) else {}
            if op.type == OK:
                counter_ops.append(
                    linear.CounterOp(
                        "buy",
                        op.args["quantity"],
                        int(body["remainingStock"]),
                        op.invoked,
                        op.completed,
                        op.index,
                    )
                )
            elif op.type == FAIL and body.get("error") == "OUT_OF_STOCK" and "available" in body:
                counter_ops.append(
                    linear.CounterOp(
                        "refuse",
                        op.args["quantity"],
                        int(body["available"]),
                        op.invoked,
                        op.completed,
                        op.index,
                    )
                )
            elif op.type == UNKNOWN:
                counter_ops.append(
                    linear.CounterOp(
                        "maybe", op.args["quantity"], None, op.invoked, float("inf"), op.index
                    )
                )
        verdict = linear.check(counter_ops, initial, stock)
        if verdict.inconclusive:
            report.notes.append(f"{product_id}: linearizability search gave up after its budget")
        stuck = {o.ref for o in verdict.stuck_at or []}
        report.expect(
            verdict.ok,
            "purchases",
            "linearizable counter",
            f"{product_id}: no serial order explains the acknowledged remaining-stock values "
            f"(initial {initial}, final {stock}; searched {verdict.explored} states)",
            [op for op in mine if op.index in stuck],
        )
    return report


def stock_conserved(
    report: Report, pattern: str, product_id: str, initial: int, stock: int | None, mine: list[Op]
) -> None:
    """One product's stock against its purchases ``mine``: no oversell (the final ``stock`` is
    there and not negative, acknowledged sales <= ``initial``), and ``stock`` = ``initial`` -
    acknowledged sales - some subset of the sales of unknown outcome (nothing lost)."""
    acknowledged = [op for op in mine if op.type == OK]
    unknown = [op for op in mine if op.type == UNKNOWN]
    sold = sum(op.args["quantity"] for op in acknowledged)
    report.expect(
        stock is not None and stock >= 0 and sold <= initial,
        pattern,
        "no oversell",
        f"{product_id}: initial {initial}, acknowledged sales {sold}, final stock {stock}",
        acknowledged[-5:],
    )
    if stock is None:
        return
    report.expect(
        linear.subset_reaches([op.args["quantity"] for op in unknown], initial - sold, stock),
        pattern,
        "stock accounting",
        f"{product_id}: initial {initial} - acknowledged {sold} - final {stock} = "
        f"{initial - stock - sold}, not a sum of unknown purchases "
        f"{[op.args['quantity'] for op in unknown]}",
        unknown[:5] + acknowledged[-3:],
    )


# -- registrations -----------------------------------------------------------------------------


@dataclass
class EventState:
    capacity: int
    registered: int
    users: set[str]
    requests: dict[str, str]  # requestId -> status


def registrations(
    ops: list[Op],
    final: dict[str, EventState],
    dead_letters: set[str],
    ttl_deleted: set[str],
    *,
    pattern: str = "registrations",
) -> Report:
    """Per event: ``registered`` <= capacity and equals the registrations that exist; nobody is
    registered twice (a second acknowledged registration of a user needs a cancel in between);
    every acknowledged registration request ends ACCEPTED or REJECTED, or in the dead letters, or
    was decided and then removed by TTL, never silently PENDING or lost."""
    report = Report()
    _one_effect_per_key(report, pattern, ops, "registeredAt", unique=False)
    for event_id, state in final.items():
        report.expect(
            state.registered <= state.capacity,
            pattern,
            "capacity",
            f"{event_id}: registered {state.registered} > capacity {state.capacity}",
        )
        report.expect(
            state.registered == len(state.users),
            pattern,
            "counter matches registrations",
            f"{event_id}: registered {state.registered}, registration items {len(state.users)}",
        )
        mine = [op for op in ops if op.args.get("event") == event_id]
        by_user: dict[str, list[Op]] = defaultdict(list)
        for op in mine:
            by_user[op.args["user"]].append(op)
        for user, user_ops in by_user.items():
            joins = sorted(
                (op for op in user_ops if op.f == "register" and op.type == OK),
                key=lambda o: o.completed,
            )
            cancels = [op for op in user_ops if op.f == "cancel" and op.type != FAIL]
            for first, second in itertools.pairwise(joins):
                if second.invoked < first.completed:
                    continue  # concurrent: only one of them can be a fresh seat, checked above
                between = [
                    c
                    for c in cancels
                    if c.invoked < second.completed and c.completed > first.invoked
                ]
                report.expect(
                    bool(between),
                    pattern,
                    "nobody twice",
                    f"{event_id}: {user} got a second seat with no cancel in between",
                    [first, second],
                )
        for op in mine:
            if op.f != "request" or op.type != OK:
                continue
            request_id = op.value["requestId"]
            status = state.requests.get(request_id)
            decided = status in ("ACCEPTED", "REJECTED")
            report.expect(
                decided or request_id in dead_letters or request_id in ttl_deleted,
                pattern,
                "async request decided",
                f"{event_id}: request {request_id} is {status or 'gone'} after the stream drained",
                [op],
            )
    return report


# -- leases ------------------------------------------------------------------------------------


def leases(ops: list[Op], logs: dict[str, list[int]], *, pattern: str = "leases") -> Report:
    """Per resource: at most one holder per fence; fences strictly increase in real time; the
    protected item accepted fenced writes in strictly increasing fence order (none from a stale
    fence), exactly the acknowledged ones plus some unknown ones; no fenced write was acknowledged
    after a newer fence had been handed out."""
    report = Report()
    by_resource: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f in ("acquire", "write"):
            by_resource[op.args["resource"]].append(op)
    for resource, mine in by_resource.items():
        acquired = [op for op in mine if op.f == "acquire" and op.type == OK]
        holders: dict[int, Op] = {}
        for op in acquired:
            fence = int(op.value["fence"])
            other = holders.setdefault(fence, op)
            report.expect(
                other is op,
                pattern,
                "one holder per fence",
                f"{resource}: fence {fence} handed to {other.args['owner']} and {op.args['owner']}",
                [other, op],
            )
        ordered = sorted(acquired, key=lambda o: o.completed)
        for a in ordered:
            later = [b for b in ordered if b.invoked > a.completed]
            if later:
                b = min(later, key=lambda o: int(o.value["fence"]))
                report.expect(
                    int(b.value["fence"]) > int(a.value["fence"]),
                    pattern,
                    "fences increase",
                    f"{resource}: fence {b.value['fence']} acquired after fence "
                    f"{a.value['fence']} had been",
                    [a, b],
                )
        log = logs.get(resource, [])
        report.expect(
            all(x < y for x, y in itertools.pairwise(log)),
            pattern,
            "no stale fenced write",
            f"{resource}: the protected item accepted fences in the order {log[-12:]}",
        )
        writes = [op for op in mine if op.f == "write"]
        acknowledged = {int(op.args["fence"]) for op in writes if op.type == OK}
        possible = {int(op.args["fence"]) for op in writes if op.type != FAIL}
        report.expect(
            acknowledged <= set(log) and set(log) <= possible,
            pattern,
            "fenced writes accounted",
            f"{resource}: acknowledged {sorted(acknowledged - set(log))} missing from the item, "
            f"unexplained {sorted(set(log) - possible)} in it",
            [op for op in writes if int(op.args["fence"]) in acknowledged ^ set(log)][:6],
        )
        for write in writes:
            if write.type != OK:
                continue
            newer = [
                a
                for a in acquired
                if int(a.value["fence"]) > int(write.args["fence"]) and a.completed < write.invoked
            ]
            report.expect(
                not newer,
                pattern,
                "no stale fenced write",
                f"{resource}: write with fence {write.args['fence']} accepted after fence "
                f"{newer[0].value['fence'] if newer else '?'} was handed out",
                [write, *newer[:1]],
            )
    return report


# -- the lease queue ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueBounds:
    """What the queue promises, from its settings: a waiter silent for ``expiry_s`` (L) may be
    passed over, a live one never; a dead holder is taken over within L + H + one poll, here
    plus ``slack_s`` for a loaded machine."""

    heartbeat_s: float
    expiry_s: float
    poll_s: float
    slack_s: float = 1.0
    idle_s: float = 0.0  # how long a waiter that never said it was next may stay silent (I)

    @property
    def fair_skew_s(self) -> float:
        """A clock skewed by more than this (H/4: two clocks then differ by more than H/2)
        excuses unfairness: the queue assumes clocks closer than that."""
        return self.heartbeat_s / 4

    @property
    def takeover_s(self) -> float:
        return self.expiry_s + self.heartbeat_s + self.poll_s + self.slack_s


@dataclass(frozen=True)
class Disturbance:
    """A fault the nemesis logged: ``at`` on the history's clock, on thread ``process``;
    ``skew`` is the clock skew it set (clock_skew faults), else 0."""

    at: float
    kind: str
    process: str
    skew: float = 0.0


def _disturbed(
    process: str, start: float, end: float, faults: Sequence[Disturbance], skewed: set[str]
) -> bool:
    """Did anything excuse a slow or passed-over waiter in [start, end]: a fault on its own thread
    (a pause, a throttle burst, a lost reply, a crash), or any queue client's clock skewed (a
    skewed clock may pass a live waiter over early: fairness assumes bounded skew, safety not)."""
    if skewed:
        return True
    return any(f.process == process and start - 0.5 <= f.at <= end for f in faults)


def _skewed_at(
    at: float, faults: Sequence[Disturbance], processes: set[str], limit: float = 0.1
) -> set[str]:
    """The queue clients whose clock was skewed by more than ``limit`` (s) at time ``at``."""
    current: dict[str, float] = {}
    for fault in sorted(faults, key=lambda f: f.at):
        if fault.at > at:
            break
        if fault.kind == "clock_skew" and fault.process in processes:
            current[fault.process] = fault.skew
    return {process for process, skew in current.items() if abs(skew) > limit}


def queue(
    ops: list[Op],
    logs: dict[str, list[int]],
    faults: Sequence[Disturbance],
    bounds: QueueBounds,
) -> Report:
    """The lease queue: everything :func:`leases` checks (one holder per fence, fences increase,
    no stale fenced write, writes accounted), plus, per resource:

    * **FIFO order**: acquisitions served in fence order carry strictly increasing tickets (a
      waiter is only ever served on the head ticket, and the head only moves forward);
    * **no live waiter passed over**: a waiter that had to take a second ticket was silent for L
      (killed, paused, or slowed by a fault of its own) or some queue client's clock was skewed;
    * **no live waiter overtaken by a later arrival**: no acquisition, queued or plain, that
      arrived after a waiter took its first ticket is served before that waiter (a lower fence),
      unless the waiter was silent for L (a fault of its own) or some queue client's clock was
      skewed; a plain acquisition may clear a queue only when its waiters are gone;
    * **takeover bound**: after a holder died without releasing, a waiter already waiting when its
      lease ran out is served within L + H + one poll (+ slack), unless a fault or a skewed clock
      excuses it.

    A note counts the queued acquisitions served and refused, and the plain ones, so a run shows
    the properties were exercised and not only bounded-wait refusals.
    """
    report = leases(ops, logs, pattern="queue")
    processes = {op.process for op in ops}
    by_resource: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        by_resource[op.args["resource"]].append(op)
    checked = 0
    for resource, mine in by_resource.items():
        served = sorted(
            (op for op in mine if op.f == "acquire" and op.type == OK),
            key=lambda o: int(o.value["fence"]),
        )
        queued = [op for op in served if op.value.get("ticket") is not None]
        for a, b in itertools.pairwise(queued):
            report.expect(
                int(a.value["ticket"]) < int(b.value["ticket"]),
                "queue",
                "FIFO order",
                f"{resource}: fence {b.value['fence']} served ticket {b.value['ticket']} after "
                f"fence {a.value['fence']} served ticket {a.value['ticket']}",
                [a, b],
            )
        for op in mine:
            if op.f != "acquire" or not isinstance(op.value, dict):
                continue
            if len(op.value.get("tickets", [])) < 2 or op.args.get("role") != "normal":
                continue
            end = op.completed if op.completed != float("inf") else op.invoked + 30
            skewed = _skewed_at(end, faults, processes, bounds.fair_skew_s)
            report.expect(
                _disturbed(op.process, op.invoked, end, faults, skewed),
                "queue",
                "no live waiter passed over",
                f"{resource}: {op.args['owner']} was passed over (tickets "
                f"{op.value['tickets']}) with no fault, pause or clock skew to excuse it",
                [op],
            )
        checked += _no_overtaking(report, resource, served, faults, processes, bounds)
        for kill in (op for op in mine if op.f == "kill"):
            dead_fence = int(kill.args["fence"])
            expiry = kill.invoked + bounds.expiry_s  # its lease ran out by then at the latest
            nxt = next((o for o in served if int(o.value["fence"]) == dead_fence + 1), None)
            if nxt is None or nxt.invoked > expiry or nxt.completed == float("inf"):
                continue  # nobody was waiting when it ran out
            skewed = _skewed_at(nxt.completed, faults, processes, bounds.fair_skew_s)
            if _disturbed(nxt.process, nxt.invoked, nxt.completed, faults, skewed):
                continue
            silent_s = max(bounds.expiry_s, bounds.idle_s)
            others = [  # a dead or paused waiter ahead may cost up to L (or I) more
                f
                for f in faults
                if f.kind in ("kill", "pause") and kill.invoked - silent_s <= f.at
                if f.at <= nxt.completed and not (f.process == kill.process and f.kind == "kill")
            ]
            if others:
                continue
            took = nxt.completed - kill.invoked
            report.expect(
                took <= bounds.takeover_s,
                "queue",
                "takeover bound",
                f"{resource}: fence {dead_fence}'s holder died; fence {dead_fence + 1} was "
                f"served {took:.2f} s later (bound {bounds.takeover_s:.2f} s)",
                [kill, nxt],
            )
    report.notes.append(_queue_counts(ops, checked))
    return report


def _no_overtaking(
    report: Report,
    resource: str,
    served: list[Op],
    faults: Sequence[Disturbance],
    processes: set[str],
    bounds: QueueBounds,
) -> int:
    """No acquisition that arrived after a live waiter took its ticket holds a lower fence;
    returns how many live waiters it checked."""
    checked = 0
    for waiter in served:
        since = waiter.value.get("ticketedAt")
        if since is None or waiter.args.get("role") != "normal":
            continue
        skewed = _skewed_at(waiter.completed, faults, processes, bounds.fair_skew_s)
        if _disturbed(waiter.process, waiter.invoked, waiter.completed, faults, skewed):
            continue
        checked += 1
        fence = int(waiter.value["fence"])
        later = [op for op in served if op.invoked > since and int(op.value["fence"]) < fence]
        report.expect(
            not later,
            "queue",
            "no live waiter overtaken by a later arrival",
            f"{resource}: {waiter.args['owner']} (ticket {waiter.value['ticket']}, fence {fence})"
            + "".join(
                f" was overtaken by {op.args['owner']} ({op.args.get('role')}, fence "
                f"{op.value['fence']}), which arrived after it queued"
                for op in later[:1]
            ),
            [waiter, *later[:1]],
        )
    return checked


def _queue_counts(ops: list[Op], overtaking_checked: int) -> str:
    """How many queued and plain acquisitions were served and refused."""
    acquires = [op for op in ops if op.f == "acquire"]
    plain = [op for op in acquires if op.args.get("role") == "plain"]
    queued = [op for op in acquires if op.args.get("role") != "plain"]
    refused = [op for op in queued if op.type == FAIL and op.status == 409]
    return (
        f"queue: {sum(op.type == OK for op in queued)} queued acquisitions served, "
        f"{len(refused)} refused at their deadline, "
        f"{sum(op.type == UNKNOWN for op in queued)} unknown, "
        f"{len(queued) - len(refused) - sum(op.type in (OK, UNKNOWN) for op in queued)} killed; "
        f"plain: {sum(op.type == OK for op in plain)} served, "
        f"{sum(op.type == FAIL for op in plain)} refused; "
        f"{overtaking_checked} live waiters checked for overtaking"
    )


# -- wallets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Charge:
    charge_id: str
    wallet_id: str
    amount: int
    refunded: bool


def wallets(ops: list[Op], final: dict[str, tuple[int, int]], charges: Sequence[Charge]) -> Report:
    """Per wallet: balance and top-up count = the acknowledged top-ups plus some subset of the
    unknown ones; one effect per key; every acknowledged top-up's charge stands (not refunded, same
    amount); no credit without a charge, and charges without a credit only for unknown top-ups."""
    report = Report()
    _one_effect_per_key(report, "wallets", ops, "topUpId")
    standing = {c.charge_id: c for c in charges if not c.refunded}
    for wallet_id, (balance, count) in final.items():
        mine = [op for op in ops if op.args.get("wallet") == wallet_id]
        acknowledged = [op for op in mine if op.type == OK]
        unknown = [op for op in mine if op.type == UNKNOWN]
        credited = sum(op.args["amount"] for op in acknowledged)
        report.expect(
            subset_sum_reaches(
                [(1, op.args["amount"]) for op in unknown],
                count - len(acknowledged),
                balance - credited,
            ),
            "wallets",
            "balance accounting",
            f"{wallet_id}: balance {balance} ({count} top-ups) vs acknowledged {credited} "
            f"({len(acknowledged)}); unknown {[op.args['amount'] for op in unknown]}",
            unknown[:4] + acknowledged[-3:],
        )
        for op in acknowledged:
            charge = standing.get(op.value.get("chargeId", ""))
            report.expect(
                charge is not None
                and charge.amount == op.args["amount"]
                and charge.wallet_id == wallet_id,
                "wallets",
                "acknowledged charge stands",
                f"{wallet_id}: top-up {op.value.get('topUpId')} acknowledged but its charge "
                f"{op.value.get('chargeId')} is {charge or 'refunded or missing'}",
                [op],
            )
        mine_charges = [c for c in standing.values() if c.wallet_id == wallet_id]
        extra = len(mine_charges) - count
        report.expect(
            0 <= extra <= len(unknown) and sum(c.amount for c in mine_charges) >= balance,
            "wallets",
            "one charge per credit",
            f"{wallet_id}: {len(mine_charges)} standing charges "
            f"({sum(c.amount for c in mine_charges)}) for {count} credits ({balance}); "
            f"{len(unknown)} unknown top-ups",
            unknown[:6],
        )
    return report


# -- inventory ---------------------------------------------------------------------------------


@dataclass
class SkuState:
    units: dict[str, str]  # unit id -> status
    summary: dict[str, int] | None  # the stream-kept counts, None when not comparable
    # unit id -> the reservation id its item names (held or sold units), when the runner read it
    holders: dict[str, str] | None = None


def _table_holds(sku: str, state: SkuState, mine: list[Op], report: Report) -> None:
    """The final table against the history, per reservation id the units name (their pools do
    not matter: a reservation may take units from several). A reservation whose units are sold
    has exactly its q units sold (a confirm sells all or none, and a sold unit never changes):
    the q and the units its reply gave, or, when its reply was lost, the q of one of the
    reservations whose outcome is unknown. A unit still held names either an acknowledged
    reservation that listed it, or one whose reply was lost; and no more reservations hold
    units without a reply than there were reservations with no reply."""
    if state.holders is None:
        return
    answered = {op.value["reservationId"]: op for op in mine if op.f == "reserve" and op.type == OK}
    unknown = [op for op in mine if op.f == "reserve" and op.type == UNKNOWN]
    unknown_q = {int(op.args["quantity"]) for op in unknown}
    held: dict[str, list[str]] = defaultdict(list)
    sold: dict[str, list[str]] = defaultdict(list)
    for unit, holder in state.holders.items():
        status = state.units.get(unit)
        if status == "sold":
            sold[holder].append(unit)
        elif status == "held":
            held[holder].append(unit)
    for holder, units in sold.items():
        op = answered.get(holder)
        if op is not None:
            report.expect(
                sorted(units) == sorted(op.value["units"]),
                "inventory",
                "exactly q units or none",
                f"{sku}: reservation {holder} of {op.args['quantity']} has {sorted(units)} sold, "
                f"its reply named {sorted(op.value['units'])}",
                [op],
            )
        else:
            report.expect(
                len(units) in unknown_q,
                "inventory",
                "exactly q units or none",
                f"{sku}: {len(units)} units sold to {holder}, an unacknowledged reservation; "
                f"the unknown ones asked for {sorted(unknown_q)}",
                unknown,
            )
    for holder, units in held.items():
        op = answered.get(holder)
        report.expect(
            (op is not None and set(units) <= set(op.value["units"]))
            or (op is None and len(units) <= max(unknown_q, default=0)),
            "inventory",
            "no unit held twice",
            f"{sku}: units {sorted(units)} held by {holder}, which "
            + ("did not list them" if op is not None else "no reservation explains"),
            [op] if op is not None else unknown,
        )
    strangers = {h for h in (*sold, *held) if h not in answered}
    report.expect(
        len(strangers) <= len(unknown),
        "inventory",
        "no unit held twice",
        f"{sku}: {len(strangers)} reservations without a reply hold units, "
        f"but only {len(unknown)} replies were lost",
        unknown,
    )


def _hold_start(reservation: Op) -> int:
    return int(reservation.value["expiresAt"]) - int(reservation.args["hold"] * 1000)


def _follows(first: Op, then: Op, cancels: Mapping[str, list[Op]]) -> bool:
    """``then`` may have taken a unit after ``first``'s hold on it ended: ``first`` was cancelled
    before ``then`` answered, or ``then`` was decided after ``first`` lapsed."""
    released = any(
        c.type != FAIL and c.invoked < then.completed
        for c in cancels.get(first.value["reservationId"], [])
    )
    return released or _hold_start(then) >= int(first.value["expiresAt"])


def _freed_between(first: Op, then: Op, others: list[Op], cancels: Mapping[str, list[Op]]) -> bool:
    """``then`` may have taken the unit after a third reservation had taken it from ``first``
    (after ``first`` lapsed or was cancelled) and had been cancelled in turn: ``then`` decided
    earlier than that third one (its clock reading is older), but its write, retried, landed
    after the cancel, while the unit was free."""
    return any(
        other is not first
        and other is not then
        and _follows(first, other, cancels)
        and any(
            c.type != FAIL and c.invoked < then.completed
            for c in cancels.get(other.value["reservationId"], [])
        )
        for other in others
    )


def inventory(ops: list[Op], final: dict[str, SkuState]) -> Report:
    """Per sku: no unit held by two reservations at once (a later reservation of a unit needs the
    earlier one cancelled or lapsed first, and never once it was confirmed); no unit in two
    acknowledged confirms; the sold units are the acknowledged confirms' plus some of the unknown
    ones'; the stream-kept summary equals the counts of the units once the stream drained; and,
    when the final state names the units' holders, the table itself (:func:`_table_holds`)."""
    report = Report()
    for sku, state in final.items():
        mine = [op for op in ops if op.args.get("sku") == sku]
        _table_holds(sku, state, mine, report)
        reservations = {
            op.value["reservationId"]: op for op in mine if op.f == "reserve" and op.type == OK
        }
        confirms: dict[str, list[Op]] = defaultdict(list)
        cancels: dict[str, list[Op]] = defaultdict(list)
        for op in mine:
            if op.f == "confirm":
                confirms[op.args["reservation"]].append(op)
            elif op.f == "cancel":
                cancels[op.args["reservation"]].append(op)
        for op in reservations.values():
            units = list(op.value.get("units", []))
            report.expect(
                len(units) == int(op.args["quantity"]) and len(set(units)) == len(units),
                "inventory",
                "exactly q units or none",
                f"{sku}: reservation {op.value['reservationId']} of {op.args['quantity']} "
                f"holds {units}",
                [op],
            )
        holders: dict[str, list[Op]] = defaultdict(list)
        for op in reservations.values():
            for unit in op.value["units"]:
                holders[unit].append(op)
        for unit, held_by in holders.items():
            # A hold starts when the server decided it: expiresAt - holdSeconds (server clock).
            # The write lands later, anywhere before the reply: a slow request decided first may
            # write after a faster one was cancelled, so either order may explain a pair.
            held_by.sort(key=_hold_start)
            for a, b in itertools.pairwise(held_by):
                if not _follows(a, b, cancels) and _follows(b, a, cancels):
                    a, b = b, a
                rid = a.value["reservationId"]
                report.expect(
                    _follows(a, b, cancels) or _freed_between(a, b, held_by, cancels),
                    "inventory",
                    "no unit held twice",
                    f"{sku}: unit {unit} reserved by {b.value['reservationId']} while "
                    f"{rid} still held it",
                    [a, b],
                )
                sold_first = [
                    c for c in confirms.get(rid, []) if c.type == OK and c.completed < b.invoked
                ]
                report.expect(
                    not sold_first,
                    "inventory",
                    "no unit held twice",
                    f"{sku}: unit {unit} reserved by {b.value['reservationId']} after "
                    f"{rid} bought it",
                    [a, *sold_first, b],
                )
        sold_by: dict[str, list[Op]] = defaultdict(list)
        for rid, ops_for in confirms.items():
            if rid in reservations and any(c.type == OK for c in ops_for):
                for unit in reservations[rid].value["units"]:
                    sold_by[unit].append(next(c for c in ops_for if c.type == OK))
        for unit, sellers in sold_by.items():
            report.expect(
                len(sellers) == 1,
                "inventory",
                "sold once",
                f"{sku}: unit {unit} confirmed by {len(sellers)} reservations",
                sellers,
            )
        acknowledged = set(sold_by)
        maybe = {
            unit
            for rid, ops_for in confirms.items()
            if rid in reservations and any(c.type == UNKNOWN for c in ops_for)
            for unit in reservations[rid].value["units"]
        }
        sold = {unit for unit, status in state.units.items() if status == "sold"}
        report.expect(
            acknowledged <= sold <= acknowledged | maybe,
            "inventory",
            "sold units accounted",
            f"{sku}: acknowledged-but-not-sold {sorted(acknowledged - sold)[:8]}, "
            f"sold-but-never-confirmed {sorted(sold - acknowledged - maybe)[:8]}",
        )
        if state.summary is not None:
            counted = {"available": 0, "reserved": 0, "sold": 0}
            names = {"free": "available", "held": "reserved", "sold": "sold"}
            for status in state.units.values():
                counted[names[status]] += 1
            report.expect(
                state.summary == counted,
                "inventory",
                "summary converges",
                f"{sku}: summary {state.summary} but the units count {counted}",
            )
    return report


# -- resizing ----------------------------------------------------------------------------------


@dataclass
class ShardedState:
    """A sharded counter and its shard items as the end of the run found them: every item whose
    key is ``<base>#<k>``, by that key."""

    counter: sharded.ShardedCounter
    rows: dict[str, dict[str, Any]]
    members: set[str] = field(default_factory=set)  # a sharded capacity's: who holds a place


def shard_layout(
    report: Report,
    pattern: str,
    rows: Mapping[str, Mapping[str, Any]],
    counter: sharded.ShardedCounter,
    resizes: list[Op],
    *,
    bounded: bool = True,
) -> list[Mapping[str, Any]]:
    """The counter's shard items in shard order (``rows``: items by key), after checking its
    layout: items for exactly ``k < N`` (N as stored, or as built when never resized), one N and
    one generation on all of them (:meth:`ShardedCounter.layout_of`), no generation answered by
    two of ``resizes``, and a generation raised once by each transaction they applied. With
    ``bounded``, ``resizes`` are every resize there was, so the generation is also at most what
    they may have made; a deployed service resizes on its own too, and there it is not."""
    prefix = f"{counter.base}#"
    found = {int(pk.removeprefix(prefix)): row for pk, row in rows.items() if pk.startswith(prefix)}
    first = counter.layout_of(found.get(0, {}))
    stored, generation = first.shards, first.generation
    where = f"{counter.base}: items {sorted(found)}, N {stored}"
    report.expect(sorted(found) == list(range(stored)), pattern, "shards 0 to N-1", where)
    layouts = {
        (layout.shards, layout.generation) for layout in map(counter.layout_of, found.values())
    }
    shown = [f"{n} shards at generation {g}" for n, g in sorted(layouts)]
    report.expect(len(layouts) <= 1, pattern, "one layout", f"{counter.base}: {shown}")
    committed = [op for op in resizes if op.type == OK and op.value["items"] > 0]
    answered = [int(op.value["generation"]) for op in committed]
    report.expect(
        len(answered) == len(set(answered)),
        pattern,
        "one resize per generation",
        f"{counter.base}: generations answered {answered}",
        committed,
    )
    # each transaction a resize applied raises the generation by one (a shrink makes one per
    # dropped shard, and one of unknown outcome may have made any number, up to the most shards)
    made = sum(int(op.value["steps"]) for op in committed)
    unknown = sum(1 for op in resizes if op.type == UNKNOWN)
    most = made + unknown * sharded.MAX_SHARDS if bounded else float("inf")
    report.expect(
        made <= generation <= most,
        pattern,
        "each resize raised the generation",
        f"{counter.base}: generation {generation}, {made} resize steps acknowledged, "
        f"{unknown} resizes unknown",
        committed[-3:],
    )
    return [found[k] for k in sorted(found)]


def resizing(
    ops: list[Op],
    products: Sequence[tuple[str, int]],
    final: Mapping[str, ShardedState],
    events: Sequence[tuple[str, int]] = (),
) -> Report:
    """A resizer grows and shrinks the shards of adaptive products and events while sales,
    sign-ups and cancellations go on through the functions (whose own resizer resizes too,
    unrecorded: the layout's generation has no upper bound, :func:`shard_layout`). Per product:
    the stock checks of :func:`purchases` (:func:`stock_conserved` over the shards added up, one
    receipt per purchase: no unit sold twice) but the linearizable counter (a sharded sale's
    ``remainingStock`` is a lower bound), no shard below zero, and the layout. Per event (a
    sharded capacity, ``capacity=True`` resizes): the layout, the shards' limits adding up to the
    capacity, no shard over its limit or below zero, and :func:`registrations`' checks with the
    shards' counts added up (each member counted once, nobody registered twice)."""
    report = Report()
    sales = [op for op in ops if op.f == "purchase"]
    _one_effect_per_key(report, "resizing", sales, "purchaseId")
    for product_id, initial in products:
        mine = [op for op in sales if op.args["product"] == product_id]
        state = final.get(product_id)
        if state is None:
            stock_conserved(report, "resizing", product_id, initial, None, mine)
            continue
        counts, _ = _resized(report, ops, product_id, state)
        stock_conserved(report, "resizing", product_id, initial, sum(counts), mine)
    for event_id, capacity in events:
        state = final[event_id]
        counts, limits = _resized(report, ops, event_id, state, capacity=True)
        report.expect(
            sum(limits) == capacity,
            "resizing",
            "places kept",
            f"{event_id}: capacity {capacity}, the shards' limits {limits}",
        )
        seats = EventState(capacity, sum(counts), state.members, {})
        joins = [op for op in ops if op.f in ("register", "cancel")]
        report.merge(registrations(joins, {event_id: seats}, set(), set(), pattern="resizing"))
    return report


def _resized(
    report: Report, ops: list[Op], base: str, state: ShardedState, *, capacity: bool = False
) -> tuple[list[int], list[int]]:
    """The layout of ``base``'s shards (:func:`shard_layout`, against the resizes of ``base`` in
    ``ops``) and no shard below zero (a ``capacity``: nor over its limit); their counts and
    limits (a counter's: its counts), in shard order."""
    counter = state.counter
    resizes = [op for op in ops if op.f == "resize" and op.args["counter"] == base]
    rows = shard_layout(report, "resizing", state.rows, counter, resizes, bounded=False)
    report.expect(
        all(counter.count_attr in row for row in rows),
        "resizing",
        "shards 0 to N-1",
        f"{base}: a shard item without {counter.count_attr!r} (an update made it, not a resize)",
    )
    counts = [int(row.get(counter.count_attr, 0)) for row in rows]
    if not capacity:
        report.expect(
            min(counts, default=0) >= 0, "resizing", "no oversell", f"{base}: shards {counts}"
        )
        return counts, counts
    limits = [int(row.get(counter.limit_attr, 0)) for row in rows]
    report.expect(
        all(0 <= count <= limit for count, limit in zip(counts, limits, strict=True)),
        "resizing",
        "never over the limit",
        f"{base}: the shards hold {counts} of {limits}",
    )
    return counts, limits
