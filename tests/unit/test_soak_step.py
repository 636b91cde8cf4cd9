"""Step mode of ``make soak`` (``bench.soak_step``): when a step of arrival rate counts as held,
and how the climb goes from step to step, on made-up measurements (no stack, no Locust)."""

from __future__ import annotations

import pytest

from bench.soak_step import Limits, Step, climb, failed, rates, step_of

LIMITS = Limits(p99_ms=2000.0, error_rate=0.01)


def a_step(
    rate: float = 10.0,
    *,
    requests: int = 1000,
    server_errors: int = 0,
    lost: int = 0,
    p99_ms: float = 400.0,
) -> Step:
    return Step(rate, 60.0, requests, server_errors, lost, 50.0, p99_ms)


def test_a_step_under_every_limit_is_held() -> None:
    assert failed(a_step(p99_ms=2000.0, lost=10), LIMITS) is None


def test_a_step_fails_on_its_p99_over_the_limit() -> None:
    assert failed(a_step(p99_ms=2000.1), LIMITS) == "p99 2000 ms over 2000 ms"


def test_a_step_fails_on_a_single_5xx() -> None:
    assert failed(a_step(server_errors=1), LIMITS) == "1 5xx"


def test_a_step_fails_when_lost_replies_pass_the_error_rate() -> None:
    assert failed(a_step(lost=10), LIMITS) is None
    assert failed(a_step(lost=11), LIMITS) == "error rate 1.10% over 1.00%"


def test_a_step_that_made_no_request_is_not_held() -> None:
    assert failed(a_step(requests=0), LIMITS) == "no request was made"


def test_the_rates_grow_by_the_factor() -> None:
    assert rates(10, 1.5, 4) == [10, 15, 22.5, 33.75]
    with pytest.raises(ValueError):
        rates(10, 1.0, 4)


def test_the_climb_stops_at_the_first_step_not_held_and_keeps_the_one_before() -> None:
    # Given a server whose p99 passes 2 s above 30 tasks a second
    asked: list[float] = []

    def measure(rate: float) -> Step:
        asked.append(rate)
        return a_step(rate, requests=int(rate * 120), p99_ms=3000.0 if rate > 30 else 500.0)

    # When the climb starts at 10 and grows by half each step
    done = climb(measure, 10, factor=1.5, max_steps=8, limits=LIMITS)
    # Then it ran 10, 15, 22.5 and 33.75, stopped there, and held 22.5 (45 requests a second)
    assert asked == [10, 15, 22.5, 33.75]
    assert done.held is not None and done.held.rate == 22.5
    assert done.held.achieved_rps == 45.0
    assert done.stopped_because == "p99 3000 ms over 2000 ms at 33.75 tasks/s"
    assert [row["held"] for row in done.rows()] == [True, True, True, False]


def test_a_climb_whose_first_step_fails_holds_nothing() -> None:
    done = climb(lambda rate: a_step(rate, server_errors=3), 10, limits=LIMITS)
    assert done.held is None and len(done.steps) == 1


def test_a_climb_every_step_of_which_is_held_stops_after_max_steps() -> None:
    done = climb(lambda rate: a_step(rate), 10, factor=2, max_steps=3, limits=LIMITS)
    assert done.held is not None and done.held.rate == 40
    assert done.stopped_because == "the last step was held"


def test_a_step_is_read_from_the_record_lines() -> None:
    lines = [{"kind": "req", "t": 100.0, "ms": float(ms), "status": 200} for ms in range(1, 99)]
    lines += [
        {"kind": "req", "t": 100.0, "ms": 5000.0, "status": 502},
        {"kind": "req", "t": 100.0, "ms": 9000.0, "status": 0},
    ]
    lines += [{"kind": "op", "pattern": "products"}]
    step = step_of(lines, 10.0, 20.0)
    assert (step.requests, step.server_errors, step.lost) == (100, 1, 1)
    assert step.p99_ms == 5000.0 and step.p50_ms == 50.0
    assert step.achieved_rps == 5.0 and step.error_rate == 0.02


def test_a_step_is_judged_after_its_settling_seconds() -> None:
    # Given a step whose first 15 s had its new users' cold starts, and the rest was fast
    lines = [{"kind": "req", "t": 100.0 + i / 10, "ms": 4000.0, "status": 200} for i in range(100)]
    lines += [{"kind": "req", "t": 115.0 + i / 10, "ms": 80.0, "status": 200} for i in range(300)]
    # When it is judged after 15 s, it is held; judged whole, it is not
    settled = step_of(lines, 10.0, 45.0, settle_seconds=15.0)
    assert (settled.requests, settled.seconds, settled.p99_ms) == (300, 30.0, 80.0)
    assert failed(settled, LIMITS) is None
    assert failed(step_of(lines, 10.0, 45.0), LIMITS) == "p99 4000 ms over 2000 ms"
