"""The adaptive bench's arithmetic (``bench.adaptive``), on made-up requests and samples: when
requests are due, and what a step reports from what was answered and sampled."""

from __future__ import annotations

from bench import adaptive

PACE = adaptive.Pace(step_seconds=10.0, settle_seconds=4.0, tail_seconds=5.0, sample_seconds=1.0)
RAMP = (1.0, 4.0, 1.0)
LIMIT = 10.0  # one key: 10 requests/s


def test_the_schedule_offers_each_steps_rate_for_its_length_then_the_tail() -> None:
    due = adaptive.schedule(LIMIT, PACE, RAMP)
    # 10/s for 10 s, 40/s for 10 s, 10/s for 10 s, then 10/s for the 5 s tail
    assert len(due) == 100 + 400 + 100 + 50
    assert due == sorted(due) and due[0] == 0.0 and due[-1] < 35.0
    assert due[100] == 10.0 and due[101] == 10.025  # the second step at 40/s
    assert due[600] == 30.0  # the tail begins where the ramp ends


def test_a_step_reports_its_settled_rate_when_it_grew_and_only_the_5xx_after() -> None:
    # Given the step at 4x (offered 40/s) grown at 13 s (6 shards: 60/s >= 1.5 x 40/s), with
    # two 503s before that and one 500 after, and 30 sales answered after its first 4 s
    samples = [(float(t), 1 if t < 13 else 6, 5 * t) for t in range(0, 31)]
    results = [(0, 12.0, "503", 0), (1, 12.5, "503", 0), (2, 15.0, "500:Boom", 0)]
    results += [(10 + i, 14.0 + i * 0.1, "ok", 1) for i in range(30)]
    results += [(50, 13.9, "ok", 1)]  # in the first 4 s of the step: not settled
    steps = adaptive.steps(results, samples, LIMIT, PACE, RAMP)
    step = steps[1]
    # Then the step says so, field by field
    assert list(step) == ["offered", "achieved", "direction", "shards", "grown", "throttles", "5xx"]
    assert step["offered"] == 40.0 and step["direction"] == "up"
    assert step["achieved"] == 5.0  # 30 sales over the 6 settled seconds
    assert step["shards"] == 6 and step["grown"] is True and step["5xx"] == 1
    assert step["throttles"] == 50  # the model's count went from 50 (at 10 s) to 100 (at 20 s)
    # And a step that never grew counts all its 5xx; the step after the peak is "down"
    first = adaptive.steps([(0, 1.0, "503", 0)], [(0.0, 1, 0)], LIMIT, PACE, RAMP)[0]
    assert first["grown"] is False and first["5xx"] == 1
    assert [s["direction"] for s in steps] == ["up", "up", "down"]
