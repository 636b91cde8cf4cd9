"""The asyncio front door of :mod:`turnstile_ddb.capacity` (its rows ``CapacityRow`` and
``Member``, its errors ``Full``, ``AlreadyMember``, ``NoCounter``, ``NotMember``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnstile_ddb import _contract, _core, retry
from turnstile_ddb import capacity as sync
from turnstile_ddb.capacity import CapacityRow, Member

__all__ = ["join", "leave"]


@_contract.write_async
async def join(
    client: _core.AsyncDynamoDBClient,
    counter: CapacityRow,
    member: Member,
    *,
    backoff: retry.Backoff,
    also: Sequence[dict[str, Any]] = (),
    token: str | None = None,
) -> None:
    """:func:`turnstile_ddb.capacity.join`, awaited."""
    steps = sync.join_protocol(counter, member, backoff=backoff, also=also, token=token)
    await _core.run_async(client, steps)


@_contract.write_async
async def leave(
    client: _core.AsyncDynamoDBClient,
    counter: CapacityRow,
    member: Member,
    *,
    backoff: retry.Backoff,
    token: str | None = None,
) -> None:
    """:func:`turnstile_ddb.capacity.leave`, awaited."""
    await _core.run_async(
        client, sync.leave_protocol(counter, member, backoff=backoff, token=token)
    )
