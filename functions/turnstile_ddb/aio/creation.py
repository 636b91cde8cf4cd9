"""The asyncio front door of :mod:`turnstile_ddb.creation` (its results ``Created`` and errors
``AlreadyExists``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnstile_ddb import _contract, _core, retry
from turnstile_ddb import creation as sync
from turnstile_ddb.creation import PATTERN, TOKEN, Created

__all__ = ["create_if_absent"]


@_contract.write_async
async def create_if_absent(
    client: _core.AsyncDynamoDBClient,
    *,
    table: str,
    item: Mapping[str, Any],
    key_attr: str,
    backoff: retry.Backoff,
    pattern: str = PATTERN,
    token: str | int | None = None,
    token_attr: str = TOKEN,
) -> Created:
    """:func:`turnstile_ddb.creation.create_if_absent`, awaited."""
    steps = sync.create_if_absent_protocol(
        table=table,
        item=item,
        key_attr=key_attr,
        backoff=backoff,
        pattern=pattern,
        token=token,
        token_attr=token_attr,
    )
    return await _core.run_async(client, steps)
