"""The asyncio front door of :mod:`turnstile_ddb.idempotency`: an ``IdempotencyStore`` of the
same fields and methods (its options ``RecordNames``, results ``InProgress`` and ``Replay``,
errors ``KeyReused`` and ``StillRunning`` are the synchronous module's), taking an aiobotocore
client. ``complete_op`` is the same transaction element; ``begin``, ``complete`` and
``release`` are awaited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from turnstile_ddb import _contract, _core
from turnstile_ddb import idempotency as sync
from turnstile_ddb.idempotency import InProgress, Replay

__all__ = ["IdempotencyStore"]


@dataclass
class IdempotencyStore(sync._Records):
    """:class:`turnstile_ddb.idempotency.IdempotencyStore` for asyncio: the same options and
    protocols, driven by :func:`turnstile_ddb._core.run_async`."""

    client: _core.AsyncDynamoDBClient

    @_contract.write_async
    async def begin(self, key: str, request_fingerprint: str) -> InProgress | Replay:
        """:meth:`turnstile_ddb.idempotency.IdempotencyStore.begin`, awaited."""
        return await _core.run_async(self.client, self.begin_protocol(key, request_fingerprint))

    @_contract.write_async
    async def complete(self, in_progress: InProgress, answer: Any) -> bool:
        """:meth:`turnstile_ddb.idempotency.IdempotencyStore.complete`, awaited."""
        return await _core.run_async(self.client, self.complete_protocol(in_progress, answer))

    @_contract.write_async
    async def release(self, in_progress: InProgress) -> None:
        """:meth:`turnstile_ddb.idempotency.IdempotencyStore.release`, awaited."""
        await _core.run_async(self.client, self.release_protocol(in_progress))
