"""turnstile_ddb.aio against DynamoDB Local with aiobotocore: many tasks on one event loop, and
several loops in threads, racing on one item; the history of answers is checked against the
table. (asyncio.run inside each test: no plugin.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from local.dynamodb_local import CREDENTIALS
from turnstile_ddb import aio, codec, retry, versioned

aiobotocore_session = pytest.importorskip("aiobotocore.session")

BACKOFF = retry.Backoff()


@contextlib.asynccontextmanager
async def dynamodb(endpoint: str) -> AsyncIterator[Any]:
    session = aiobotocore_session.get_session()
    async with session.create_client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=retry.client_config(),
    ) as client:
        yield client


@pytest.fixture
def products(ddb: Any, unique: str) -> str:
    table = f"aio-products-{unique}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "productId", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "productId", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(
        TableName=table, Item=codec.encode_item({"productId": "p", "stock": 20, "version": 1})
    )
    ddb.put_item(
        TableName=table, Item=codec.encode_item({"productId": "q", "stock": 12, "version": 1})
    )
    return table


def stored(ddb: Any, table: str, product: str) -> dict[str, Any]:
    raw = ddb.get_item(
        TableName=table, Key=codec.encode_item({"productId": product}), ConsistentRead=True
    )
    return codec.decode_item(raw["Item"]) or {}


def test_fifty_tasks_on_one_loop_sell_exactly_the_twenty_units(ddb, dynamodb_local, products):
    # Given 20 units and 50 tasks on one event loop, each taking one unit
    async def buy(client: Any) -> tuple[str, Any]:
        try:
            after = await aio.versioned.decrement(
                client,
                table=products,
                key={"productId": "p"},
                attr="stock",
                amount=1,
                backoff=BACKOFF,
            )
        except versioned.Insufficient as exc:
            return "insufficient", exc.available
        return "sold", after["stock"]

    async def main() -> list[tuple[str, Any]]:
        async with dynamodb(dynamodb_local.endpoint) as client:
            return list(await asyncio.gather(*(buy(client) for _ in range(50))))

    # When they all run
    started = time.perf_counter()
    answers = asyncio.run(main())
    print(f"50 async decrements on one loop: {time.perf_counter() - started:.3f} s")
    # Then exactly 20 sold, each saw a different remainder, the rest were told none were left
    sold = sorted(left for outcome, left in answers if outcome == "sold")
    assert sold == list(range(20))
    assert [left for outcome, left in answers if outcome == "insufficient"] == [0] * 30
    assert stored(ddb, products, "p") == {"productId": "p", "stock": 0, "version": 21}


def test_loops_in_threads_buy_through_read_decide_write_without_overselling(
    ddb, dynamodb_local, products
):
    # Given 12 units and three threads, each with its own loop running ten buyers that read,
    # decide and write an order in the same transaction
    orders = f"{products}-orders"
    ddb.create_table(
        TableName=orders,
        KeySchema=[{"AttributeName": "orderId", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "orderId", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    conflicts = retry.Backoff(attempts=200, base=0.005, cap=0.05)
    answers: list[str] = []
    lock = threading.Lock()

    def decide(item: dict[str, Any] | None) -> dict[str, Any]:
        if item is None or item["stock"] < 1:
            raise LookupError("sold out")
        return {"stock": item["stock"] - 1}

    async def buy(client: Any, order: str) -> str:
        def also(item: Any, changes: Any) -> list[dict[str, Any]]:
            return [{"Put": {"TableName": orders, "Item": codec.encode_item({"orderId": order})}}]

        try:
            await aio.versioned.update_versioned(
                client,
                table=products,
                key={"productId": "q"},
                decide=decide,
                backoff=BACKOFF,
                conflicts=conflicts,
                also=also,
            )
        except LookupError:
            return "sold out"
        return order

    async def loop(name: str) -> None:
        async with dynamodb(dynamodb_local.endpoint) as client:
            done = await asyncio.gather(*(buy(client, f"{name}.{i}") for i in range(10)))
        with lock:
            answers.extend(done)

    threads = [threading.Thread(target=asyncio.run, args=(loop(f"t{n}"),)) for n in range(3)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    print(f"30 async read-decide-writes on 3 loops: {time.perf_counter() - started:.3f} s")
    # Then 12 orders were acknowledged, exactly those are in the table, and the stock is 0
    assert not any(thread.is_alive() for thread in threads)
    acknowledged = sorted(a for a in answers if a != "sold out")
    assert len(answers) == 30 and len(acknowledged) == 12
    kept = sorted(
        str((codec.decode_item(i) or {})["orderId"]) for i in ddb.scan(TableName=orders)["Items"]
    )
    assert kept == acknowledged
    assert stored(ddb, products, "q")["stock"] == 0
