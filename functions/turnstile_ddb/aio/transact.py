"""The asyncio front door of :mod:`turnstile_ddb.transact` (its errors: ``Cancelled``, ...): the
sync function's protocol, awaited (:func:`turnstile_ddb._core.awaited`)."""

from __future__ import annotations

from turnstile_ddb import _contract, _core
from turnstile_ddb import transact as sync

__all__ = ["transact_write"]

transact_write = _contract.write_async(_core.awaited(sync.transact_write_protocol))
