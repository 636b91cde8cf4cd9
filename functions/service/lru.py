"""A dict of at most ``size`` entries that forgets the least recently used first: the bound of
every per-process cache that is keyed by something clients choose (a sku, a token, a partition
key), so a long-lived process does not grow with the number of distinct keys it has seen.

Hand-written because ``functools.lru_cache`` memoizes a function (these caches are also written
and invalidated from outside one) and ``cachetools`` is not in the functions' layer; an
``OrderedDict`` under a lock is all it takes, as ``turnstile_ddb.claims`` does for its hints.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; reading or writing one makes it the most recent, and a write
    beyond ``size`` drops the least recent. Thread-safe."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("an LRU holds at least one entry")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def peek(self, key: K) -> V | None:
        """The entry of ``key`` without making it the most recent (a look that is no use)."""
        with self._lock:
            return self._entries.get(key)

    def pop(self, key: K) -> V | None:
        with self._lock:
            return self._entries.pop(key, None)

    def items(self) -> list[tuple[K, V]]:
        """A copy of the entries, least recent first; reading it changes no order."""
        with self._lock:
            return list(self._entries.items())

    def __iter__(self) -> Iterator[K]:
        return iter([key for key, _ in self.items()])

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
