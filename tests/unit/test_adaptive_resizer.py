"""turnstile_ddb.adaptive.Resizer on moto (API shape only, one thread): a due resize is made under
the lease, counted and logged with its reason; a count another resizer changed meanwhile is
skipped; a resize that gives up is counted and answered ``None``; the lease is given back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sim.ddb import Awaited, create_table, moto_dynamodb
from tests.unit.test_adaptive import COUNTER, Clock, throttled_window
from turnstile_ddb import adaptive, aio, codec, lease, metrics, retry, sharded

NOWAIT = retry.Backoff(attempts=3, sleep=lambda seconds: None)
RESOURCE = "resize/stock/hot/count"


@pytest.fixture
def client() -> Iterator[Any]:
    with moto_dynamodb() as moto:
        create_table(moto, "leases", "resource")
        create_table(moto, "stock", "pk")
        for item in sharded.shard_items(COUNTER, 100):
            moto.put_item(TableName="stock", Item=codec.encode_item(item))
        yield moto


def counted() -> dict[str, float]:
    return {name: metrics.tally.get("adaptive", name) for name in adaptive.METRICS}


def more(before: dict[str, float]) -> dict[str, float]:
    return {
        name: value - before[name] for name, value in counted().items() if value != before[name]
    }


def asked(
    resizer: adaptive.Resizer, caplog: pytest.LogCaptureFixture, level: int = logging.INFO
) -> tuple[sharded.Resized | None, dict[str, float]]:
    """``maybe_resize`` once, its log captured: its answer and the metrics it counted."""
    before = counted()
    with caplog.at_level(level, logger="turnstile_ddb.adaptive"):
        answer = resizer.maybe_resize(COUNTER)
    return answer, more(before)


def total(client: Any, shards: int) -> int:
    return sum(sharded.read_all(client, replace(COUNTER, shards=shards)))


def test_a_due_resize_is_made_under_the_lease_counted_and_logged_with_its_reason(client, caplog):
    clock = Clock()
    leases = lease.Leases(client, "leases", backoff=NOWAIT)
    resizer = adaptive.Resizer(client, leases, load=throttled_window(clock), owner="me")
    # Given throttles on a one-shard counter, When the resizer is asked, Then it grows it
    grown, metrics_counted = asked(resizer, caplog)
    assert grown is not None
    assert (grown.before, grown.after) == (1, 2)
    assert metrics_counted == {"ResizeUp": 1}
    assert "from 1 to 2 shards" in caplog.text and "throttles/s" in caplog.text
    assert total(client, 2) == 100
    # and the lease was given back: another owner takes it at once
    leases.release(leases.acquire(RESOURCE, "next", 1_000))
    # When nothing is taken for shrink_after, Then it goes back to one shard
    clock.now += resizer.policy.shrink_after + 1
    shrunk, metrics_counted = asked(resizer, caplog)
    assert shrunk is not None
    assert (shrunk.before, shrunk.after) == (2, 1)
    assert metrics_counted == {"ResizeDown": 1}
    assert "no unit taken" in caplog.text
    assert total(client, 1) == 100


def test_a_count_another_resizer_changed_meanwhile_is_skipped(client, caplog):
    sharded.resize(client, COUNTER, 4)  # someone else grew it; this resizer still believes 1
    clock = Clock()
    resizer = adaptive.Resizer(
        client, lease.Leases(client, "leases", backoff=NOWAIT), load=throttled_window(clock)
    )
    assert asked(resizer, caplog) == (None, {"ResizeSkipped": 1})
    assert "it has 4 shard(s), not 1" in caplog.text
    assert total(client, 4) == 100
    # it learned the count: after the cooldown its next decision starts from 4
    clock.now += resizer.policy.cooldown
    for _ in range(10):
        clock.now += 0.1
        resizer.load.saw(COUNTER, "throttled", 5)
    decision = resizer.decide(COUNTER)
    assert decision is not None
    assert decision.current == 4


class Cancelling:
    """A client whose every transaction is cancelled (a concurrent write each time)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **params: Any) -> Any:
        raise ClientError(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": [
                    {"Code": "ConditionalCheckFailed"} for _ in params["TransactItems"]
                ],
            },
            "TransactWriteItems",
        )


def test_a_resize_that_loses_every_race_is_counted_and_answered_none(client, caplog):
    clock = Clock()
    leases = lease.Leases(client, "leases", backoff=NOWAIT)
    cancelling: Any = Cancelling(client)
    resizer = adaptive.Resizer(cancelling, leases, load=throttled_window(clock))
    assert asked(resizer, caplog, logging.WARNING) == (None, {"ResizeFailed": 1})
    assert "gave up" in caplog.text
    assert total(client, 1) == 100
    leases.release(leases.acquire(RESOURCE, "next", 1_000))  # given back


def test_a_sharded_capacity_is_resized_as_a_capacity_its_places_kept(client, caplog):
    # Given a sharded capacity of one shard (12 places) whose joins were throttled
    places = sharded.ShardedCounter("stock", "pk", "event", 1, "count")
    for row in sharded.shard_items(places, 0, limit=12, version=1):
        client.put_item(TableName="stock", Item=codec.encode_item(row))
    clock = Clock()
    window = adaptive.LoadWindow(clock=clock)
    for _ in range(10):
        clock.now += 0.1
        window.saw(places, "throttled", 5)
    resizer = adaptive.Resizer(client, lease.Leases(client, "leases", backoff=NOWAIT), load=window)
    # When the resizer is asked for it as a capacity
    with caplog.at_level(logging.INFO, logger="turnstile_ddb.adaptive"):
        grown = resizer.maybe_resize(places, capacity=True)
    # Then its places are spread over the new shards, none lost
    assert grown is not None
    assert (grown.before, grown.after) == (1, 2)
    rows = sharded.read_items(client, places.with_shards(2))
    assert sum(int(row["limit"]) for row in rows) == 12
    assert sum(int(row["count"]) for row in rows) == 0


def test_the_async_resizer_makes_the_same_resize(client):
    leases = aio.lease.Leases(Awaited(client), "leases", backoff=NOWAIT)
    resizer = aio.adaptive.Resizer(Awaited(client), leases, load=throttled_window(Clock()))
    grown = asyncio.run(resizer.maybe_resize(COUNTER))
    assert grown is not None
    assert (grown.before, grown.after) == (1, 2)
    assert total(client, 2) == 100


class Throttling:
    """A client whose every ``operation`` on ``table`` is throttled (the rest go through)."""

    def __init__(self, client: Any, operation: str, table: str) -> None:
        self._client = client
        self._operation = operation
        self._table = table

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._client, name)
        if name != self._operation:
            return call

        def throttled(**params: Any) -> Any:
            if params["TableName"] != self._table:
                return call(**params)
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                name,
            )

        return throttled


@pytest.mark.parametrize(("operation", "table"), [("update_item", "leases"), ("get_item", "stock")])
def test_a_call_that_stays_throttled_fails_the_resize_not_the_caller(
    client, caplog, operation, table
):
    # Given the lease's write, or the read of shard 0, throttled through the whole backoff
    throttled: Any = Throttling(client, operation, table)
    leases = lease.Leases(throttled, "leases", backoff=NOWAIT)
    resizer = adaptive.Resizer(throttled, leases, load=throttled_window(Clock()))
    # When a resize is due, Then it is counted as failed and answered None; nothing changed
    assert asked(resizer, caplog, logging.WARNING) == (None, {"ResizeFailed": 1})
    assert "gave up" in caplog.text
    assert total(client, 1) == 100
    lease.Leases(client, "leases").acquire(RESOURCE, "next", 1_000)  # free (or never taken)
