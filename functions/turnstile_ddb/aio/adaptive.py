"""The asyncio front door of :mod:`turnstile_ddb.adaptive`: :class:`Resizer` for an aiobotocore
client and a :class:`turnstile_ddb.aio.lease.Leases`, with the synchronous one's parameters,
decisions, metrics and logs (its one protocol, awaited through
:func:`turnstile_ddb._core.run_async`). The window, the policy and their results
(``LoadWindow``, ``ResizePolicy``, ``Observation``, ``Decision``) do no I/O: use them from
:mod:`turnstile_ddb.adaptive`."""

from __future__ import annotations

from turnstile_ddb import _core, adaptive, sharded
from turnstile_ddb.aio.lease import Leases

__all__ = ["Resizer"]


class Resizer:
    """:class:`turnstile_ddb.adaptive.Resizer` for an aiobotocore ``client``; ``leases`` is an
    :class:`turnstile_ddb.aio.lease.Leases` (its settings: the requests go through ``client``)."""

    def __init__(
        self,
        client: _core.AsyncDynamoDBClient,
        leases: Leases,
        policy: adaptive.ResizePolicy | None = None,
        load: adaptive.LoadWindow | None = None,
        *,
        hints: sharded.Hints | None = None,
        owner: str | None = None,
        lease_ms: int = 10_000,
    ) -> None:
        self.client = client
        self._resizing = adaptive._Resizing(leases._config(), policy, load, hints, owner, lease_ms)
        self.policy, self.load, self.hints = adaptive._attributes(self._resizing)
        self.owner, self.lease_ms = self._resizing.owner, lease_ms

    def decide(
        self, counter: sharded.ShardedCounter, *, capacity: bool = False
    ) -> adaptive.Decision | None:
        """:meth:`turnstile_ddb.adaptive.Resizer.decide`."""
        return self._resizing.decide(counter, capacity)

    async def maybe_resize(
        self,
        counter: sharded.ShardedCounter,
        *,
        capacity: bool = False,
        client: _core.AsyncDynamoDBClient | None = None,
    ) -> sharded.Resized | None:
        """:meth:`turnstile_ddb.adaptive.Resizer.maybe_resize`, awaited."""
        steps = self._resizing.protocol(counter, capacity)
        return await _core.run_async(client if client is not None else self.client, steps)
