"""The short nemesis inside ``make test``: every pattern at once under seeded faults, a few seeds.

``make chaos`` runs the same thing for ten minutes. Each run starts its own DynamoDB Local, so it
neither sees nor disturbs the session's tables.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import pytest

from chaos import runner
from chaos.checkers import Violation

pytestmark = pytest.mark.integration

SECONDS = 10


def known_open(violations: list[Violation]) -> list[Violation]:
    """Violations found by the nemesis and reported, whose fix belongs to issue 13 ("money"):
    a keyed top-up whose first attempt charged, lost its lease, refunded the charge and died before
    its answer was stored; the retry gets the same (refunded) charge back from the provider for the
    key and credits it. Then the wallet also shows a credit without a standing charge. Tolerated
    here (and only here: ``make chaos`` counts them) until that fix lands."""
    refunded = {
        v.message.split(":")[0]
        for v in violations
        if (v.pattern, v.check) == ("wallets", "acknowledged charge stands")
    }
    return [
        v
        for v in violations
        if v.pattern == "wallets"
        and v.check in ("acknowledged charge stands", "one charge per credit")
        and v.message.split(":")[0] in refunded
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_short_nemesis_finds_no_violation(seed: int, template: dict[str, Any]) -> None:
    result = runner.run(seed, SECONDS, template)
    report = io.StringIO()
    result.print(report)
    text = report.getvalue()
    tolerated = known_open(result.report.violations)
    if tolerated:
        warnings.warn(f"known open wallet violation (issue 13):\n{text}", stacklevel=1)
    assert [v for v in result.report.violations if v not in tolerated] == [], text
    assert text.rstrip().splitlines()[-1] == result.summary_line()
    assert result.summary_line().endswith(f"{len(tolerated)} violations, seed {seed}")
    # The run did something worth judging: every pattern ran, and faults of several kinds hit.
    patterns = {op.pattern for op in result.history.ops}
    assert patterns == set(runner.CLIENTS), text
    assert len(result.nemesis.counts()) >= 4, text
    assert result.report.checks >= 50, text
