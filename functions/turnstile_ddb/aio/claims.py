"""The asyncio front door of :mod:`turnstile_ddb.claims` (its ``UnitTable``, ``ReserveOptions``,
``PoolHints``, ``UnitCache``, ``Claimed``; its errors ``NotEnough``, ``Unsettled``, ``HoldLost``,
``ClaimHoldLapsed``). Here a reservation whose first pool is short reads the others at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Unpack

from turnstile_ddb import _contract, _core
from turnstile_ddb import claims as sync
from turnstile_ddb._claims_hints import _OldReserveArguments, _options_of
from turnstile_ddb.claims import Claimed, Key, ReserveOptions, UnitTable

__all__ = ["confirm", "holders_units", "release", "reserve"]

confirm = _contract.write_async(_core.awaited(sync.confirm_protocol, __name__))


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


holders_units = _contract.read_async(_core.awaited(sync.holders_units_protocol, __name__))
release = _contract.write_async(_core.awaited(sync.release_protocol, __name__))
