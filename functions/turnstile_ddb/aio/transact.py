"""The asyncio front door of :mod:`turnstile_ddb.transact` (its errors: ``Cancelled``, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnstile_ddb import _contract, _core, retry
from turnstile_ddb import transact as sync

__all__ = ["transact_write"]


@_contract.write_async
async def transact_write(
    client: _core.AsyncDynamoDBClient,
    items: Sequence[dict[str, Any]],
    *,
    backoff: retry.Backoff,
    token: str | None = None,
    pattern: str = "transact",
    retry_conflicts: bool = True,
) -> None:
    """:func:`turnstile_ddb.transact.transact_write`, awaited."""
    steps = sync.transact_write_protocol(
        items, backoff=backoff, token=token, pattern=pattern, retry_conflicts=retry_conflicts
    )
    await _core.run_async(client, steps)
