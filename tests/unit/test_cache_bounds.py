"""Every per-process cache keyed by something clients choose stays bounded however many distinct
keys a long-lived process sees (docs/soak.md, "Bounds"): the LRU they share, the inventory's sku
headers, the local authorizer's verified tokens and the local capacity model's buckets."""

from __future__ import annotations

from typing import Any

import pytest

from local.bridge import CachedVerifier
from local.capacity_model import CapacityModel
from service.domain.inventory import READY, Inventory
from service.lru import LRU

MANY = 5_000


def test_an_lru_keeps_the_most_recently_used_entries_only() -> None:
    cache: LRU[int, int] = LRU(100)
    for key in range(MANY):
        cache.put(key, key)
        cache.get(0)  # read all along: the most recent every time
    assert len(cache) == 100
    assert 0 in cache and MANY - 1 in cache
    assert 1 not in cache and MANY - 100 not in cache
    assert cache.pop(0) == 0 and cache.get(0) is None


def test_an_lru_must_hold_something() -> None:
    with pytest.raises(ValueError):
        LRU(0)


class _Headers:
    """A DynamoDB client that answers every header read with a READY header, counting reads."""

    def __init__(self) -> None:
        self.reads = 0

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.reads += 1
        sku = kwargs["Key"]["sku"]["S"]
        return {
            "Item": {
                "sku": {"S": sku},
                "sk": {"S": "sku"},
                "units": {"N": "10"},
                "pools": {"N": "1"},
                "status": {"S": READY},
            }
        }


def test_the_inventory_keeps_the_headers_of_its_most_recent_skus_only() -> None:
    client = _Headers()
    stock = Inventory(client=client, table="inventory", summary_table="s", header_cache_skus=64)
    for i in range(MANY):
        assert stock.header(f"sku-{i}")["units"] == 10
    assert len(stock._headers) == 64
    reads = client.reads
    stock.header(f"sku-{MANY - 1}")  # recent: from the cache
    assert client.reads == reads
    stock.header("sku-0")  # long forgotten: read again
    assert client.reads == reads + 1


class _Verifier:
    def __init__(self) -> None:
        self.calls = 0

    def verify(self, authorization: str | None) -> dict[str, str]:
        self.calls += 1
        return {"sub": str(authorization), "exp": "Fri Jan 01 00:00:00 UTC 2100"}


def test_the_local_authorizer_keeps_its_most_recent_tokens_only() -> None:
    verifier = _Verifier()
    cached = CachedVerifier(verifier, max_entries=50, clock=lambda: 0.0)
    for i in range(MANY):
        cached.verify(f"token-{i}")
        cached.verify("token-hot")
    assert len(cached._answers) == 50
    assert verifier.calls == MANY + 1  # the hot token verified once, then always from the cache


def test_the_capacity_model_keeps_the_buckets_of_its_most_recent_keys_only() -> None:
    model = CapacityModel(1.0, clock=lambda: 0.0, max_keys=100)
    hot = ("t", "", '"hot"', "W")
    for i in range(MANY):
        assert model.admit([(("t", "", f'"k{i}"', "W"), 1.0), (hot, 0.1)]) == [True, True]
    assert len(model._buckets) == 100
    # the hot key's bucket was kept all along: every charge taken from the same, never refilled
    kept = model._buckets.get(hot)
    assert kept is not None and kept.tokens == pytest.approx(1000.0 - 0.1 * MANY)
