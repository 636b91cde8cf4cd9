"""The asyncio front door of :mod:`turnstile_ddb.sharded` (its ``ShardedCounter``, options
``TakeOptions`` and ``Hints``, results ``Taken`` and errors ``Exhausted``, ``Full``,
``Missing``): each function the sync one's protocol, awaited
(:func:`turnstile_ddb._core.awaited`); the pages of a read of more than 100 shards are sent at
once. ``take`` has no keywords of 0.3 (the sync one's deprecated ones)."""

from __future__ import annotations

from turnstile_ddb import _contract, _core, _sharded_resize
from turnstile_ddb import sharded as sync

__all__ = ["add", "join", "leave", "read_all", "read_items", "resize", "set_total", "take"]

read_items = _contract.read_async(_core.awaited(sync.read_items_protocol))
read_all = _contract.read_async(_core.awaited(sync.read_all_protocol))
take = _contract.write_async(_core.awaited(sync.take_protocol))
join = _contract.write_async(_core.awaited(sync.join_protocol))
leave = _contract.write_async(_core.awaited(sync.leave_protocol))
set_total = _contract.write_async(_core.awaited(sync.set_total_protocol))
add = _contract.write_async(_core.awaited(sync.add_protocol))
resize = _contract.write_async(_core.awaited(_sharded_resize.resize_protocol))
