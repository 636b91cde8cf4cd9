"""A restock of a product whose shard count this environment knows is one write, no read: the
count never changes, and the add's own condition (``attribute_exists(stock)``) refuses a missing
product or a sharded product's parent, so the read could only repeat what is known."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from service.domain.errors import NotFound
from service.domain.products import Products


def sent(client: Any) -> Counter[str]:
    """The operations ``client`` sends from now on, counted (live)."""
    seen: Counter[str] = Counter()
    client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: seen.update([model.name])
    )
    return seen


def test_a_known_products_restock_is_one_write(moto_ddb, moto_tables):
    # Given a product created by this environment
    products = Products(client=moto_ddb, table=moto_tables["products"])
    products.create("p1", "P", 5)
    calls = sent(moto_ddb)
    # When it is restocked twice
    first = products.restock("p1", 2)
    second = products.restock("p1", 3)
    # Then each restock was one UpdateItem, and the stock is exact
    assert calls == Counter({"UpdateItem": 2})
    assert (first["stock"], second["stock"]) == (7, 10)
    assert second["version"] == first["version"] + 1


def test_an_unknown_product_is_still_not_found_and_a_sharded_one_still_adds(moto_ddb, moto_tables):
    products = Products(client=moto_ddb, table=moto_tables["products"])
    with pytest.raises(NotFound):
        products.restock("nobody", 1)
    # a sharded product created elsewhere (another environment): learnt by its read
    Products(client=moto_ddb, table=moto_tables["products"]).create("s1", "S", 4, shards=2)
    assert products.restock("s1", 2)["stock"] == 6
    assert products.restock("s1", 1)["stock"] == 7
