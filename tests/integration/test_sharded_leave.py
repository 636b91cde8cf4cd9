"""A sharded capacity's leave when the member's own shard stays throttled, against DynamoDB
Local: the place comes back at another shard that counts a member, once, and the counts still
add up to the members present. DynamoDB Local never throttles, so a botocore hook answers every
transaction that writes the busy shard as DynamoDB does when a key is over its limit (a
cancellation whose reason for that item is ``ThrottlingError``), without sending it."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders

from turnstile_ddb import capacity, codec, errors, metrics, retry, sharded

BACKOFF = retry.Backoff(attempts=3, base=0.001, cap=0.005)
PLACES = 12


class BusyShard:
    """Answers every ``TransactWriteItems`` that updates ``key`` with a throttling cancellation,
    until :meth:`close` (the session's client outlives the test)."""

    def __init__(self, client: Any, key: dict[str, Any]) -> None:
        self.client = client
        self.key = codec.encode_item(key)
        self.refused = 0
        self.sent = 0
        client.meta.events.register("before-send.dynamodb", self._before_send)

    def close(self) -> None:
        self.client.meta.events.unregister("before-send.dynamodb", self._before_send)

    def _before_send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        if not (target.decode() if isinstance(target, bytes) else target).endswith(
            "TransactWriteItems"
        ):
            return None
        self.sent += 1
        body = request.body
        assert isinstance(body, (str, bytes)), body  # botocore sends a transaction's JSON whole
        items = json.loads(body)["TransactItems"]
        busy = [e.get("Update", {}).get("Key") == self.key for e in items]
        if not any(busy):
            return None
        self.refused += 1
        reasons = [{"Code": "ThrottlingError" if b else "None"} for b in busy]
        body = json.dumps(
            {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": "Transaction cancelled (injected: a key over its limit)",
                "CancellationReasons": reasons,
            }
        ).encode()
        headers = HTTPHeaders.from_dict({"Content-Type": "application/x-amz-json-1.0"})
        return AWSResponse(request.url, 400, headers, _Body(body))


class _Body:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


class Seen:
    """A load observer that records what each call saw."""

    def __init__(self) -> None:
        self.kinds: list[tuple[str, str]] = []

    def saw(self, counter: sharded.ShardedCounter, kind: str, units: int = 1) -> None:
        self.kinds.append((counter.base, kind))


def counts(ddb: Any, places: sharded.ShardedCounter) -> list[int]:
    return [
        int((codec.decode_item(ddb.get_item(TableName=places.table, Key=places.wire_key(k),
             ConsistentRead=True).get("Item")) or {}).get("count", 0))
        for k in range(places.shards)
    ]  # fmt: skip


@pytest.fixture
def busy(ddb: Any) -> Any:
    """Makes shards busy (:class:`BusyShard`) for one test."""
    made: list[BusyShard] = []

    def make(key: dict[str, Any]) -> BusyShard:
        made.append(BusyShard(ddb, key))
        return made[-1]

    yield make
    for each in made:
        each.close()


@pytest.fixture
def places(ddb: Any, pk_table: str) -> sharded.ShardedCounter:
    counter = sharded.ShardedCounter(pk_table, "pk", "event", 3, "count")
    for row in sharded.shard_items(counter, 0, limit=PLACES // 3, version=1):
        ddb.put_item(TableName=pk_table, Item=codec.encode_item(row))
    return counter


def joined(ddb: Any, places: sharded.ShardedCounter, people: int) -> dict[str, int]:
    options = sharded.TakeOptions(backoff=BACKOFF, rand=random.Random(7))
    return {
        f"member-{i}": sharded.join(
            ddb, places, capacity.Member(places.table, {"pk": f"member-{i}"}), options
        )
        for i in range(people)
    }


def test_a_leave_whose_shard_stays_throttled_gives_the_place_back_at_another(ddb, places, busy):
    # Given six members over three shards, and the first member's shard over its limit
    shards = joined(ddb, places, 6)
    before = counts(ddb, places)
    name, own = next(iter(shards.items()))
    refusing = busy(places.key(own))
    failovers = metrics.tally.get("sharded", "ShardFailover")
    # When that member leaves
    member = capacity.Member(places.table, {"pk": name})
    seen = Seen()
    hints = sharded.Hints(load=seen)
    options = sharded.TakeOptions(backoff=BACKOFF, hints=hints, rand=random.Random(1))
    where = sharded.leave(ddb, places, member, options)
    # Then the place came back at another shard that counted one, once, and the member is gone
    after = counts(ddb, places)
    assert where != own and before[where] > 0
    assert after[own] == before[own] and after[where] == before[where] - 1
    assert sum(after) == sum(before) - 1 == 5
    assert "Item" not in ddb.get_item(TableName=places.table, Key={"pk": {"S": name}})
    # And the own shard was tried twice first, the failover counted, the throttle
    # told to the load observer (a resize policy grows on it)
    assert refusing.refused == 2  # one retry at a busy shard, then another shard
    assert metrics.tally.get("sharded", "ShardFailover") > failovers
    assert ("event", "throttled") in seen.kinds and ("event", "left") in seen.kinds


def test_a_leave_with_every_shard_throttled_gives_up_and_writes_nothing(ddb, places, busy):
    # Given members on three shards, every shard over its limit
    shards = joined(ddb, places, 6)
    before = counts(ddb, places)
    refusing = [busy(places.key(k)) for k in range(places.shards)]
    name = next(iter(shards))
    member = capacity.Member(places.table, {"pk": name})
    # When a member leaves, it gives up as throttled, and nothing is written
    with pytest.raises(errors.RetriesExhausted):
        sharded.leave(ddb, places, member, sharded.TakeOptions(backoff=BACKOFF))
    assert counts(ddb, places) == before
    assert "Item" in ddb.get_item(TableName=places.table, Key={"pk": {"S": name}})
    assert sum(b.refused for b in refusing) == 2 * places.shards  # each shard, one retry


def test_a_leave_skips_shards_that_count_nobody(ddb, places, busy):
    # Given one member, on its shard alone, and that shard over its limit
    shards = joined(ddb, places, 1)
    ((name, own),) = shards.items()
    busy(places.key(own))
    member = capacity.Member(places.table, {"pk": name})
    # When it leaves, the other shards count nobody and refuse: the leave gives up as throttled
    with pytest.raises(errors.RetriesExhausted):
        sharded.leave(ddb, places, member, sharded.TakeOptions(backoff=BACKOFF))
    # And nothing moved: no shard went below zero
    assert sorted(counts(ddb, places)) == [0, 0, 1]
