"""turnstile_ddb.aio.claims against DynamoDB Local with aiobotocore: one sku over eight pools,
reserved by many tasks on one event loop and by several loops in threads at once, the history of
answers checked against the table: no unit held by two reservations, every unit a reservation
was told it holds held by it, and every other unit still free. (asyncio.run per loop: no plugin.)"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import threading
import time
from typing import Any

import pytest

from sim.reserving import create_units
from tests.integration.test_aio_versioned import dynamodb
from turnstile_ddb import aio, claims, codec, errors, retry

pytest.importorskip("aiobotocore.session")

POOLS = [f"s#{n}" for n in range(8)]
EACH = 6  # units in each pool: 48 in all, fewer than asked for
# Many reservations race for few units: budgets that outlast them (bounded, not timed).
OPTIONS = claims.ReserveOptions(backoff=retry.Backoff(attempts=20, base=0.005, cap=0.05), rounds=30)


async def reserve(client: Any, units: claims.UnitTable, name: str, quantity: int) -> Any:
    """One reservation: ``(name, quantity, keys)`` when held, ``(name, quantity, error)`` else."""
    now_ms = int(time.time() * 1000)
    options = dataclasses.replace(OPTIONS, rand=random.Random(name).random)
    try:
        claimed = await aio.claims.reserve(
            client,
            units,
            pools=POOLS,
            quantity=quantity,
            holder=lambda lead: name,
            now_ms=now_ms,
            until_ms=now_ms + 600_000,
            options=options,
        )
    except (claims.NotEnough, errors.Retryable) as exc:
        return name, quantity, type(exc).__name__
    return name, quantity, [str(key["sk"]) for key in claimed.keys]


def test_tasks_on_one_loop_and_loops_in_threads_never_hold_a_unit_twice(
    ddb, dynamodb_local, unique
):
    # Given 48 units over eight pools, 24 tasks on one loop and 3 loops in threads of 8 tasks,
    # each reserving 1 to 3 units (about 96 asked for)
    units = claims.UnitTable(f"aio-units-{unique}", "claimable", ("sku", "sk"))
    create_units(ddb, units, POOLS, EACH)
    answers: list[Any] = []
    lock = threading.Lock()

    async def loop_of(prefix: str, tasks: int) -> None:
        async with dynamodb(dynamodb_local.endpoint) as client:
            got = await asyncio.gather(
                *(reserve(client, units, f"{prefix}-{n}", 1 + n % 3) for n in range(tasks))
            )
        with lock:
            answers.extend(got)

    threads = [
        threading.Thread(target=asyncio.run, args=(loop_of(f"thread{t}", 8),)) for t in range(3)
    ]
    # When they all run at once
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    asyncio.run(loop_of("loop", 24))
    for thread in threads:
        thread.join(timeout=300)
    print(f"48 reservations on 4 loops: {time.perf_counter() - started:.3f} s")
    # Then every reservation answered, and the held ones hold disjoint units, as many as asked
    assert not any(thread.is_alive() for thread in threads) and len(answers) == 48
    held = {name: keys for name, quantity, keys in answers if isinstance(keys, list)}
    assert all(len(keys) == q for _, q, keys in answers if isinstance(keys, list))
    taken = [key for keys in held.values() for key in keys]
    assert len(taken) == len(set(taken))
    # and the table agrees exactly: those units held by those names, every other unit free
    items = [codec.decode_item(raw) or {} for raw in ddb.scan(TableName=units.table)["Items"]]
    assert len(items) == 48
    holders = {str(i["sk"]): i.get("holder") for i in items if i["status"] == claims.HELD}
    assert holders == {key: name for name, keys in held.items() for key in keys}
    free = [i for i in items if i["status"] == claims.FREE]
    assert len(free) + len(taken) == 48
    # and a refusal came only when what was left could not cover it (checked at the end)
    refused = [q for _, q, keys in answers if keys == "NotEnough"]
    print(f"held {len(held)} ({len(taken)} units), refused {len(refused)}, left {len(free)}")
    assert len(held) > 0 and all(q > len(free) for q in refused)
