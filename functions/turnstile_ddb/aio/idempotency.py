"""The asyncio front door of :mod:`turnstile_ddb.idempotency`: an ``IdempotencyStore`` of the
same fields and methods (its options ``RecordNames``, results ``InProgress`` and ``Replay``,
errors ``KeyReused`` and ``StillRunning`` are the synchronous module's), taking an aiobotocore
client. ``complete_op`` is the same transaction element; ``begin``, ``complete`` and
``release`` are awaited."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from turnstile_ddb import _contract, _core, retry
from turnstile_ddb import idempotency as sync
from turnstile_ddb.idempotency import InProgress, RecordNames

__all__ = ["IdempotencyStore"]


@dataclass
class IdempotencyStore:
    """:class:`turnstile_ddb.idempotency.IdempotencyStore` for asyncio: the same fields (checked
    the same way) and the same protocols, driven by :func:`turnstile_ddb._core.run_async`."""

    client: _core.AsyncDynamoDBClient
    table: str
    backoff: retry.Backoff = field(default_factory=retry.Backoff)
    lock_ms: int = 30_000
    keep_seconds: int = 24 * 3600
    clock: Callable[[], float] = time.time
    key_attr: str = "id"  # the table's partition key
    expiry_attr: str = "expiresAt"  # the table's TTL attribute (epoch seconds)
    names: RecordNames = field(default_factory=RecordNames)  # the record's own attributes

    def __post_init__(self) -> None:
        """Refuse what the synchronous store refuses, with its words."""
        self._config()

    def _config(self) -> sync.IdempotencyStore:
        """The synchronous store of these fields: its protocols decide, never using its client."""
        options: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return sync.IdempotencyStore(**options)

    def complete_op(self, in_progress: InProgress, answer: Any) -> dict[str, Any]:
        """:meth:`turnstile_ddb.idempotency.IdempotencyStore.complete_op` (no request sent)."""
        return self._config().complete_op(in_progress, answer)

    begin = _contract.write_async(
        _core.awaited_method(sync.IdempotencyStore.begin, sync.IdempotencyStore._begin_protocol)
    )
    complete = _contract.write_async(
        _core.awaited_method(
            sync.IdempotencyStore.complete, sync.IdempotencyStore._complete_protocol
        )
    )
    release = _contract.write_async(
        _core.awaited_method(sync.IdempotencyStore.release, sync.IdempotencyStore._release_protocol)
    )
