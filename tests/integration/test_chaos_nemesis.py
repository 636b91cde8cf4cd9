"""The short nemesis inside ``make test``: every pattern at once under seeded faults, a few seeds.

``make chaos`` runs the same thing for ten minutes. Each run starts its own DynamoDB Local, so it
neither sees nor disturbs the session's tables, and every function as deployed: a worker per
function from the session's synthesized assets and the layer, its DynamoDB calls through the
nemesis's fault proxy.

A short run stops on what happened (``enough``: every pattern completed ``OPS_PER_PATTERN``
operations, the resizing workload's resizer changed a shard count, and the nemesis struck with
``FAULT_KINDS`` kinds of fault), not after a fixed number of seconds, so a slow or loaded machine
runs longer instead of judging too little. ``LIMIT_SECONDS`` only bounds a run that never gets
there (the assertions then say what was missing).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from chaos import runner
from chaos.history import OK, History
from chaos.nemesis import Nemesis

pytestmark = pytest.mark.integration

OPS_PER_PATTERN = 15
FAULT_KINDS = 4
LIMIT_SECONDS = 600


def enough(history: History, nemesis: Nemesis) -> bool:
    done = [op for op in list(history.ops) if op.done]
    per_pattern = {pattern: 0 for pattern in runner.CLIENTS}
    for op in done:
        per_pattern[op.pattern] = per_pattern.get(op.pattern, 0) + 1
    # the resizing workload's resizer changed the shard count at least once (the purchases around
    # it ran at more than one layout)
    resized = any(
        op.f == "resize" and op.type == OK and op.value["steps"] > 0
        for op in done
        if op.pattern == "resizing"
    )
    return (
        min(per_pattern.values()) >= OPS_PER_PATTERN
        and len(nemesis.counts()) >= FAULT_KINDS
        and resized
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_short_nemesis_finds_no_violation(
    seed: int, template: dict[str, Any], assembly: Any
) -> None:
    result = runner.run(
        seed, LIMIT_SECONDS, template, assembly_dir=Path(assembly.directory), until=enough
    )
    report = io.StringIO()
    result.print(report)
    text = report.getvalue()
    assert result.report.violations == [], text
    assert text.rstrip().splitlines()[-1] == result.summary_line()
    assert result.summary_line().endswith(f"0 violations, seed {seed}")
    # The run did something worth judging: every pattern ran, and faults of several kinds hit.
    patterns = {op.pattern for op in result.history.ops}
    assert patterns == set(runner.CLIENTS), text
    assert len(result.nemesis.counts()) >= FAULT_KINDS, text
    assert enough(result.history, result.nemesis), text  # it stopped on the condition
    assert result.report.checks >= 50, text
    # The functions ran in their workers, and the nemesis reached them there (through the proxy).
    assert result.proxied.forwarded > 0, text
    assert result.proxied.replied > 0, text
