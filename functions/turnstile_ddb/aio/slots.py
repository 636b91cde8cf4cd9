"""The asyncio front door of :mod:`turnstile_ddb.slots` (its errors ``SlotTaken``,
``NoSuchSlot``, ``NotHolder``; its default attribute names ``HOLDER`` and ``VERSION``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from turnstile_ddb import _contract, _core, retry
from turnstile_ddb import slots as sync
from turnstile_ddb.slots import HOLDER, VERSION

__all__ = ["book", "book_any", "create", "release"]


create = _contract.write_async(_core.awaited(sync.create_protocol))


@_contract.write_async
async def book(
    client: _core.AsyncDynamoDBClient,
    table: str,
    key: Mapping[str, Any],
    holder: str,
    *,
    backoff: retry.Backoff,
    holder_attr: str = HOLDER,
    version_attr: str = VERSION,
) -> dict[str, Any]:
    """:func:`turnstile_ddb.slots.book`, awaited."""
    names = (holder_attr, version_attr)
    steps = sync.book_protocol(table, key, holder, backoff=backoff, names=names)
    return await _core.run_async(client, steps)


@_contract.write_async
async def book_any(
    client: _core.AsyncDynamoDBClient,
    table: str,
    keys: Iterable[Mapping[str, Any]],
    holder: str,
    *,
    backoff: retry.Backoff,
    holder_attr: str = HOLDER,
    version_attr: str = VERSION,
) -> dict[str, Any] | None:
    """:func:`turnstile_ddb.slots.book_any`, awaited (the candidates in order, as there)."""
    names = (holder_attr, version_attr)
    steps = sync.book_any_protocol(table, keys, holder, backoff=backoff, names=names)
    return await _core.run_async(client, steps)


@_contract.write_async
async def release(
    client: _core.AsyncDynamoDBClient,
    table: str,
    key: Mapping[str, Any],
    holder: str,
    *,
    backoff: retry.Backoff,
    holder_attr: str = HOLDER,
    version_attr: str = VERSION,
) -> None:
    """:func:`turnstile_ddb.slots.release`, awaited."""
    names = (holder_attr, version_attr)
    await _core.run_async(
        client, sync.release_protocol(table, key, holder, backoff=backoff, names=names)
    )
