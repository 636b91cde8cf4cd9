"""The asyncio front door of :mod:`turnstile_ddb.sharded` (its ``ShardedCounter``, options
``TakeOptions`` and ``Hints``, results ``Taken`` and errors ``Exhausted``, ``Full``,
``Missing``); the pages of a read of more than 100 shards are sent at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from turnstile_ddb import _contract, _core, _sharded_counter, capacity, retry
from turnstile_ddb import sharded as sync
from turnstile_ddb.sharded import Hints, ShardedCounter, Taken, TakeOptions

__all__ = ["add", "join", "leave", "read_all", "read_items", "set_total", "take"]

_BACKOFF = _sharded_counter._BACKOFF  # the synchronous functions' default object


@_contract.read_async
async def read_items(
    client: _core.AsyncDynamoDBClient, counter: ShardedCounter, backoff: retry.Backoff = _BACKOFF
) -> list[dict[str, Any]]:
    """:func:`turnstile_ddb.sharded.read_items`, awaited."""
    return await _core.run_async(client, sync.read_items_protocol(counter, backoff))


@_contract.read_async
async def read_all(
    client: _core.AsyncDynamoDBClient, counter: ShardedCounter, backoff: retry.Backoff = _BACKOFF
) -> list[int]:
    """:func:`turnstile_ddb.sharded.read_all`, awaited."""
    return await _core.run_async(client, sync.read_all_protocol(counter, backoff))


@_contract.write_async
async def take(
    client: _core.AsyncDynamoDBClient,
    counter: ShardedCounter,
    quantity: int,
    options: TakeOptions | None = None,
) -> Taken:
    """:func:`turnstile_ddb.sharded.take`, awaited (without the keywords of 0.3)."""
    return await _core.run_async(client, sync.take_protocol(counter, quantity, options))


@_contract.write_async
async def join(
    client: _core.AsyncDynamoDBClient,
    counter: ShardedCounter,
    member: capacity.Member,
    options: TakeOptions | None = None,
    *,
    transactions: retry.Backoff | None = None,
    also: Sequence[dict[str, Any]] = (),
) -> int:
    """:func:`turnstile_ddb.sharded.join`, awaited."""
    steps = sync.join_protocol(counter, member, options, transactions=transactions, also=also)
    return await _core.run_async(client, steps)


@_contract.write_async
async def leave(
    client: _core.AsyncDynamoDBClient,
    counter: ShardedCounter,
    member: capacity.Member,
    options: TakeOptions | None = None,
    *,
    transactions: retry.Backoff | None = None,
) -> int:
    """:func:`turnstile_ddb.sharded.leave`, awaited."""
    steps = sync.leave_protocol(counter, member, options, transactions=transactions)
    return await _core.run_async(client, steps)


@_contract.write_async
async def set_total(
    client: _core.AsyncDynamoDBClient,
    counter: ShardedCounter,
    total: int,
    *,
    backoff: retry.Backoff = _BACKOFF,
    also: Callable[[], Sequence[dict[str, Any]]] = lambda: (),
    stamp: dict[str, Any] | None = None,
    attempts: int = 8,
    hints: Hints | None = None,
) -> list[int]:
    """:func:`turnstile_ddb.sharded.set_total`, awaited."""
    steps = sync.set_total_protocol(
        counter, total, backoff=backoff, also=also, stamp=stamp, attempts=attempts, hints=hints
    )
    return await _core.run_async(client, steps)


@_contract.write_async
async def add(
    client: _core.AsyncDynamoDBClient,
    counter: ShardedCounter,
    units: int,
    *,
    backoff: retry.Backoff = _BACKOFF,
    also: Sequence[dict[str, Any]] = (),
    stamp: dict[str, Any] | None = None,
    increments: Sequence[str] = (),
    hints: Hints | None = None,
) -> None:
    """:func:`turnstile_ddb.sharded.add`, awaited."""
    steps = sync.add_protocol(
        counter, units, backoff=backoff, also=also, stamp=stamp, increments=increments, hints=hints
    )
    await _core.run_async(client, steps)
