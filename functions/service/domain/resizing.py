"""Resizing sharded counters after requests: what products and events share.

A sharded product's stock and a sharded event's seats are counters of
:mod:`turnstile_ddb.sharded` whose shard count may change while requests go on. After each
request on one, the domain hands the counter to a :class:`Resizes` (in Lambda a
:class:`turnstile_ddb.adaptive.Resizer`, built by ``service.runtime``), which decides from what
this process observed whether to grow or shrink it, and does. Deciding is cheap and calls
nothing; a resize is one transaction that never changes the counter's total.

A resize never fails the request it follows: :func:`after_request` counts whatever the resizer
raised (``ResizeError``, pattern ``adaptive``), logs it, and returns.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from turnstile_ddb import adaptive, metrics, sharded

logger = logging.getLogger(__name__)


class Resizes(Protocol):
    """What decides, after a request on a sharded counter, whether to resize it (and does):
    :class:`turnstile_ddb.adaptive.Resizer`. Called after every sharded take or join; it must be
    cheap when it decides nothing."""

    def maybe_resize(self, counter: sharded.ShardedCounter, *, capacity: bool = False) -> Any: ...


def after_request(
    resizer: Resizes | None, counter: sharded.ShardedCounter, *, capacity: bool = False
) -> None:
    """Let ``resizer`` decide on ``counter`` after a request; anything it raises is counted and
    logged, never passed on: a resize must not fail the request it follows."""
    if resizer is None:
        return
    try:
        resizer.maybe_resize(counter, capacity=capacity)
    except Exception:  # the request stands whatever the resize did
        metrics.count("ResizeError", pattern=adaptive.PATTERN)
        logger.exception("resizing %s failed; the request stands", counter.base)


def is_sharded(item: dict[str, Any]) -> bool:
    """A product or event item whose count lives in shards: created with several, or adaptive."""
    return item.get("shards", 1) > 1 or bool(item.get("adaptive"))
