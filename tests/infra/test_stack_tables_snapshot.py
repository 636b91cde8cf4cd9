"""The unit tier's tables are the stack's: ``tests/unit/stack_tables.json`` (what the unit tier
creates in moto, and the table variables it gives the handlers) is what this synth gives."""

from __future__ import annotations

import difflib
from typing import Any

from tests import tables


def test_the_unit_tiers_tables_snapshot_is_what_the_stack_synthesizes(
    template: dict[str, Any],
) -> None:
    # Given the snapshot the unit tier reads, and the same view of a fresh synth
    recorded = tables.SNAPSHOT.read_text()
    current = tables.text(tables.from_template(template))
    # Then they agree to the character
    diff = "\n".join(
        difflib.unified_diff(
            recorded.splitlines(), current.splitlines(), "stack_tables.json", "synth", lineterm=""
        )
    )
    assert current == recorded, (
        "the stack's tables or table variables changed: run "
        "`.venv/bin/python -m tests.tables --update` and commit tests/unit/stack_tables.json\n"
        + diff
    )
    # and every table of it is named by one function's table variable, and only those
    snapshot = tables.load()
    named = [v for k, v in snapshot["environment"].items() if k.endswith("_TABLE")]
    assert sorted(named) == sorted(snapshot["tables"])
