"""The asyncio front door of :mod:`turnstile_ddb.lease_queue`: :class:`LeaseQueue` with the same
options (``QueueSettings``, ``sleep``, ``monotonic``, ``on_ticket``), errors (``WaitTimedOut``,
``PassedOver``, the lease's), metrics, and ``async with queue.hold(...) as beat:``.

Every request, condition, nap and decision is the synchronous module's (its protocols, driven
here by :func:`turnstile_ddb._core.run_async`): a waiter's naps are ``asyncio.sleep`` unless
``sleep`` was injected, and the :class:`Heartbeat` is an asyncio task, cancelled on leaving its
block. A waiter cancelled while it waits leaves its ticket as a synchronous waiter interrupted
there would: nobody comes for it, and the queue passes it over (see *Liveness*)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from turnstile_ddb import _contract, _core
from turnstile_ddb import _queue_waiting as _waiting
from turnstile_ddb import lease as sync_lease
from turnstile_ddb import lease_queue as sync
from turnstile_ddb.aio.lease import Leases
from turnstile_ddb.lease import Lease
from turnstile_ddb.lease_queue import QueueSettings

__all__ = ["Heartbeat", "LeaseQueue"]


@dataclass
class LeaseQueue:
    """:class:`turnstile_ddb.lease_queue.LeaseQueue` on an ``aio.lease.Leases``."""

    leases: Leases
    settings: QueueSettings = field(default_factory=QueueSettings)
    sleep: Callable[[float], Any] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    on_ticket: Callable[[str, str, int], None] | None = None
    quiet: set[str] = field(default_factory=set)

    def _config(self) -> sync.LeaseQueue:
        """These settings as the synchronous queue the protocols read (the same ``quiet``)."""
        return sync.LeaseQueue(
            self.leases._config(), self.settings, self.sleep, self.monotonic, self.on_ticket,
            self.quiet,
        )  # fmt: skip

    def deadline(self, wait_ms: int, remaining_ms: Callable[[], int] | None = None) -> float:
        """:meth:`turnstile_ddb.lease_queue.LeaseQueue.deadline`."""
        return self._config().deadline(wait_ms, remaining_ms)

    @_contract.write_async
    async def acquire(
        self,
        resource: str,
        owner: str,
        *,
        wait_ms: int,
        ttl_ms: int | None = None,
        remaining_ms: Callable[[], int] | None = None,
    ) -> Lease:
        """:meth:`turnstile_ddb.lease_queue.LeaseQueue.acquire`, awaited."""
        steps = _waiting.acquire_protocol(
            self._config(), resource, owner, wait_ms, ttl_ms, remaining_ms
        )
        return await _core.run_async(self.leases.client, steps)

    def heartbeat(self, held: Lease, *, remaining_ms: Callable[[], int] | None = None) -> Heartbeat:
        """:meth:`turnstile_ddb.lease_queue.LeaseQueue.heartbeat`, as a task (``async with``)."""
        settings = self.settings
        return Heartbeat(
            self.leases, held, period_ms=settings.heartbeat_ms, ttl_ms=settings.expiry_ms,
            remaining_ms=remaining_ms, margin_ms=settings.margin_ms,
        )  # fmt: skip

    @asynccontextmanager
    async def hold(
        self,
        resource: str,
        owner: str,
        *,
        wait_ms: int,
        ttl_ms: int | None = None,
        remaining_ms: Callable[[], int] | None = None,
    ) -> AsyncIterator[Heartbeat]:
        """:meth:`turnstile_ddb.lease_queue.LeaseQueue.hold`: ``async with``, released on
        leaving, also on an exception or a cancellation."""
        held = await self.acquire(
            resource, owner, wait_ms=wait_ms, ttl_ms=ttl_ms, remaining_ms=remaining_ms
        )
        beat = self.heartbeat(held, remaining_ms=remaining_ms)
        try:
            async with beat:
                yield beat
        finally:
            with contextlib.suppress(*sync_lease._RELEASE_NOT_RAISED):
                await self.leases.release(beat.lease)


class Heartbeat:
    """:class:`turnstile_ddb.lease_queue.Heartbeat` as an asyncio task: the same loop, renewing
    with the awaited ``leases.renew``; cancelled (and awaited) on leaving ``async with``.
    ``start`` replaces :func:`asyncio.create_task`; ``sleep`` the naps' ``asyncio.sleep``."""

    def __init__(
        self,
        leases: Leases,
        held: Lease,
        *,
        period_ms: int,
        ttl_ms: int,
        remaining_ms: Callable[[], int] | None = None,
        margin_ms: int = 1000,
        sleep: Callable[[float], Any] | None = None,
        start: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] | None = None,
    ) -> None:
        self.leases = leases
        self.lease = held
        self.period_ms = period_ms
        self.ttl_ms = ttl_ms
        self.remaining_ms = remaining_ms
        self.margin_ms = margin_ms
        self.lost = asyncio.Event()
        self.renewals = 0
        self._sleep = sleep or time.sleep  # time.sleep: asyncio.sleep, through the driver
        self._start = start or asyncio.create_task
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeat:
        self._task = self._start(_core.run_async(None, _waiting.heartbeat_protocol(self)))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])  # ended; a cancellation of the caller still raises

    async def _stopped_after(self, seconds: float) -> bool:
        await _core.run_async(None, _nap(seconds, self._sleep))
        return False  # stopped by cancelling the task

    def _renewed(self, ttl_ms: int) -> Coroutine[Any, Any, Lease]:
        return self.leases.renew(self.lease, ttl_ms)

    def _set_lost(self) -> None:
        self.lost.set()


def _nap(seconds: float, sleep: Callable[[float], Any]) -> _core.Steps[None]:
    yield _core.Sleep(seconds, sleep)
