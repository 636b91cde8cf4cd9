"""The asyncio front door of :mod:`turnstile_ddb.retry` (its policy, options and errors)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from turnstile_ddb import _contract, _core
from turnstile_ddb.retry import Backoff, retrying

__all__ = ["call"]

T = TypeVar("T")


@_contract.write_async
async def call(
    operation: Callable[[], Awaitable[T]],
    *,
    backoff: Backoff,
    idempotent: bool,
    retry_on: Callable[[BaseException], bool] = lambda exc: False,
    pattern: str = "dynamodb",
) -> T:
    """Await ``operation()``, retrying what is safe to retry: :func:`turnstile_ddb.retry.call`."""
    steps = retrying(
        _core.Invoke(operation),
        backoff=backoff,
        idempotent=idempotent,
        retry_on=retry_on,
        pattern=pattern,
    )
    answer: T = await _core.run_async(None, steps)
    return answer
