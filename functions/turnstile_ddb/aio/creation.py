"""The asyncio front door of :mod:`turnstile_ddb.creation` (its results ``Created`` and errors
``AlreadyExists``): the sync function's protocol, awaited (:func:`turnstile_ddb._core.awaited`)."""

from __future__ import annotations

from turnstile_ddb import _contract, _core
from turnstile_ddb import creation as sync

__all__ = ["create_if_absent"]

create_if_absent = _contract.write_async(_core.awaited(sync.create_if_absent_protocol))
