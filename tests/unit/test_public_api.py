"""The public API is what each module lists in ``__all__`` (the semver promise: CHANGELOG.md)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import turnstile_ddb
from tests import surface

MODULES = sorted(
    info.name
    for info in pkgutil.iter_modules(turnstile_ddb.__path__)
    if not info.name.startswith("_")
)
# Importing turnstile_ddb.cdk starts Node: tests/infra/test_cdk_module_api.py checks it.
NODE_FREE = [name for name in MODULES if f"turnstile_ddb.{name}" not in surface.NEEDS_NODE]


def test_the_package_lists_its_modules() -> None:
    # Given the package on disk, then every module the docs reference is there
    assert {"errors", "lease", "versioned", "idempotency", "sharded", "cdk"} <= set(MODULES)


@pytest.mark.parametrize("name", NODE_FREE)
def test_every_public_module_declares_all_and_every_listed_name_exists(name: str) -> None:
    # Given a public module of the library
    module = importlib.import_module(f"turnstile_ddb.{name}")
    # Then it declares its public names, without duplicates, and each one resolves
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list) and exported, f"turnstile_ddb.{name} has no __all__"
    assert len(set(exported)) == len(exported)
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"turnstile_ddb.{name}.__all__ lists names it does not define: {missing}"


@pytest.mark.parametrize("name", NODE_FREE)
def test_no_private_name_is_exported(name: str) -> None:
    module = importlib.import_module(f"turnstile_ddb.{name}")
    assert [n for n in module.__all__ if n.startswith("_")] == []


def test_the_version_is_a_semver_string() -> None:
    major, minor, patch = turnstile_ddb.__version__.split(".")
    assert all(part.isdigit() for part in (major, minor, patch))


def test_the_changelog_has_a_section_for_this_version() -> None:
    """A released version is one the changelog describes (Keep a Changelog's ``## [x.y.z]``)."""
    changelog = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text()
    assert f"\n## [{turnstile_ddb.__version__}]" in changelog
