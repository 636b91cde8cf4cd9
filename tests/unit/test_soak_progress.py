"""The soak's progress line: read from the record as it grows, a line a minute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.soak_progress import Progress, Samples


def _append(record: Path, *lines: dict[str, object]) -> None:
    with record.open("a") as out:
        for line in lines:
            out.write(json.dumps(line) + "\n")


def test_the_progress_line_counts_new_requests_and_5xx_and_skips_a_half_written_line(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.jsonl"
    samples = Samples(load=[3.5])
    samples.workers["products"].append({1: 2048, 2: 1024})
    progress = Progress(record, started=0.0, seconds=600)
    _append(record, {"kind": "req", "status": 200, "ms": 10.0}, {"kind": "op", "f": "x"})
    _append(record, {"kind": "req", "status": 503, "ms": 90.0})
    with record.open("a") as out:
        out.write('{"kind": "req", "sta')  # the writer is mid-line
    first = progress.line(120.0, samples)
    assert first == (
        "soak: 2 of 10 min, 2 requests, 1 5xx, p99 since last line 90 ms, workers' RSS 3 MiB, "
        "load 3.5"
    )
    with record.open("a") as out:
        out.write('tus": 0, "ms": 5.0}\n')  # the rest of that line, a lost reply
    second = progress.line(180.0, samples)
    assert "3 requests, 2 5xx, p99 since last line 5 ms" in second


def test_a_progress_line_is_printed_once_a_minute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr("bench.soak_progress.time.time", lambda: now[0])
    progress = Progress(tmp_path / "none.jsonl", started=100.0, seconds=300)
    for t in (105.0, 130.0, 161.0, 170.0, 222.0):
        now[0] = t
        progress.maybe_print(Samples())
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in printed] == ["soak: 1 of 5 min", "soak: 2 of 5 min"]
