"""The unit item: where units live (:class:`UnitTable`), what a new one holds, and the three
conditional writes every claim, release and sale is made of.

Private: the public names are :mod:`turnstile_ddb.claims`'s (``claims.UnitTable`` and the rest),
whose docstring writes out every expression below and says why two writers can never both win a
unit.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnstile_ddb import _checks, codec, deprecation

PATTERN = "claims"  # the metrics pattern of every claims module (counted in claims.py)

# A unit's stored status values.
FREE = "free"
HELD = "held"
SOLD = "sold"

_CLAIMABLE_AT_SPACE = 2**20  # random claimable-at values of free units live in [0, this)
_SPREAD = 4  # how many units past a run's first candidate it may start (see _Reader.pick)
_SPARSE = 16  # a pool not seen with this many claimable units is read in one whole-range Query
# The most Queries one read of one pool sends (pages of at most 100 keys): what bounds a
# reservation's reads whatever the index holds, e.g. units that exist but are not offered yet.
PAGES_PER_POOL = 4
_SINCE, _REMOVED_IN = "1.0.0", "2.0.0"  # the deprecated names below go in _REMOVED_IN


Key = dict[str, Any]


@dataclass(frozen=True)
class UnitTable:
    """Where the units live and what their stored attributes are called (each a field whose
    default is the name used so far, so a table of another layout names its own)."""

    table: str
    index: str
    key_attrs: tuple[str, ...]  # the table's key attributes, e.g. ("sku", "sk")
    pool_attr: str = "pool"
    claimable_at_attr: str = "claimableAt"  # the index's sort key (see the module docstring)
    status_attr: str = "status"
    holder_attr: str = "holder"
    until_attr: str = "holdUntil"
    seq_attr: str = "seq"
    members_attr: str = "members"  # on a reservation's lead unit: the keys of all its units
    owner_attr: str = "owner"  # on a reservation's lead unit: who made the reservation
    # On a claimed unit: the holder whose lapsed hold the claim replaced ("" when the unit was
    # free), so that a lapsed reservation can still be told from one that never existed.
    previous_attr: str = "previousHolder"
    # Deprecated spelling of ``claimable_at_attr``: accepted by the constructor, with a warning,
    # until 2.0.0, and then forgotten (always None once built, so ``dataclasses.replace`` of a
    # table never brings an old name back).
    ticket_attr: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ticket_attr is not None:
            _warn_renamed(
                "UnitTable(ticket_attr=...)", "UnitTable(claimable_at_attr=...)", stacklevel=4
            )
            object.__setattr__(self, "claimable_at_attr", self.ticket_attr)
            object.__setattr__(self, "ticket_attr", None)
        keys = [(f"key_attrs[{i}]", name) for i, name in enumerate(self.key_attrs)]
        _checks.distinct_names("UnitTable", [*keys, *_checks.attr_fields(self)])

    def names(self) -> dict[str, str]:
        """Every expression placeholder this module uses, with the attribute it stands for."""
        return {
            "#pool": self.pool_attr,
            "#claimable": self.claimable_at_attr,
            "#status": self.status_attr,
            "#holder": self.holder_attr,
            "#until": self.until_attr,
            "#seq": self.seq_attr,
            "#members": self.members_attr,
            "#owner": self.owner_attr,
            "#previous": self.previous_attr,
        }

    def key_of(self, item: Mapping[str, Any]) -> Key:
        return {name: item[name] for name in self.key_attrs}


def _warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` (a spelling of a name of this module) is deprecated for ``new``."""
    warnings.warn(
        f"turnstile_ddb.claims.{old} is deprecated since turnstile-ddb {_SINCE} and will be "
        f"removed in {_REMOVED_IN}; use turnstile_ddb.claims.{new} instead",
        deprecation.TurnstileDeprecationWarning,
        stacklevel=stacklevel,
    )


def _names(units: UnitTable, *placeholders: str) -> dict[str, str]:
    """The ``ExpressionAttributeNames`` of an expression using just ``placeholders``
    (DynamoDB refuses a name an expression does not use)."""
    every = units.names()
    return {placeholder: every[placeholder] for placeholder in placeholders}


def new_claimable_at(rand: Callable[[], float] = random.random) -> int:
    """A free unit's random claimable-at value: below 2**20 ms after the epoch, so before any
    hold expiry, and spread so that concurrent reads from random pivots meet different units."""
    return int(rand() * _CLAIMABLE_AT_SPACE)


def new_unit(
    units: UnitTable, key: Mapping[str, Any], pool: str, claimable_at: int
) -> dict[str, Any]:
    """The attributes of a new, free unit (for the caller's ``PutItem``/``BatchWriteItem``)."""
    return {
        **key,
        units.pool_attr: pool,
        units.claimable_at_attr: claimable_at,
        units.status_attr: FREE,
        units.seq_attr: 0,
    }


def _free_unit(units: UnitTable, key: Mapping[str, Any], pool: str, ticket: int) -> dict[str, Any]:
    """The deprecated :func:`new_unit` (its last parameter was called ``ticket``)."""
    return new_unit(units, key, pool, ticket)


def _identity(units: UnitTable, key: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(key[name] for name in units.key_attrs)


def _claim_item(
    units: UnitTable,
    key: Mapping[str, Any],
    *,
    holder: str,
    now_ms: int,
    until_ms: int,
    members: Sequence[Key] | None,
    owner: str | None = None,
) -> dict[str, Any]:
    """One unit's conditional claim inside the reservation's transaction. The lead unit (the first)
    also records which units the reservation holds (``members``) and who made it (``owner``);
    every other unit drops whatever a lapsed reservation left on it. Every unit keeps the holder
    it replaced (``previousHolder``: a lapsed hold's, or ``""`` for a free unit)."""
    names = _names(
        units,
        "#claimable",
        "#status",
        "#holder",
        "#until",
        "#seq",
        "#members",
        "#owner",
        "#previous",
    )
    values = codec.values(
        held=HELD, free=FREE, holder=holder, until=until_ms, now=now_ms, zero=0, one=1, nobody=""
    )
    # (every operand reads the item as it was before the update: #previous gets the old holder)
    update = (
        "SET #status = :held, #holder = :holder, #until = :until, #claimable = :until, "
        "#seq = if_not_exists(#seq, :zero) + :one, #previous = if_not_exists(#holder, :nobody)"
    )
    if members is None:
        update += " REMOVE #members, #owner"
    else:
        update += ", #members = :members"
        values.update(codec.values(members=[dict(m) for m in members]))
        if owner is None:
            update += " REMOVE #owner"
        else:
            update += ", #owner = :owner"
            values.update(codec.values(owner=owner))
    return {
        "Update": {
            "TableName": units.table,
            "Key": codec.encode_item(key),
            "UpdateExpression": update,
            "ConditionExpression": "#status = :free OR (#status = :held AND #until <= :now)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def _release_item(
    units: UnitTable, key: Mapping[str, Any], holder: str, claimable_at: int
) -> dict[str, Any]:
    """One unit's conditional release inside a release's transaction (see the module
    docstring): free again at a new random claimable-at value, if ``holder`` still holds it."""
    return {
        "Update": {
            "TableName": units.table,
            "Key": codec.encode_item(key),
            "UpdateExpression": (
                "SET #status = :free, #claimable = :claimable, "
                "#seq = if_not_exists(#seq, :zero) + :one "
                "REMOVE #holder, #until, #members, #owner"
            ),
            "ConditionExpression": "#status = :held AND #holder = :holder",
            "ExpressionAttributeNames": _names(
                units, "#claimable", "#status", "#holder", "#until", "#seq", "#members", "#owner"
            ),
            "ExpressionAttributeValues": codec.values(
                free=FREE, held=HELD, holder=holder, claimable=claimable_at, zero=0, one=1
            ),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _confirm_item(
    units: UnitTable, key: Mapping[str, Any], holder: str, now_ms: int
) -> dict[str, Any]:
    """One unit's conditional sale inside a confirm's transaction (see the module docstring of
    :mod:`turnstile_ddb.claims`): sold, if ``holder`` holds it and the hold has not lapsed (or
    it is already sold to ``holder``: a retried confirm succeeds again)."""
    return {
        "Update": {
            "TableName": units.table,
            "Key": codec.encode_item(key),
            "UpdateExpression": (
                "SET #status = :sold, #seq = if_not_exists(#seq, :zero) + :one REMOVE #claimable"
            ),
            "ConditionExpression": (
                "#holder = :holder AND (#status = :sold OR (#status = :held AND #until > :now))"
            ),
            "ExpressionAttributeNames": _names(
                units, "#status", "#holder", "#until", "#seq", "#claimable"
            ),
            "ExpressionAttributeValues": codec.values(
                sold=SOLD, held=HELD, holder=holder, now=now_ms, zero=0, one=1
            ),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


for _public in (UnitTable, new_claimable_at, new_unit):
    _public.__module__ = "turnstile_ddb.claims"  # shown, pickled and documented there
