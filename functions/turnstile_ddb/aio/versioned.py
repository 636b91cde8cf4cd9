"""The asyncio front door of :mod:`turnstile_ddb.versioned` (its options ``Condition``, its
errors ``Insufficient``, ``NoSuchItem``, ``VersionConflict``, ...; ``decide`` and ``also`` stay
plain functions, called as they are). Each function is the sync one's protocol, awaited
(:func:`turnstile_ddb._core.awaited`): the same parameters, answers, errors and metrics."""

from __future__ import annotations

from turnstile_ddb import _contract, _core
from turnstile_ddb import versioned as sync

__all__ = ["bump", "decrement", "increment", "read", "update_if_version", "update_versioned"]

read = _contract.read_async(_core.awaited(sync.read_protocol))
update_if_version = _contract.write_async(_core.awaited(sync.update_if_version_protocol))
update_versioned = _contract.write_async(_core.awaited(sync.update_versioned_protocol))
decrement = _contract.write_async(_core.awaited(sync.decrement_protocol))
increment = _contract.write_async(_core.awaited(sync.increment_protocol))
bump = _contract.write_async(_core.awaited(sync.bump_protocol))
