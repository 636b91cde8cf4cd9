"""The asyncio front door of :mod:`turnstile_ddb.slots` (its errors ``SlotTaken``,
``NoSuchSlot``, ``NotHolder``; its default attribute names ``HOLDER`` and ``VERSION``): each
function the sync one's protocol, awaited (:func:`turnstile_ddb._core.awaited`)."""

from __future__ import annotations

from turnstile_ddb import _contract, _core
from turnstile_ddb import slots as sync

__all__ = ["book", "book_any", "create", "release"]


create = _contract.write_async(_core.awaited(sync.create_protocol))
book = _contract.write_async(_core.awaited(sync.book_protocol))
book_any = _contract.write_async(_core.awaited(sync.book_any_protocol))
book_any.__doc__ = (
    ":func:`turnstile_ddb.slots.book_any`, awaited (the candidates in order, as there)."
)
release = _contract.write_async(_core.awaited(sync.release_protocol))
