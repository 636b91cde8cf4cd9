"""The asyncio front door of :mod:`turnstile_ddb.capacity` (its rows ``CapacityRow`` and
``Member``, its errors ``Full``, ``AlreadyMember``, ``NoCounter``, ``NotMember``): each function
the sync one's protocol, awaited (:func:`turnstile_ddb._core.awaited`)."""

from __future__ import annotations

from turnstile_ddb import _contract, _core
from turnstile_ddb import capacity as sync

__all__ = ["join", "leave"]

join = _contract.write_async(_core.awaited(sync.join_protocol))
leave = _contract.write_async(_core.awaited(sync.leave_protocol))
