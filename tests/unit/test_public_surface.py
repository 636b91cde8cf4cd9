"""The public surface does not change unannounced: every name in each module's ``__all__``, with
its signature (or bases and methods, or value), matches ``tests/unit/public_surface.txt``.

A difference is either a mistake or a change to announce: record it in CHANGELOG.md (Unreleased,
with its migration; a removal only after a minor version of ``TurnstileDeprecationWarning``),
then rewrite the snapshot with ``PYTHONPATH=functions .venv/bin/python -m tests.surface --update``
and commit both.

Here every module but those that need Node to import (``surface.NEEDS_NODE``: the CDK constructs);
``tests/infra/test_cdk_module_api.py`` checks their lines of the same snapshot.
"""

from __future__ import annotations

import difflib

from tests import surface


def test_the_public_surface_matches_its_snapshot() -> None:
    # Given the snapshot checked in with the last announced change (modules without Node)
    node_free = surface.modules(node=False)
    recorded = [
        line
        for line in surface.SNAPSHOT.read_text().splitlines()
        if surface.module_of(line) in node_free
    ]
    # When the surface is read from the library as it is now
    current = surface.surface(node_free)
    # Then they are the same, line for line
    diff = "\n".join(
        difflib.unified_diff(recorded, current, "public_surface.txt", "the library", lineterm="")
    )
    assert current == recorded, (
        "the public surface changed: announce it in CHANGELOG.md, then run "
        "`PYTHONPATH=functions .venv/bin/python -m tests.surface --update`\n" + diff
    )


def test_the_snapshot_describes_every_public_name_and_only_those() -> None:
    node_free = surface.modules(node=False)
    described = {
        line.split(": ", 1)[0]
        for line in surface.SNAPSHOT.read_text().splitlines()
        if surface.module_of(line) in node_free
    }
    names = set(surface.public_names(node_free))
    assert names <= described
    # Every other line is a public class's member (Class.method), never a private name
    for line in described - names:
        owner, _, member = line.rpartition(".")
        assert owner in names and not member.startswith("_"), line
