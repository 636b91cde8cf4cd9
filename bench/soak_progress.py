"""What the soak samples while the load runs, and the line a minute it prints from it.

Kept apart from :mod:`bench.soak`, which starts the local stack (and so imports what synthesizes
it), so that the unit tier can test both without the CDK.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench.soak_step import percentile

PROGRESS_SECONDS = 60.0  # a progress line this often while the load runs


@dataclass
class Samples:
    """What the sampler saw, one entry per sample."""

    t: list[float] = field(default_factory=list)
    workers: dict[str, list[dict[int, int]]] = field(default_factory=lambda: defaultdict(list))
    dynamodb_rss: list[int] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    logs: list[dict[str, int]] = field(default_factory=list)


@dataclass
class Progress:
    """A line a minute while the load runs (a soak is long; silence looks like a hang): requests
    and 5xx so far, the last minute's p99, the function workers' total RSS, the load average.
    Reads the record's new lines since the last print."""

    record: Path
    started: float
    seconds: float
    every: float = PROGRESS_SECONDS
    offset: int = 0
    requests: int = 0
    errors: int = 0
    printed: float = 0.0

    def maybe_print(self, samples: Samples) -> None:
        elapsed = time.time() - self.started
        if elapsed - self.printed < self.every:
            return
        self.printed = elapsed
        print(self.line(elapsed, samples), flush=True)

    def line(self, elapsed: float, samples: Samples) -> str:
        latencies = []
        if self.record.exists():
            with self.record.open("rb") as lines:
                lines.seek(self.offset)
                chunk = lines.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self.offset += len(complete)
            for raw in complete.splitlines():
                line = json.loads(raw)
                if line.get("kind") == "req":
                    self.requests += 1
                    status = line.get("status") or 0
                    self.errors += status == 0 or status >= 500
                    latencies.append(line["ms"])
        rss = sum(sum(row.values()) for rows in samples.workers.values() for row in rows[-1:])
        p99 = f"{percentile(latencies, 99):.0f} ms" if latencies else "-"
        load = samples.load[-1] if samples.load else 0.0
        return (
            f"soak: {elapsed / 60:.0f} of {self.seconds / 60:.0f} min, {self.requests} requests, "
            f"{self.errors} 5xx, p99 since last line {p99}, workers' RSS {rss / 1024:.0f} MiB, "
            f"load {load:.1f}"
        )
