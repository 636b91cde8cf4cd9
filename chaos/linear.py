"""Is a single-product counter's history linearizable? A small Wing-Gong-Lowe search.

The model is the product's stock. Operations, as the purchases checker hands them over:

* ``("buy", q, r)``, acknowledged: stock >= q before, and exactly ``r`` remains after.
* ``("refuse", q, a)``, a definite ``OUT_OF_STOCK`` with ``available = a``: the stock was ``a < q``.
* ``("maybe", q, None)``, unknown outcome: takes ``q`` (if there is that much) at any moment after
  its invocation, or never.

The search linearizes one operation at a time. An operation may come next only if it was invoked
before every other not-yet-linearized, *completed* operation returned (real-time order); unknown
operations never return, so they never constrain the others and may be left out. It succeeds when
every completed operation is placed and the final stock read from the table is reached from the
current one by some subset of the unknown operations not placed yet. Visited (placed set, stock)
pairs are cached, as in Lowe's algorithm, which keeps the search small at the concurrency used here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CounterOp:
    kind: str  # "buy" | "refuse" | "maybe"
    quantity: int
    value: int | None  # remaining stock (buy), available (refuse)
    invoked: float
    completed: float  # inf for "maybe"
    ref: int = -1  # index of the history op


@dataclass
class Verdict:
    ok: bool
    explored: int
    inconclusive: bool = False
    stuck_at: list[CounterOp] | None = None  # the ops that could not be placed (for the report)


def _step(op: CounterOp, stock: int) -> int | None:
    if op.kind == "buy":
        assert op.value is not None
        return op.value if stock >= op.quantity and stock - op.quantity == op.value else None
    if op.kind == "refuse":
        return stock if stock == op.value and stock < op.quantity else None
    return stock - op.quantity if stock >= op.quantity else None


def subset_reaches(quantities: Sequence[int], start: int, target: int) -> bool:
    """Can ``start`` become ``target`` by taking away some of ``quantities`` (each at most once)?"""
    need = start - target
    if need < 0:
        return False
    sums = {0}
    for q in quantities:
        sums |= {s + q for s in sums if s + q <= need}
    return need in sums


def check(
    ops: Sequence[CounterOp], initial: int, final: int | None, budget: int = 500_000
) -> Verdict:
    ops = sorted(ops, key=lambda o: o.invoked)
    n = len(ops)
    required = sum(1 << i for i, op in enumerate(ops) if op.kind != "maybe")
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[int, int]] = [(0, initial)]
    explored = 0
    deepest = 0
    while stack:
        placed, stock = stack.pop()
        if (placed, stock) in seen:
            continue
        seen.add((placed, stock))
        explored += 1
        if explored > budget:
            return Verdict(True, explored, inconclusive=True)
        if placed & required == required:
            rest = [ops[i].quantity for i in range(n) if not placed >> i & 1]
            if final is None or subset_reaches(rest, stock, final):
                return Verdict(True, explored)
        if bin(placed & required).count("1") > bin(deepest & required).count("1"):
            deepest = placed
        horizon = min(
            (ops[i].completed for i in range(n) if not placed >> i & 1 and required >> i & 1),
            default=float("inf"),
        )
        for i in range(n):
            if placed >> i & 1:
                continue
            op = ops[i]
            if op.invoked >= horizon:
                break  # sorted by invocation: nothing later may come next either
            after = _step(op, stock)
            if after is not None:
                stack.append((placed | 1 << i, after))
    stuck = [ops[i] for i in range(n) if not deepest >> i & 1 and required >> i & 1]
    return Verdict(False, explored, stuck_at=stuck[:6])
