"""``turnstile_ddb.cdk``, the one library module that needs Node to import (jsii runs
aws-cdk-lib's JavaScript): the checks the unit tier makes of every other module
(tests/unit/test_public_api.py, test_errors.py, test_public_surface.py), made here."""

from __future__ import annotations

import difflib
import importlib
import inspect

from tests import surface
from turnstile_ddb import errors

KINDS = (errors.Refused, errors.Retryable, errors.OutcomeUnknown)


def test_the_modules_that_need_node_declare_all_and_export_no_private_name() -> None:
    assert set(surface.modules()) >= surface.NEEDS_NODE
    for name in sorted(surface.NEEDS_NODE):
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        assert isinstance(exported, list) and exported, f"{name} has no __all__"
        assert len(set(exported)) == len(exported)
        assert [n for n in exported if not hasattr(module, n)] == []
        assert [n for n in exported if n.startswith("_")] == []


def test_their_exceptions_are_exactly_one_kind_of_turnstile_error() -> None:
    found = [
        value
        for name in sorted(surface.NEEDS_NODE)
        for _, value in inspect.getmembers(importlib.import_module(name), inspect.isclass)
        if issubclass(value, BaseException) and value.__module__ == name
    ]
    assert found, "turnstile_ddb.cdk defines UnsafeReplication"
    for cls in found:
        assert issubclass(cls, errors.TurnstileError), cls
        assert sum(issubclass(cls, kind) for kind in KINDS) == 1, cls


def test_their_public_surface_matches_the_snapshot() -> None:
    # Given the snapshot's lines for the modules the unit tier leaves out
    needs_node = sorted(surface.NEEDS_NODE)
    recorded = [
        line
        for line in surface.SNAPSHOT.read_text().splitlines()
        if surface.module_of(line) in needs_node
    ]
    # Then the library as it is now reads the same, line for line
    current = surface.surface(needs_node)
    diff = "\n".join(difflib.unified_diff(recorded, current, "snapshot", "library", lineterm=""))
    assert recorded and current == recorded, (
        "the public surface changed: announce it in CHANGELOG.md, then run "
        "`PYTHONPATH=functions .venv/bin/python -m tests.surface --update`\n" + diff
    )
    # And every public name of theirs is described there
    described = {line.split(": ", 1)[0] for line in recorded}
    assert set(surface.public_names(needs_node)) <= described
