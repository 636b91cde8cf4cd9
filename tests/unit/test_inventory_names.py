"""Pool names and the index read back from them (the guessed units of a pool depend on it)."""

from __future__ import annotations

from service.domain.inventory import pool_index, pool_names, unit_key


def test_a_pools_index_is_read_back_from_its_name() -> None:
    for sku in ("plain", "sku-12", "a1b2"):
        assert [pool_index(name) for name in pool_names(sku, 12)] == list(range(12))


def test_a_units_partition_is_the_pool_its_number_falls_in() -> None:
    pools = pool_names("sku-7", 8)
    for number in (0, 7, 8, 9, 15, 99_999):
        key = unit_key("sku-7", number, 8)
        assert key["sku"] in pools
        assert pool_index(key["sku"]) == number % 8
