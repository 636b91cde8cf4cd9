"""Step mode of ``make soak``: the decision of when a step of arrival rate is no longer held, and
the climb from step to step, apart from the stack that measures them (``bench.soak`` runs it).

A step is Locust at one arrival rate for a fixed time, judged after its first seconds (its new
users starting, the workers growing to the new concurrency); it is *held* when its p99 (all routes)
stays under a limit, no request got a 5xx and its errors (5xx and lost replies) stay under a
fraction of its requests. The climb raises the rate by a factor each step and stops at the first
step not held, or after a number of steps. Locust has load shapes, but a shape changes the number
of users, not what a step is judged on; this is the small part Locust does not do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

P99_LIMIT_MS = 2000.0
ERROR_RATE_LIMIT = 0.01
FACTOR = 1.5
MAX_STEPS = 8


@dataclass(frozen=True)
class Limits:
    """What a step must stay under to be held."""

    p99_ms: float = P99_LIMIT_MS
    error_rate: float = ERROR_RATE_LIMIT  # 5xx and lost replies, over the step's requests


@dataclass(frozen=True)
class Step:
    """One step as measured: its target rate (tasks a second), how long it ran, what it did."""

    rate: float
    seconds: float
    requests: int
    server_errors: int  # 5xx
    lost: int  # no reply (status 0: a timeout, a reset)
    p50_ms: float
    p99_ms: float
    load_average: float = 0.0

    @property
    def achieved_rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def error_rate(self) -> float:
        return (self.server_errors + self.lost) / self.requests if self.requests else 1.0


def failed(step: Step, limits: Limits) -> str | None:
    """Why the step was not held, or None when it was."""
    if step.requests == 0:
        return "no request was made"
    if step.server_errors:
        return f"{step.server_errors} 5xx"
    if step.error_rate > limits.error_rate:
        return f"error rate {step.error_rate:.2%} over {limits.error_rate:.2%}"
    if step.p99_ms > limits.p99_ms:
        return f"p99 {step.p99_ms:.0f} ms over {limits.p99_ms:.0f} ms"
    return None


def rates(start: float, factor: float, steps: int) -> list[float]:
    """The step rates: ``start``, then ``factor`` times the one before, ``steps`` of them."""
    if start <= 0 or factor <= 1 or steps < 1:
        raise ValueError("a climb needs start > 0, factor > 1 and at least one step")
    return [round(start * factor**i, 2) for i in range(steps)]


@dataclass
class Climb:
    """The steps run, in order, each with why it failed (None: held); the highest one held."""

    steps: list[tuple[Step, str | None]] = field(default_factory=list)

    @property
    def held(self) -> Step | None:
        kept = [step for step, why in self.steps if why is None]
        return kept[-1] if kept else None

    @property
    def stopped_because(self) -> str:
        last = self.steps[-1][1] if self.steps else None
        return f"{last} at {self.steps[-1][0].rate} tasks/s" if last else "the last step was held"

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                **asdict(step),
                "achieved_rps": round(step.achieved_rps, 2),
                "error_rate": round(step.error_rate, 4),
                "held": why is None,
                "failed_because": why,
            }
            for step, why in self.steps
        ]


def climb(
    measure: Callable[[float], Step],
    start: float,
    *,
    factor: float = FACTOR,
    max_steps: int = MAX_STEPS,
    limits: Limits | None = None,
) -> Climb:
    """Run ``measure(rate)`` for each rate of :func:`rates` until a step is not held."""
    limits = limits or Limits()
    done = Climb()
    for rate in rates(start, factor, max_steps):
        step = measure(rate)
        why = failed(step, limits)
        done.steps.append((step, why))
        if why is not None:
            break
    return done


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def step_of(
    lines: Iterable[Mapping[str, Any]],
    rate: float,
    seconds: float,
    load: float = 0.0,
    *,
    settle_seconds: float = 0.0,
) -> Step:
    """A step from the record's ``req`` lines (``bench.soak_locustfile``), judged on what came
    after its first ``settle_seconds``: the users a step adds start then, and the pool workers
    grow to the new concurrency with cold starts, which a rate that is held outlives."""
    reqs = [line for line in lines if line.get("kind") == "req"]
    start = min((float(line["t"]) for line in reqs), default=0.0)
    judged = [line for line in reqs if float(line["t"]) >= start + settle_seconds]
    ms = [float(line["ms"]) for line in judged]
    return Step(
        rate=rate,
        seconds=max(0.0, seconds - settle_seconds),
        requests=len(judged),
        server_errors=sum(1 for line in judged if int(line["status"]) >= 500),
        lost=sum(1 for line in judged if int(line["status"]) == 0),
        p50_ms=round(percentile(ms, 50), 1),
        p99_ms=round(percentile(ms, 99), 1),
        load_average=load,
    )
