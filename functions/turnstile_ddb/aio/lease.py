"""The asyncio front door of :mod:`turnstile_ddb.lease`: :class:`Leases` with the same options
(``LeaseAttributes``, ``retry.Backoff``, ``clock``, ``safety_margin_ms``, ``key_attr``), the same
errors (``Held``, ``Queued``, ``LeaseLost``, ``StaleFence``, ``NoTimeLeft``), the same metrics,
and ``async with leases.hold(...) as lease:`` for the FOR UPDATE of a read-modify-write.

Every request, condition and decision is the synchronous module's (its protocols, driven here
by :func:`turnstile_ddb._core.run_async`). A wait between acquisition attempts sleeps with
``asyncio.sleep`` unless ``waits.sleep`` was injected. Like the synchronous ``hold``, this one
keeps no heartbeat: a body that may outlast ``ttl_ms`` renews the lease itself."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from turnstile_ddb import _contract, _core, retry
from turnstile_ddb import lease as sync
from turnstile_ddb.lease import SAFETY_MARGIN_MS, Lease, LeaseAttributes

__all__ = ["Leases", "fenced_update"]


@dataclass
class Leases:
    """:class:`turnstile_ddb.lease.Leases` for an aiobotocore ``client``."""

    client: _core.AsyncDynamoDBClient
    table: str
    backoff: retry.Backoff = field(default_factory=retry.Backoff)
    clock: Callable[[], float] = time.time
    safety_margin_ms: int = SAFETY_MARGIN_MS
    key_attr: str = "resource"
    attributes: LeaseAttributes = field(default_factory=LeaseAttributes)

    def __post_init__(self) -> None:
        """Refuse what the synchronous ``Leases`` refuses, with its errors."""
        self._config()

    def _config(self) -> sync.Leases:
        """These settings as the synchronous ``Leases`` the protocols read them from (its
        client is never called: the requests are sent here)."""
        return sync.Leases(
            cast(Any, self.client), self.table, self.backoff, self.clock,
            self.safety_margin_ms, self.key_attr, self.attributes,
        )  # fmt: skip

    def wire_key(self, resource: str) -> dict[str, Any]:
        """:meth:`turnstile_ddb.lease.Leases.wire_key`."""
        return self._config().wire_key(resource)

    def names(self, *placeholders: str) -> dict[str, str]:
        """:meth:`turnstile_ddb.lease.Leases.names`."""
        return self._config().names(*placeholders)

    def now_ms(self) -> int:
        return self._config().now_ms()

    def time_left_ms(self, lease: Lease) -> int:
        """:meth:`turnstile_ddb.lease.Leases.time_left_ms`."""
        return self._config().time_left_ms(lease)

    def guard(self, lease: Lease) -> dict[str, Any]:
        """:meth:`turnstile_ddb.lease.Leases.guard` (a request element: nothing is sent)."""
        return self._config().guard(lease)

    acquire = _contract.write_async(
        _core.awaited_method(sync.Leases.acquire, sync.acquire_protocol)
    )

    @_contract.write_async
    async def acquire_wait(
        self,
        resource: str,
        owner: str,
        ttl_ms: int,
        *,
        wait_ms: int,
        waits: retry.Backoff,
        remaining_ms: Callable[[], int] | None = None,
    ) -> Lease:
        """:meth:`turnstile_ddb.lease.Leases.acquire_wait`, awaited (the wait does not block
        the event loop)."""
        attempt = _core.Invoke(
            lambda: self.acquire(resource, owner, ttl_ms, remaining_ms=remaining_ms)
        )
        steps = sync.acquire_wait_protocol(self._config(), attempt, wait_ms, waits, remaining_ms)
        return await _core.run_async(self.client, steps)

    renew = _contract.write_async(_core.awaited_method(sync.Leases.renew, sync.renew_protocol))
    release = _contract.write_async(
        _core.awaited_method(sync.Leases.release, sync.release_protocol)
    )
    transact = _contract.write_async(
        _core.awaited_method(sync.Leases.transact, sync.transact_protocol)
    )

    @asynccontextmanager
    async def hold(
        self,
        resource: str,
        owner: str,
        ttl_ms: int,
        *,
        wait_ms: int,
        waits: retry.Backoff,
        remaining_ms: Callable[[], int] | None = None,
    ) -> AsyncIterator[Lease]:
        """``async with leases.hold(...) as lease:`` as
        :meth:`turnstile_ddb.lease.Leases.hold`: the lease is taken before the body runs and
        released on leaving it, also on an exception or a cancellation; a release that fails
        is not raised (the lease ends at its ``expiresAt``)."""
        lease = await self.acquire_wait(
            resource, owner, ttl_ms, wait_ms=wait_ms, waits=waits, remaining_ms=remaining_ms
        )
        try:
            yield lease
        finally:
            with contextlib.suppress(*sync._RELEASE_NOT_RAISED):
                await self.release(lease)


fenced_update = _contract.write_async(_core.awaited(sync.fenced_update_protocol))
fenced_update.__module__ = __name__
