"""The short nemesis inside ``make test``: every pattern at once under seeded faults, a few seeds.

``make chaos`` runs the same thing for ten minutes. Each run starts its own DynamoDB Local, so it
neither sees nor disturbs the session's tables.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from chaos import runner

pytestmark = pytest.mark.integration

SECONDS = 10


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_short_nemesis_finds_no_violation(seed: int, template: dict[str, Any]) -> None:
    result = runner.run(seed, SECONDS, template)
    report = io.StringIO()
    result.print(report)
    text = report.getvalue()
    assert result.report.violations == [], text
    assert text.rstrip().splitlines()[-1] == result.summary_line()
    assert result.summary_line().endswith(f"0 violations, seed {seed}")
    # The run did something worth judging: every pattern ran, and faults of several kinds hit.
    patterns = {op.pattern for op in result.history.ops}
    assert patterns == set(runner.CLIENTS), text
    assert len(result.nemesis.counts()) >= 4, text
    assert result.report.checks >= 50, text
