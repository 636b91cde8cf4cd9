"""The library's shape, read from its source (no import): no import circle between its modules,
and no module longer than a reader can hold (800 lines), save the ones listed with the reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "functions" / "turnstile_ddb"
MAX_LINES = 800
# Modules still over the limit, each with why; the list only shrinks (a module that got under
# the limit fails below until it is taken off).
TOO_LONG: dict[str, str] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def library() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(path: Path, known: set[str]) -> set[str]:
    """The library modules ``path`` imports anywhere in its text (a function's deferred import
    and a type checker's import included: each still ties the two modules together)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    # a package's own __init__ is not an edge: every submodule's import passes through it
    return {name for name in found if name in known and name != "turnstile_ddb"}


def graph() -> dict[str, set[str]]:
    modules = library()
    return {name: imported(path, set(modules)) - {name} for name, path in modules.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, once each, as the modules along it (depth-first, three colours)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for target in sorted(edges.get(name, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name)
    return found


def test_the_walk_finds_a_circle_when_there_is_one() -> None:
    # Given a made-up graph with a circle, Then it is found (the check below can fail)
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_walk_reads_the_library() -> None:
    # Given the package's source, Then the edges everyone knows of are seen
    edges = graph()
    assert "turnstile_ddb.retry" in edges["turnstile_ddb.claims"]
    assert "turnstile_ddb.capacity" in edges["turnstile_ddb.sharded"]


def test_no_module_of_the_library_imports_itself_back() -> None:
    # Given every module's imports, Then no chain of them leads back to where it started
    assert circles(graph()) == []


@pytest.mark.parametrize("name", sorted(library()))
def test_no_module_is_longer_than_the_limit_unless_listed(name: str) -> None:
    # Given a module of the library, Then it fits in MAX_LINES, or is listed (and still needs it)
    lines = len(library()[name].read_text().splitlines())
    if name in TOO_LONG:
        assert lines > MAX_LINES, f"{name} is {lines} lines now: take it off TOO_LONG"
    else:
        assert lines <= MAX_LINES, f"{name} is {lines} lines (at most {MAX_LINES})"
