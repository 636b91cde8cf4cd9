"""An asyncio web shop (aiohttp): forty buyers at once for ten mugs, all on one event loop.

Each ``POST /mugs/buy`` awaits ``turnstile_ddb.aio.versioned.decrement`` on one aiobotocore
client shared by every request: the same conditional write as the synchronous ``decrement``
(``SET stock = stock - :amount`` guarded by ``stock >= :amount``), so exactly ten buyers get 200,
the thirty others 409, and the stock ends at zero, not under it. Needs the ``async`` extra:
``pip install 'turnstile-ddb[async]'`` (aiobotocore, which brings aiohttp).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from _local import client, create_table
from aiobotocore.session import get_session
from aiohttp import ClientSession, web

from turnstile_ddb import retry, versioned
from turnstile_ddb.aio import versioned as aio_versioned

ddb = client()  # boto3, only to make the table and look at it afterwards
table = create_table(ddb, "async-shop", "sku")
key = {"sku": "mug"}
ddb.put_item(
    TableName=table, Item={"sku": {"S": "mug"}, "stock": {"N": "10"}, "version": {"N": "1"}}
)


def shop(dynamodb: Any) -> web.Application:
    async def buy(request: web.Request) -> web.Response:
        try:
            item = await aio_versioned.decrement(
                dynamodb, table=table, key=key, attr="stock", amount=1, backoff=retry.Backoff()
            )
        except versioned.Insufficient as refused:
            return web.json_response({"error": "SOLD_OUT", "left": refused.available}, status=409)
        return web.json_response({"left": item["stock"]})

    app = web.Application()
    app.router.add_post("/mugs/buy", buy)
    return app


async def main() -> Counter[int]:
    async with get_session().create_client("dynamodb", region_name="us-east-1") as dynamodb:
        runner = web.AppRunner(shop(dynamodb))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)  # any free port
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with ClientSession() as http:

                async def buyer() -> int:
                    async with http.post(f"http://127.0.0.1:{port}/mugs/buy") as answer:
                        return answer.status

                statuses = await asyncio.gather(*(buyer() for _ in range(40)))
        finally:
            await runner.cleanup()
    return Counter(statuses)


statuses = asyncio.run(main())
item = versioned.read(ddb, table, key, retry.Backoff())
assert item is not None
print(f"{statuses[200]} sold, {statuses[409]} told sold out; stock {item['stock']}")
# Exactly the stock was sold, every other buyer was refused, and nothing else happened
assert statuses == Counter({200: 10, 409: 30}), statuses
assert item["stock"] == 0 and item["version"] == 1 + 10
