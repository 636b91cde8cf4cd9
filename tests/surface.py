"""The library's public surface as text: every name in each module's ``__all__`` with what a
caller relies on (a function's signature, a class's constructor, bases and public methods, a
constant's value). ``tests/unit/test_public_surface.py`` compares it with the checked-in
``tests/unit/public_surface.txt``; after a change you mean (and record in CHANGELOG.md), rewrite
that file with::

    PYTHONPATH=functions .venv/bin/python -m tests.surface --update
"""

from __future__ import annotations

import argparse
import enum
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

import turnstile_ddb

SNAPSHOT = Path(__file__).parent / "unit" / "public_surface.txt"
# Importing these starts Node (jsii loads aws-cdk-lib's JavaScript): the unit tier, which runs
# without Node, checks every other module; tests/infra checks these.
NEEDS_NODE = frozenset({"turnstile_ddb.cdk"})
# Packages whose modules mirror the top level's (turnstile_ddb.aio.versioned, ...).
SUBPACKAGES = ("turnstile_ddb.aio",)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SIMPLE = (str, int, float, bool, type(None), bytes)


class _Shown:
    """A default value as the snapshot shows it: its own repr would carry state (a hints object
    bound at import holds whatever earlier calls in the process taught it, so the snapshot
    depended on which tests ran first), so an instance shows its type only."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _default(value: Any) -> Any:
    if value is inspect.Parameter.empty or isinstance(value, (*_SIMPLE, enum.Enum, tuple)):
        return value
    if type(value).__name__ == "_HAS_DEFAULT_FACTORY_CLASS":  # a dataclass field's <factory>
        return value
    if callable(value):
        return _Shown(getattr(value, "__qualname__", type(value).__qualname__))
    return _Shown(f"<{type(value).__module__}.{type(value).__qualname__} instance>")


def _signature(obj: Any) -> str:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    shown = [p.replace(default=_default(p.default)) for p in signature.parameters.values()]
    return _ADDRESS.sub("", str(signature.replace(parameters=shown)))


def _value(value: Any) -> str:
    if isinstance(value, _SIMPLE):
        return repr(value)
    if isinstance(value, frozenset | set):
        return "{" + ", ".join(sorted(repr(v) for v in value)) + "}"
    if isinstance(value, tuple) and all(isinstance(v, (*_SIMPLE, type)) for v in value):
        return "(" + ", ".join(v.__name__ if isinstance(v, type) else repr(v) for v in value) + ")"
    if isinstance(value, enum.Enum):
        return repr(value)
    if type(value).__module__ in ("typing", "types", "collections.abc") or hasattr(
        value, "__origin__"
    ):
        return _ADDRESS.sub("", repr(value))
    return f"instance of {type(value).__module__}.{type(value).__qualname__}"


def _class_lines(qualified: str, cls: type) -> list[str]:
    bases = ", ".join(f"{b.__module__}.{b.__qualname__}" for b in cls.__bases__)
    # Its own __init__ when it has one (a jsii construct's class signature is its metaclass's)
    init = next(
        (
            vars(k)["__init__"]
            for k in cls.__mro__
            if "__init__" in vars(k) and k.__module__.startswith("turnstile_ddb")
        ),
        None,
    )
    lines = [f"{qualified}: class({bases}){_signature(init if init else cls)}"]
    for name, member in sorted(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(member, staticmethod | classmethod):
            kind = type(member).__name__
            lines.append(f"{qualified}.{name}: {kind}{_signature(member.__func__)}")
        elif isinstance(member, property):
            lines.append(f"{qualified}.{name}: property")
        elif inspect.isfunction(member):
            lines.append(f"{qualified}.{name}: method{_signature(member)}")
    return lines


def describe(module_name: str, name: str, value: Any) -> list[str]:
    qualified = f"{module_name}.{name}"
    if inspect.isclass(value):
        return _class_lines(qualified, value)
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return [f"{qualified}: function{_signature(value)}"]
    if inspect.ismodule(value):
        return [f"{qualified}: module {value.__name__}"]
    return [f"{qualified}: {_value(value)}"]


def modules(*, node: bool = True) -> list[str]:
    """The public modules; ``node=False``: those that import without Node."""
    names = ["turnstile_ddb"]
    for info in pkgutil.iter_modules(turnstile_ddb.__path__):
        if not info.name.startswith("_"):
            names.append(f"turnstile_ddb.{info.name}")
    for package in SUBPACKAGES:  # their modules are public modules too
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
            if not info.name.startswith("_"):
                names.append(f"{package}.{info.name}")
    return sorted(name for name in names if node or name not in NEEDS_NODE)


def module_of(line: str) -> str:
    """The module a snapshot line describes (its name up to the public name)."""
    name = line.split(": ", 1)[0]
    return max((m for m in modules(node=True) if name.startswith(m + ".")), key=len)


def surface(names: list[str] | None = None) -> list[str]:
    """Every public name of ``names`` (default: every module), one or more lines each, sorted:
    the text the snapshot holds."""
    lines: list[str] = []
    for module_name in modules() if names is None else names:
        module = importlib.import_module(module_name)
        for name in sorted(getattr(module, "__all__", ())):
            lines.extend(describe(module_name, name, getattr(module, name)))
    return lines


def public_names(names: list[str] | None = None) -> list[str]:
    return [
        f"{module_name}.{name}"
        for module_name in (modules() if names is None else names)
        for name in getattr(importlib.import_module(module_name), "__all__", ())
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help=f"rewrite {SNAPSHOT}")
    args = parser.parse_args(argv)
    text = "\n".join(surface()) + "\n"
    if args.update:
        SNAPSHOT.write_text(text)
        print(f"{SNAPSHOT}: {len(public_names())} public names")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
