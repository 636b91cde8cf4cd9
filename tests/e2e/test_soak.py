"""``make soak`` as a user runs it, for one minute at a low rate: the smoke of the sustained-load
run (docs/soak.md). It starts its own stack, as ``make local`` wires one, from this session's
synthesized template, runs Locust against it, checks the invariants from the tables and writes
the report; here the report must be complete, with no 5xx and no invariant broken."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import make

FIELDS = (
    "minutes",
    "rate_rps",
    "requests",
    "errors_5xx",
    "invariant_violations",
    "rss_growth",
    "p99_drift",
    "errors_by_status",
    "latency_ms",
    "rss_kb",
    "log_bytes",
    "load_average",
)


def test_a_one_minute_soak_reports_everything_with_no_5xx_and_no_broken_invariant(
    assembly: Any, tmp_path: Path
) -> None:
    # Given the synthesized stack (this session's synth: -o synth, no second one)
    template = Path(assembly.directory) / "Turnstile.template.json"
    out = tmp_path / "soak.json"
    # When make soak runs for a minute at four tasks a second
    done = make(
        "-o", "synth", "soak", "MINUTES=1", "RATE=4", f"TEMPLATE={template}", f"OUT={out}"
    )  # fmt: skip
    # Then it succeeded, and its report has every field, no 5xx and every invariant held
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [f for f in FIELDS if f not in report] == []
    assert report["minutes"] == 1
    assert report["requests"] > 0
    assert report["errors_5xx"] == 0, report["errors_by_status"]
    assert report["invariant_checks"] > 0
    assert report["invariant_violations"] == 0, report["violations"]
    assert report["rss_growth"] > 0
    assert set(report["rss_kb"]["functions"]) >= {"products.handler", "wallets.handler"}
    assert out.with_suffix(".png").stat().st_size > 0
