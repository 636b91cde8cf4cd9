"""turnstile_ddb.aio.lease against DynamoDB Local with aiobotocore: many tasks on one event loop
contending for one lease through ``async with leases.hold(...)``; the recorded history shows
one holder at a time, fences strictly increasing, and every guarded write applied once.
(asyncio.run inside the test: no plugin.)"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from local.dynamodb_local import CREDENTIALS
from turnstile_ddb import aio, codec, retry

aiobotocore_session = pytest.importorskip("aiobotocore.session")

TASKS = 20
WAITS = retry.Backoff(attempts=1_000, base=0.005, cap=0.05)


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


def create(ddb: Any, table: str, key: str) -> None:
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def test_tasks_on_one_loop_hold_the_lease_one_at_a_time(ddb, dynamodb_local, unique):
    # Given a lease table, a counter table, and twenty tasks on one loop wanting the same lease
    leases_table, counters = f"aio-leases-{unique}", f"aio-counters-{unique}"
    create(ddb, leases_table, "resource")
    create(ddb, counters, "id")
    history: list[tuple[str, str, int]] = []

    async def work(leases: aio.lease.Leases, owner: str) -> None:
        async with leases.hold("r", owner, 30_000, wait_ms=120_000, waits=WAITS) as lease:
            history.append(("enter", owner, lease.fence))
            await asyncio.sleep(0.005)  # let the others run while this one holds
            add = {
                "Update": {
                    "TableName": counters,
                    "Key": codec.encode_item({"id": "c"}),
                    "UpdateExpression": "ADD #n :one",
                    "ExpressionAttributeNames": {"#n": "n"},
                    "ExpressionAttributeValues": codec.values(one=1),
                }
            }
            await leases.transact(lease, [add])
            await aio.lease.fenced_update(
                leases.client,
                table=counters,
                key={"id": "last"},
                fence=lease.fence,
                changes={"owner": owner},
                backoff=retry.Backoff(),
            )
            history.append(("exit", owner, lease.fence))

    async def main() -> None:
        async with dynamodb(dynamodb_local.endpoint) as client:
            leases = aio.lease.Leases(client, leases_table)
            await asyncio.gather(*(work(leases, f"task{n}") for n in range(TASKS)))

    # When they all run
    started = time.perf_counter()
    asyncio.run(main())
    print(f"{TASKS} async holds of one lease on one loop: {time.perf_counter() - started:.3f} s")
    # Then the history alternates enter/exit of the same holder: never two holders at once
    assert len(history) == 2 * TASKS
    entered, exited = history[0::2], history[1::2]
    assert all(event == "enter" for event, _, _ in entered)
    assert [(o, f) for _, o, f in exited] == [(o, f) for _, o, f in entered]
    # And the fences strictly increase, one per acquisition, and every task held once
    fences = [fence for _, _, fence in entered]
    assert fences == list(range(1, TASKS + 1))
    assert sorted(owner for _, owner, _ in entered) == sorted(f"task{n}" for n in range(TASKS))
    # And every guarded write was applied once, the last fenced write by the last holder
    count = ddb.get_item(TableName=counters, Key={"id": {"S": "c"}}, ConsistentRead=True)
    assert int(count["Item"]["n"]["N"]) == TASKS
    last = ddb.get_item(TableName=counters, Key={"id": {"S": "last"}}, ConsistentRead=True)
    assert codec.decode_item(last["Item"]) == {
        "id": "last",
        "owner": entered[-1][1],
        "lastFence": TASKS,
    }
    item = ddb.get_item(TableName=leases_table, Key={"resource": {"S": "r"}}, ConsistentRead=True)
    assert int(item["Item"]["fence"]["N"]) == TASKS and int(item["Item"]["expiresAt"]["N"]) == 0
