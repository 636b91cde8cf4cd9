"""The asyncio front door of :mod:`turnstile_ddb.claims` (its ``UnitTable``, ``ReserveOptions``,
``PoolHints``, ``UnitCache``, ``Claimed``; its errors ``NotEnough``, ``Unsettled``, ``HoldLost``,
``ClaimHoldLapsed``). Here a reservation whose first pool is short reads the others at once."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

from turnstile_ddb import _contract, _core, retry
from turnstile_ddb import claims as sync
from turnstile_ddb._claims_hints import _OldReserveArguments, _options_of
from turnstile_ddb.claims import Claimed, Key, ReserveOptions, UnitTable

__all__ = ["confirm", "holders_units", "release", "reserve"]


@_contract.write_async
async def confirm(
    client: _core.AsyncDynamoDBClient,
    units: UnitTable,
    keys: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    now_ms: int,
    backoff: retry.Backoff,
    token: str | None = None,
) -> None:
    """:func:`turnstile_ddb.claims.confirm`, awaited."""
    steps = sync.confirm_protocol(units, keys, holder, now_ms=now_ms, backoff=backoff, token=token)
    await _core.run_async(client, steps)


@_contract.write_async
async def reserve(
    client: _core.AsyncDynamoDBClient,
    units: UnitTable,
    *,
    pools: Sequence[str],
    quantity: int,
    holder: Callable[[Key], str],
    now_ms: int,
    until_ms: int,
    owner: str | None = None,
    options: ReserveOptions | None = None,
    **old: Unpack[_OldReserveArguments],
) -> Claimed:
    """:func:`turnstile_ddb.claims.reserve`, awaited; when the first pool is (or is likely to
    be) short, the other pools are read concurrently, one Query each."""
    hold = sync._Hold(holder, now_ms, until_ms, owner)
    options = _options_of(options, old)
    steps = sync.reserve_protocol(units, pools, quantity, hold, options, read_ahead=True)
    return await _core.run_async(client, steps)


@_contract.read_async
async def holders_units(
    client: _core.AsyncDynamoDBClient,
    units: UnitTable,
    lead: Mapping[str, Any],
    *,
    backoff: retry.Backoff,
) -> dict[str, Any] | None:
    """:func:`turnstile_ddb.claims.holders_units`, awaited."""
    return await _core.run_async(client, sync.holders_units_protocol(units, lead, backoff=backoff))


@_contract.write_async
async def release(
    client: _core.AsyncDynamoDBClient,
    units: UnitTable,
    keys: Sequence[Mapping[str, Any]],
    *,
    holder: str,
    backoff: retry.Backoff,
    rand: Callable[[], float] = random.random,
    rounds: int = 3,
) -> list[dict[str, Any]]:
    """:func:`turnstile_ddb.claims.release`, awaited."""
    steps = sync.release_protocol(
        units, keys, holder=holder, backoff=backoff, rand=rand, rounds=rounds
    )
    return await _core.run_async(client, steps)
