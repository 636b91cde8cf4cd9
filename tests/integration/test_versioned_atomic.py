"""turnstile_ddb.versioned's writes without a read (decrement, increment, bump) against DynamoDB
Local,
with real threads: the history of answers is checked against what the table holds at the end."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from service import config
from turnstile_ddb import codec, retry, transact, versioned

BACKOFF = retry.Backoff()


def product(ddb, table: str, product_id: str, **attributes) -> dict:
    item = {"productId": product_id, "version": 1, **attributes}
    ddb.put_item(TableName=table, Item=codec.encode_item(item))
    return {"productId": product_id}


def stored(ddb, table: str, key: dict) -> dict | None:
    raw = ddb.get_item(TableName=table, Key=codec.encode_item(key), ConsistentRead=True)
    return codec.decode_item(raw.get("Item"))


def test_forty_concurrent_decrements_of_twenty_units_sell_exactly_twenty(ddb, tables, unique):
    # Given 20 units and 40 buyers released together, each taking one
    table = tables[config.PRODUCTS]
    key = product(ddb, table, unique, stock=20)
    start = threading.Barrier(40, timeout=120)

    def buy(_: int) -> tuple[str, int]:
        start.wait()
        try:
            after = versioned.decrement(
                ddb, table=table, key=key, attr="stock", amount=1, backoff=BACKOFF
            )
        except versioned.Insufficient as refused:
            return "refused", refused.available
        return "sold", after["stock"]

    with ThreadPoolExecutor(max_workers=40) as pool:
        history = list(pool.map(buy, range(40)))
    # Then exactly 20 sold, each saw a distinct remaining count 19..0, every refusal saw 0,
    # and every sale moved the version once
    sold = sorted(left for outcome, left in history if outcome == "sold")
    assert sold == list(range(20))
    assert [left for outcome, left in history if outcome == "refused"] == [0] * 20
    assert stored(ddb, table, key) == {**key, "stock": 0, "version": 21}


def test_a_decrement_larger_than_the_stock_writes_nothing_and_says_what_is_left(
    ddb, tables, unique
):
    # Given 3 units
    table = tables[config.PRODUCTS]
    key = product(ddb, table, unique, stock=3)
    # When 4 are taken
    with pytest.raises(versioned.Insufficient) as refused:
        versioned.decrement(ddb, table=table, key=key, attr="stock", amount=4, backoff=BACKOFF)
    # Then the refusal carries the item and the count, and nothing changed
    assert refused.value.available == 3
    assert refused.value.current["version"] == 1
    assert stored(ddb, table, key) == {**key, "stock": 3, "version": 1}


def test_decrement_and_increment_never_create_an_item(ddb, tables, unique):
    table = tables[config.PRODUCTS]
    key = {"productId": unique}
    with pytest.raises(versioned.NoSuchItem):
        versioned.decrement(ddb, table=table, key=key, attr="stock", amount=1, backoff=BACKOFF)
    with pytest.raises(versioned.NoSuchItem):
        versioned.increment(ddb, table=table, key=key, attr="stock", amount=1, backoff=BACKOFF)
    assert stored(ddb, table, key) is None


def test_increment_refuses_an_item_without_the_counter(ddb, tables, unique):
    # Given an item that has no stock attribute (a sharded product's catalogue parent)
    table = tables[config.PRODUCTS]
    key = product(ddb, table, unique, shards=4)
    with pytest.raises(versioned.ConditionFailed) as refused:
        versioned.increment(ddb, table=table, key=key, attr="stock", amount=5, backoff=BACKOFF)
    assert not isinstance(refused.value, versioned.Insufficient)
    assert refused.value.current == {**key, "shards": 4, "version": 1}
    assert stored(ddb, table, key) == {**key, "shards": 4, "version": 1}


def test_restocks_racing_with_sales_add_exactly_their_units(ddb, tables, unique):
    # Given 100 units, 30 restocks of 3 and 60 sales of 1 released together
    table = tables[config.PRODUCTS]
    key = product(ddb, table, unique, stock=100)
    start = threading.Barrier(30, timeout=120)  # reusable: trips once per 30 workers

    def act(n: int) -> str:
        start.wait()
        if n % 3 == 0:
            versioned.increment(ddb, table=table, key=key, attr="stock", amount=3, backoff=BACKOFF)
            return "restock"
        versioned.decrement(ddb, table=table, key=key, attr="stock", amount=1, backoff=BACKOFF)
        return "sale"

    with ThreadPoolExecutor(max_workers=30) as pool:
        history = list(pool.map(act, range(90)))
    # Then none was refused, and the stock is exactly 100 + 30 * 3 - 60; 90 versions moved
    assert history.count("restock") == 30
    assert stored(ddb, table, key) == {**key, "stock": 130, "version": 91}


def test_a_bump_at_any_version_lands_whatever_moved_the_version_before_it(ddb, tables, unique):
    # Given a product whose version sales keep moving
    table = tables[config.PRODUCTS]
    key = product(ddb, table, unique, stock=50, name="old")
    start = threading.Barrier(11, timeout=120)

    def sell() -> None:
        start.wait()
        versioned.decrement(ddb, table=table, key=key, attr="stock", amount=1, backoff=BACKOFF)

    def rename() -> dict:
        start.wait()
        return versioned.bump(ddb, table=table, key=key, changes={"name": "new"}, backoff=BACKOFF)

    with ThreadPoolExecutor(max_workers=11) as pool:
        sales = [pool.submit(sell) for _ in range(10)]
        renamed = pool.submit(rename).result()
        for sale in sales:
            sale.result()
    # Then the rename landed once, and every write moved the version by exactly one
    assert renamed["name"] == "new"
    assert stored(ddb, table, key) == {**key, "stock": 40, "name": "new", "version": 12}


def test_a_bump_with_the_callers_condition_refuses_and_writes_nothing(ddb, tables, unique):
    table = tables[config.PRODUCTS]
    key = product(ddb, table, unique, shards=4, name="parent")
    unsharded = versioned.Condition(
        "attribute_not_exists(#xshards) OR #xshards = :xone",
        names={"#xshards": "shards"},
        values={":xone": 1},
    )
    with pytest.raises(versioned.ConditionFailed) as refused:
        versioned.bump(
            ddb,
            table=table,
            key=key,
            changes={"name": "x"},
            backoff=BACKOFF,
            condition=unsharded,
        )
    assert refused.value.current["name"] == "parent"
    with pytest.raises(versioned.NoSuchItem):
        versioned.bump(
            ddb, table=table, key={"productId": f"{unique}-none"}, changes={}, backoff=BACKOFF
        )
    assert stored(ddb, table, key) == {**key, "shards": 4, "name": "parent", "version": 1}


def test_bump_op_at_a_stale_version_cancels_its_transaction_with_the_current_item(
    ddb, tables, unique
):
    # Given a product at version 2
    table = tables[config.PRODUCTS]
    key = product(ddb, table, unique, name="a")
    versioned.bump(ddb, table=table, key=key, changes={}, backoff=BACKOFF)
    # When a transaction bumps it at version 1, and then at version 2
    with pytest.raises(transact.Cancelled) as cancelled:
        transact.transact_write(
            ddb,
            [versioned.bump_op(table, key, {"name": "b"}, expected=1)],
            backoff=BACKOFF,
        )
    assert cancelled.value.failed_at(0)
    assert cancelled.value.reasons[0].item == {**key, "name": "a", "version": 2}
    transact.transact_write(
        ddb, [versioned.bump_op(table, key, {"name": "c"}, expected=2)], backoff=BACKOFF
    )
    # Then only the write at the current version landed
    assert stored(ddb, table, key) == {**key, "name": "c", "version": 3}
