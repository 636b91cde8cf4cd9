"""``turnstile_ddb.aio``: the primitives for asyncio callers, taking an aiobotocore client.

Each module here mirrors the synchronous module of the same name: the same function names and
parameters, the same options objects (``retry.Backoff``, ``versioned.Condition``, ...), the same
errors (the classes of the synchronous modules themselves, so one ``except`` serves both) and
the same metrics. Both front doors drive one protocol per primitive
(:mod:`turnstile_ddb._core`): only the requests, sleeps and clock reads are done differently.

Install with the extra ``turnstile-ddb[async]`` (aiobotocore). Here so far:

- ``aio.adaptive``: ``Resizer`` (``maybe_resize`` awaited);
- ``aio.capacity``: ``join``, ``leave``;
- ``aio.claims``: ``reserve`` (a first pool short of the units, the other pools' first pages are
  read at once), ``release``, ``confirm``, ``holders_units``;
- ``aio.creation``: ``create_if_absent``;
- ``aio.idempotency``: ``IdempotencyStore`` (``begin``, ``complete``, ``release`` awaited;
  ``complete_op`` as in the synchronous store);
- ``aio.lease``: ``Leases`` (``acquire``, ``acquire_wait``, ``renew``, ``release``,
  ``transact``, ``guard``, ``async with leases.hold(...)``) and ``fenced_update``;
- ``aio.lease_queue``: ``LeaseQueue`` (``acquire`` awaited, ``deadline``, ``heartbeat`` and
  ``async with queue.hold(...)``, the heartbeat an asyncio task) and ``Heartbeat``;
- ``aio.retry``: ``call`` (``operation`` returns an awaitable);
- ``aio.sharded``: ``take``, ``add``, ``set_total``, ``read_items``, ``read_all``, ``join``,
  ``leave`` (a read of more than 100 shards sends its pages at once);
- ``aio.slots``: ``create``, ``book``, ``book_any``, ``release``;
- ``aio.transact``: ``transact_write``;
- ``aio.versioned``: ``read``, ``update_if_version``, ``update_versioned``, ``decrement``,
  ``increment``, ``bump``.

Every public primitive of the library is here.

A ``Backoff`` whose ``sleep`` is the default ``time.sleep`` sleeps with ``asyncio.sleep`` here;
an injected sleep is called, and awaited when it returns an awaitable (a coroutine function).
"""

from __future__ import annotations

from turnstile_ddb.aio import (
    adaptive,
    capacity,
    claims,
    creation,
    idempotency,
    lease,
    lease_queue,
    retry,
    sharded,
    slots,
    transact,
    versioned,
)

__all__ = [
    "adaptive",
    "capacity",
    "claims",
    "creation",
    "idempotency",
    "lease",
    "lease_queue",
    "retry",
    "sharded",
    "slots",
    "transact",
    "versioned",
]
