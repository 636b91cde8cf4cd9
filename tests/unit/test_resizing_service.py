"""Products and events whose shard count follows the load (``adaptive``): created with one shard,
handed to the resizer after every sharded request, and never failed by it (moto, one thread)."""

from __future__ import annotations

from typing import Any

import pytest

from service.domain import events as events_domain
from service.domain.errors import OutOfStock
from service.domain.events import Events
from service.domain.products import Products
from turnstile_ddb import codec, metrics, sharded


class Recording:
    """A resizer that decides nothing and remembers what it was asked about."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int, bool]] = []

    def maybe_resize(self, counter: sharded.ShardedCounter, *, capacity: bool = False) -> None:
        self.asked.append((counter.base, counter.shards, capacity))


class Exploding:
    def maybe_resize(self, counter: sharded.ShardedCounter, *, capacity: bool = False) -> None:
        raise RuntimeError("the resizer's own table is gone")


def item(client: Any, table: str, **key: str) -> dict[str, Any] | None:
    found = client.get_item(TableName=table, Key=codec.encode_item(key), ConsistentRead=True)
    return codec.decode_item(found.get("Item"))


def test_an_adaptive_product_starts_with_one_shard_and_is_resized_after_every_purchase(
    moto_ddb: Any, moto_tables: Any
) -> None:
    # Given an adaptive product, created without a shard count
    resizer = Recording()
    shop = Products(client=moto_ddb, table=moto_tables["products"], resizer=resizer)
    created = shop.create("flash", "Flash sale", 5, adaptive=True)
    # Then its stock is on one shard, and the product item holds none
    table = moto_tables["products"]
    assert created == {
        "productId": "flash",
        "name": "Flash sale",
        "stock": 5,
        "version": 1,
        "adaptive": True,
    }
    parent = item(moto_ddb, table, productId="flash")
    assert parent is not None and "stock" not in parent and parent["adaptive"] is True
    assert item(moto_ddb, table, productId="flash#0")["stock"] == 5  # type: ignore[index]
    assert item(moto_ddb, table, productId="flash#1") is None
    # When it sells, and when it refuses (a fresh process: it learns the layout first)
    fresh = Products(client=moto_ddb, table=table, resizer=resizer)
    receipt = fresh.purchase("flash", 2)
    with pytest.raises(OutOfStock):
        fresh.purchase("flash", 4)
    # Then both went through the shards and each was handed to the resizer
    assert receipt["remainingStock"] == 3 and receipt["shard"] == 0
    assert resizer.asked == [("flash", 1, False), ("flash", 1, False)]
    assert fresh.get("flash")["stock"] == 3


def test_a_failing_resizer_never_fails_the_sale_it_follows(
    moto_ddb: Any, moto_tables: Any, caplog: pytest.LogCaptureFixture
) -> None:
    shop = Products(client=moto_ddb, table=moto_tables["products"], resizer=Exploding())
    shop.create("p1", "thing", 3, adaptive=True)
    before = metrics.tally.snapshot()
    # When the resizer raises after a purchase
    receipt = shop.purchase("p1", 1)
    # Then the sale stands, and the failure was counted and logged
    assert receipt["remainingStock"] == 2 and shop.get("p1")["stock"] == 2
    failed = metrics.tally.snapshot().get(("adaptive", "ResizeError"), 0.0)
    assert failed - before.get(("adaptive", "ResizeError"), 0.0) == 1
    assert "the request stands" in caplog.text


def test_a_patch_of_an_adaptive_products_stock_sets_its_shards_not_the_product_item(
    moto_ddb: Any, moto_tables: Any
) -> None:
    shop = Products(client=moto_ddb, table=moto_tables["products"])
    shop.create("p2", "thing", 3, adaptive=True)
    # When an If-Match: * PATCH sets the stock of a product whose one shard holds it
    after = Products(client=moto_ddb, table=moto_tables["products"]).update(
        "p2", None, {"stock": 9}
    )
    # Then the shard holds it and the product item still holds none
    assert after["stock"] == 9 and after["version"] == 2
    parent = item(moto_ddb, moto_tables["products"], productId="p2")
    assert parent is not None and "stock" not in parent


def test_an_adaptive_events_registrations_keep_their_keys_whatever_its_shard_count(
    moto_ddb: Any, moto_tables: Any
) -> None:
    # Given an adaptive event (one counter shard), two processes
    resizer = Recording()
    table = moto_tables["events"]
    Events(client=moto_ddb, table=table).create("talk", "Talk", 10, adaptive=True)
    one = Events(client=moto_ddb, table=table, resizer=resizer)
    # When a user registers through one process and cancels through another
    one.register("talk", "alice")
    spread = events_domain.ADAPTIVE_SPREAD
    bucket = events_domain.user_bucket("alice", spread)
    # Then the registration is under the key its fixed spread names, a key of its own (not a
    # counter shard's: a sign-up writes its shard's key already)
    assert item(moto_ddb, table, eventId=f"talk#r{bucket}", sk="REG#alice") is not None
    assert item(moto_ddb, table, eventId="talk#0", sk="REG#alice") is None
    assert one.get("talk")["registered"] == 1 and one.get("talk")["adaptive"] is True
    Events(client=moto_ddb, table=table, resizer=resizer).unregister("talk", "alice")
    assert item(moto_ddb, table, eventId=f"talk#r{bucket}", sk="REG#alice") is None
    assert one.get("talk")["registered"] == 0
    # And the resizer was asked after both, about the event's sharded capacity
    assert resizer.asked == [("talk", 1, True), ("talk", 1, True)]


def test_a_resized_products_and_events_answers_show_the_shards_they_have_now(
    moto_ddb: Any, moto_tables: Any
) -> None:
    # Given an adaptive product and an adaptive event, each resized from one shard to four
    shop = Products(client=moto_ddb, table=moto_tables["products"])
    shop.create("p3", "thing", 10, adaptive=True)
    talks = Events(client=moto_ddb, table=moto_tables["events"])
    talks.create("t3", "Talk", 10, adaptive=True)
    talks.register("t3", "alice")
    sharded.resize(moto_ddb, shop.counter("p3", 1), 4)
    sharded.resize(moto_ddb, talks.shards_of("t3", 1), 4, capacity=True)
    # When a process that knew them at one shard reads them
    product, event = shop.get("p3"), talks.get("t3")
    # Then each shows four shards, and the totals the resizes kept
    assert (product["shards"], product["stock"]) == (4, 10)
    assert (event["shards"], event["registered"], event["capacity"]) == (4, 1, 10)


def test_the_functions_hand_one_resizer_deciding_from_their_hints_load_to_both_domains(
    moto_ddb: Any, moto_tables: Any
) -> None:
    from service import runtime
    from service.handlers import events as events_handler
    from service.handlers import products as products_handler
    from turnstile_ddb import adaptive

    # When the products and events functions build their domain objects
    shop, talks = products_handler.products.get(), events_handler.events.get()
    # Then both resize through the environment's one resizer, whose window their takes feed
    assert isinstance(shop.resizer, adaptive.Resizer)
    assert shop.resizer is talks.resizer is runtime.resizer.get()
    assert shop.hints is talks.hints and isinstance(shop.hints.load, adaptive.LoadWindow)
    assert shop.hints.load is runtime.load.get()
