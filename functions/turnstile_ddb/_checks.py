"""The checks every configuration object runs when it is built (private).

Names: each configurable set of stored attribute names (an idempotency store's key, expiry and
record names, a unit table's, a sharded counter's, a capacity row's, a lease table's) is built
into items as a dict keyed by stored name, so two fields naming one attribute lose one of them
silently: an idempotency record whose lock is its expiry lapses at once and lets a request run
twice. :func:`distinct_names` refuses that, and empty names, with a ``ValueError`` naming both
fields and the name.

Ranges: an options object that can never succeed (no rounds, no page) would answer a retryable
error forever, or a refusal no read decided; :func:`at_least` refuses it when it is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any


def distinct_names(owner: str, named: Iterable[tuple[str, str]]) -> None:
    """Refuse (``ValueError``) an empty name or two fields of ``named`` ((field, stored name)
    pairs) that name one stored attribute; ``owner`` prefixes the fields in the message."""
    seen: dict[str, str] = {}
    for field, name in named:
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"{owner}: {field} is empty; each attribute needs a distinct, non-empty name"
            )
        if name in seen:
            raise ValueError(
                f"{owner}: {seen[name]} and {field} are the same stored attribute {name!r}; "
                "each needs a distinct name"
            )
        seen[name] = field


def attr_fields(config: Any) -> list[tuple[str, str]]:
    """(field, stored name) for each field of the dataclass ``config`` whose name ends in
    ``_attr`` and that is set (a deprecated spelling left None is skipped)."""
    named = [(f.name, getattr(config, f.name)) for f in fields(config) if f.name.endswith("_attr")]
    return [(name, value) for name, value in named if value is not None]


def at_least(owner: str, field: str, value: float | None, low: float) -> None:
    """Refuse (``ValueError``) ``value`` below ``low`` (None passes: "not set")."""
    if value is not None and value < low:
        raise ValueError(f"{owner}.{field} must be >= {low}, not {value!r}")
