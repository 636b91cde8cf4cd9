"""The history: one :class:`Op` per client operation, from invocation to its outcome.

An operation's outcome is ``ok`` (a 2xx with its body), ``fail`` (a definite 4xx: nothing was
applied by it) or ``unknown`` (a 5xx, a crash, a lost reply: it may or may not have been applied).
A keyed operation (``Idempotency-Key``) is one logical op across all its attempts: the client
retries it under the same key until it gets a definite answer or gives up; every attempt's answer
is kept in ``attempts``.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

OK, FAIL, UNKNOWN = "ok", "fail", "unknown"


@dataclass
class Op:
    index: int
    pattern: str
    process: str
    f: str  # what the client did: "purchase", "acquire", "write", "top-up", ...
    args: dict[str, Any]
    invoked: float  # monotonic seconds
    invoked_ms: int  # epoch ms (to compare with server-side expiry times)
    type: str = "invoke"  # then OK / FAIL / UNKNOWN
    completed: float = float("inf")
    completed_ms: int = 0
    status: int | None = None
    value: Any = None
    attempts: list[tuple[int | None, Any]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.type != "invoke"

    def describe(self, start: float = 0.0) -> str:
        end = "..." if self.completed == float("inf") else f"{self.completed - start:8.3f}"
        args = ", ".join(f"{k}={v}" for k, v in self.args.items())
        return (
            f"  #{self.index:<5} {self.invoked - start:8.3f} -> {end}  {self.process:<12} "
            f"{self.f}({args}) {self.type} {self.status if self.status is not None else ''} "
            f"{_short(self.value)}"
        )


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value) if value is not None else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class History:
    """Thread-safe, append-only."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.start = time.monotonic()
        self._lock = threading.Lock()
        self._ids = itertools.count()

    def invoke(self, pattern: str, process: str, f: str, **args: Any) -> Op:
        op = Op(
            next(self._ids), pattern, process, f, args, time.monotonic(), int(time.time() * 1000)
        )
        with self._lock:
            self.ops.append(op)
        return op

    @staticmethod
    def complete(op: Op, outcome: str, status: int | None = None, value: Any = None) -> Op:
        op.type = outcome
        op.status = status
        op.value = value
        op.completed = time.monotonic()
        op.completed_ms = int(time.time() * 1000)
        if outcome == UNKNOWN:
            op.completed = float("inf")  # it may take effect at any later time
        return op

    def of(self, pattern: str) -> list[Op]:
        with self._lock:
            return [op for op in self.ops if op.pattern == pattern]

    def around(self, ops: list[Op], context: int = 3) -> str:
        """The minimal history around a violation: the ops named, plus the ``context`` ops of
        the same pattern invoked just before and after each of them."""
        with self._lock:
            chosen = {op.index for op in ops}
            by_pattern: dict[str, list[Op]] = {}
            for op in self.ops:
                by_pattern.setdefault(op.pattern, []).append(op)
            for op in ops:
                same = by_pattern.get(op.pattern, [])
                position = next((i for i, o in enumerate(same) if o.index == op.index), None)
                if position is None:
                    continue
                for other in same[max(0, position - context) : position + context + 1]:
                    chosen.add(other.index)
            lines = [
                ("* " if op.index in {o.index for o in ops} else "  ") + op.describe(self.start)
                for op in self.ops
                if op.index in chosen
            ]
        return "\n".join(lines)
