"""``python -m bench --only adaptive --quick``: the ramp in short steps on an adaptive product and
an adaptive event against DynamoDB Local under the capacity model, through the service's domain
code and its resizer. Checked for the shape of what it writes and for its invariants (nothing
oversold, the table's totals exact), never for its times or rates."""

from __future__ import annotations

import json

from bench import adaptive
from bench.__main__ import run_adaptive

RUN_FIELDS = {
    "name",
    "one_key_limit",
    "steps",
    "oversold",
    "resizes",
    "resize_wcu",
    "final_shards",
    "totals",
}
STEP_FIELDS = ["offered", "achieved", "direction", "shards", "grown", "throttles", "5xx"]


def test_the_quick_ramp_writes_every_step_of_both_runs_and_sells_nothing_twice(
    dynamodb_local, tables, tmp_path
):
    # When the section runs with short steps
    out = tmp_path / "adaptive.json"
    run_adaptive(dynamodb_local, tables.names, quick=True, out=out)
    document = json.loads(out.read_text())
    # Then it wrote a product run and an event run, each with the named fields
    runs = document["runs"]
    assert [run["name"].split()[0] for run in runs] == ["product", "event"]
    peak = adaptive.RAMP.index(max(adaptive.RAMP))
    for run in runs:
        assert set(run) == RUN_FIELDS, run["name"]
        assert run["one_key_limit"] > 0 and run["final_shards"] >= 1
        # And a step per multiple of the ramp, offered that multiple of one key's limit
        steps = run["steps"]
        assert [list(step) for step in steps] == [STEP_FIELDS] * len(adaptive.RAMP)
        assert [step["offered"] for step in steps] == [
            round(m * run["one_key_limit"], 2) for m in adaptive.RAMP
        ]
        assert [step["direction"] for step in steps] == ["up"] * (peak + 1) + ["down"] * (
            len(adaptive.RAMP) - peak - 1
        )
        assert all(step["shards"] >= 1 and step["achieved"] >= 0 for step in steps)
        # And every resize has its cost
        assert run["resizes"] == len(run["resize_wcu"])
        assert all(wcu > 0 for wcu in run["resize_wcu"])
        # And nothing was sold twice, and the table's totals agree with the answers
        assert run["oversold"] == 0, run["totals"]
        assert run["totals"]["exact"] is True, run["totals"]
    assert runs[1]["totals"]["counted"] == runs[1]["totals"]["members"]
    assert len(document["load_average"]) == 3
