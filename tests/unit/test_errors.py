"""The library's exceptions form one hierarchy, and the package itself imports nothing heavy."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import turnstile_ddb
from tests import surface
from turnstile_ddb import errors

KINDS = (errors.Refused, errors.Retryable, errors.OutcomeUnknown)


def _library_exceptions() -> list[type[BaseException]]:
    """Every exception class the library's modules define, but those of the modules that need
    Node to import (tests/infra/test_cdk_module_api.py checks theirs)."""
    found = []
    for info in pkgutil.iter_modules(turnstile_ddb.__path__):
        if f"turnstile_ddb.{info.name}" in surface.NEEDS_NODE:
            continue
        module = importlib.import_module(f"turnstile_ddb.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(value, BaseException)
                and not issubclass(value, Warning)  # deprecation.TurnstileDeprecationWarning
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return found


def test_every_library_exception_is_exactly_one_kind_of_turnstile_error() -> None:
    # Given every exception class a turnstile module defines
    classes = [c for c in _library_exceptions() if c not in (errors.TurnstileError, *KINDS)]
    assert len(classes) >= 20
    for cls in classes:
        # Then it is a TurnstileError of exactly one kind: refused, retryable or unknown outcome
        assert issubclass(cls, errors.TurnstileError), cls
        assert sum(issubclass(cls, kind) for kind in KINDS) == 1, cls


def test_the_kinds_say_what_a_caller_must_do() -> None:
    from turnstile_ddb import lease, retry, versioned

    assert issubclass(lease.Held, turnstile_ddb.Retryable)
    assert issubclass(versioned.VersionMismatch, turnstile_ddb.Refused)
    assert retry.OutcomeUnknown is turnstile_ddb.OutcomeUnknown
    assert issubclass(errors.NotFound, turnstile_ddb.Refused)


def test_importing_the_package_loads_neither_boto3_nor_botocore() -> None:
    functions = Path(turnstile_ddb.__file__).resolve().parent.parent
    probe = (
        "import sys, turnstile_ddb; "
        "print(sorted(m for m in ('boto3', 'botocore') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(functions)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
