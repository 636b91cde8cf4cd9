"""The asyncio front door of :mod:`turnstile_ddb.versioned` (its options ``Condition``, its
errors ``Insufficient``, ``NoSuchItem``, ``VersionConflict``, ...; ``decide`` and ``also`` stay
plain functions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnstile_ddb import _contract, _core, retry
from turnstile_ddb import versioned as sync
from turnstile_ddb.versioned import PATTERN, Also, Condition, Decide, Item, Written

__all__ = ["bump", "decrement", "increment", "read", "update_if_version", "update_versioned"]


@_contract.read_async
async def read(
    client: _core.AsyncDynamoDBClient,
    table: str,
    key: Mapping[str, Any],
    backoff: retry.Backoff,
) -> Item | None:
    """:func:`turnstile_ddb.versioned.read`, awaited."""
    return await _core.run_async(client, sync.read_protocol(table, key, backoff))


@_contract.write_async
async def update_if_version(
    client: _core.AsyncDynamoDBClient,
    *,
    table: str,
    key: Mapping[str, Any],
    expected: int,
    changes: Mapping[str, Any],
    version_attr: str = "version",
    backoff: retry.Backoff,
) -> Item:
    """:func:`turnstile_ddb.versioned.update_if_version`, awaited."""
    steps = sync.update_if_version_protocol(
        table=table,
        key=key,
        expected=expected,
        changes=changes,
        version_attr=version_attr,
        backoff=backoff,
    )
    return await _core.run_async(client, steps)


@_contract.write_async
async def update_versioned(
    client: _core.AsyncDynamoDBClient,
    *,
    table: str,
    key: Mapping[str, Any],
    decide: Decide,
    backoff: retry.Backoff,
    conflicts: retry.Backoff,
    version_attr: str = "version",
    also: Also | None = None,
    token: str | None = None,
) -> Written:
    """:func:`turnstile_ddb.versioned.update_versioned`, awaited (``decide`` is called as is)."""
    steps = sync.update_versioned_protocol(
        table=table,
        key=key,
        decide=decide,
        backoff=backoff,
        conflicts=conflicts,
        version_attr=version_attr,
        also=also,
        token=token,
    )
    return await _core.run_async(client, steps)


@_contract.write_async
async def decrement(
    client: _core.AsyncDynamoDBClient,
    *,
    table: str,
    key: Mapping[str, Any],
    attr: str,
    amount: int,
    backoff: retry.Backoff,
    version_attr: str | None = "version",
    condition: Condition | None = None,
    pattern: str = PATTERN,
) -> Item:
    """:func:`turnstile_ddb.versioned.decrement`, awaited."""
    steps = sync.decrement_protocol(
        table=table,
        key=key,
        attr=attr,
        amount=amount,
        backoff=backoff,
        version_attr=version_attr,
        condition=condition,
        pattern=pattern,
    )
    return await _core.run_async(client, steps)


@_contract.write_async
async def increment(
    client: _core.AsyncDynamoDBClient,
    *,
    table: str,
    key: Mapping[str, Any],
    attr: str,
    amount: int,
    backoff: retry.Backoff,
    version_attr: str | None = "version",
    condition: Condition | None = None,
    pattern: str = PATTERN,
) -> Item:
    """:func:`turnstile_ddb.versioned.increment`, awaited."""
    steps = sync.increment_protocol(
        table=table,
        key=key,
        attr=attr,
        amount=amount,
        backoff=backoff,
        version_attr=version_attr,
        condition=condition,
        pattern=pattern,
    )
    return await _core.run_async(client, steps)


@_contract.write_async
async def bump(
    client: _core.AsyncDynamoDBClient,
    *,
    table: str,
    key: Mapping[str, Any],
    changes: Mapping[str, Any],
    backoff: retry.Backoff,
    version_attr: str = "version",
    condition: Condition | None = None,
    pattern: str = PATTERN,
) -> Item:
    """:func:`turnstile_ddb.versioned.bump`, awaited."""
    steps = sync.bump_protocol(
        table=table,
        key=key,
        changes=changes,
        backoff=backoff,
        version_attr=version_attr,
        condition=condition,
        pattern=pattern,
    )
    return await _core.run_async(client, steps)
