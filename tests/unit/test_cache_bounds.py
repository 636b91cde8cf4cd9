"""Every per-process cache keyed by something clients choose stays bounded however many distinct
keys a long-lived process sees (docs/soak.md, "Process-wide state and its bounds"): the LRU they
share, the inventory's sku headers, products' and events' shard counts, the fake payment
provider's record and keys, the local authorizer's verified tokens, the local capacity model's
buckets and throttle counts, and the stream pump's shards and dead letters. Each test inserts more
distinct keys than the bound, and checks that the most recent survive and that a forgotten entry
is rebuilt, not wrong."""

from __future__ import annotations

from typing import Any

import pytest

from local.bridge import CachedVerifier
from local.capacity_model import CapacityModel
from local.pump import StreamPump
from service.domain.events import Events
from service.domain.inventory import READY, Inventory
from service.domain.payments import FakeProvider
from service.domain.products import Products
from service.lru import LRU

MANY = 5_000


def test_an_lru_keeps_the_most_recently_used_entries_only() -> None:
    cache: LRU[int, int] = LRU(100)
    for key in range(MANY):
        cache.put(key, key)
        cache.get(0)  # read all along: the most recent every time
    assert len(cache) == 100
    assert 0 in cache and MANY - 1 in cache
    assert 1 not in cache and MANY - 100 not in cache
    assert cache.pop(0) == 0 and cache.get(0) is None


def test_an_lru_must_hold_something() -> None:
    with pytest.raises(ValueError):
        LRU(0)


class _Headers:
    """A DynamoDB client that answers every header read with a READY header, counting reads."""

    def __init__(self) -> None:
        self.reads = 0

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.reads += 1
        sku = kwargs["Key"]["sku"]["S"]
        return {
            "Item": {
                "sku": {"S": sku},
                "sk": {"S": "sku"},
                "units": {"N": "10"},
                "pools": {"N": "1"},
                "status": {"S": READY},
            }
        }


def test_the_inventory_keeps_the_headers_of_its_most_recent_skus_only() -> None:
    client = _Headers()
    stock = Inventory(client=client, table="inventory", summary_table="s", header_cache_skus=64)
    for i in range(MANY):
        assert stock.header(f"sku-{i}")["units"] == 10
    assert len(stock._headers) == 64
    reads = client.reads
    stock.header(f"sku-{MANY - 1}")  # recent: from the cache
    assert client.reads == reads
    stock.header("sku-0")  # long forgotten: read again
    assert client.reads == reads + 1


class _Verifier:
    def __init__(self) -> None:
        self.calls = 0

    def verify(self, authorization: str | None) -> dict[str, str]:
        self.calls += 1
        return {"sub": str(authorization), "exp": "Fri Jan 01 00:00:00 UTC 2100"}


def test_the_local_authorizer_keeps_its_most_recent_tokens_only() -> None:
    verifier = _Verifier()
    cached = CachedVerifier(verifier, max_entries=50, clock=lambda: 0.0)
    for i in range(MANY):
        cached.verify(f"token-{i}")
        cached.verify("token-hot")
    assert len(cached._answers) == 50
    assert verifier.calls == MANY + 1  # the hot token verified once, then always from the cache


def test_the_capacity_model_keeps_the_buckets_of_its_most_recent_keys_only() -> None:
    model = CapacityModel(1.0, clock=lambda: 0.0, max_keys=100)
    hot = ("t", "", '"hot"', "W")
    for i in range(MANY):
        assert model.admit([(("t", "", f'"k{i}"', "W"), 1.0), (hot, 0.1)]) == [True, True]
    assert len(model._buckets) == 100
    # the hot key's bucket was kept all along: every charge taken from the same, never refilled
    kept = model._buckets.get(hot)
    assert kept is not None and kept.tokens == pytest.approx(1000.0 - 0.1 * MANY)


def test_an_lru_can_be_looked_at_without_changing_its_order() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.peek("a") == 1 and list(cache) == ["a", "b"]  # a looked at, still the oldest
    cache.put("c", 3)
    assert cache.items() == [("b", 2), ("c", 3)]


def test_the_capacity_model_counts_the_throttles_of_its_most_recently_throttled_keys_only() -> None:
    model = CapacityModel(0.001, clock=lambda: 0.0, max_throttled_keys=50)  # 1 WCU a key
    hot = ("t", "", '"hot"', "W")
    assert model.admit([(hot, 1.0)]) == [True]  # the hot key's bucket emptied; the clock stands
    for i in range(MANY):
        key = ("t", "", f'"k{i}"', "W")
        # each key's second write does not fit: a throttle of its own, and the hot key's
        assert model.admit([(key, 1.0)]) == [True] and model.admit([(key, 1.0)]) == [False]
        assert model.admit([(hot, 1.0)]) == [False]
    assert len(model.stats.throttled_by_key) == 50
    assert model.stats.throttled_by_key.get('t/-/"hot"/W') == MANY  # counted all along
    assert model.stats.throttled_by_key.get(f't/-/"k{MANY - 1}"/W') == 1
    assert 't/-/"k0"/W' not in model.stats.throttled_by_key
    assert model.stats.throttled == 2 * MANY  # the total never forgets


# --- the stream pump's shards -----------------------------------------------------------------


class _Stream:
    """A DynamoDB stream of one shard after another (each the parent of the next, as a shard
    that closes hands over to its child), ``per_shard`` records each; the last one stays open.
    ``listed``: the shards ``describe_stream`` still lists (the rest trimmed). ``closed``: the last
    shard closed too (the stream was turned off)."""

    def __init__(self, shards: int, per_shard: int = 2, closed: bool = False) -> None:
        self.closed = closed
        self.ids = [f"shard-{n:05d}" for n in range(shards)]
        self.records = {
            shard: [f"{n:05d}{r:03d}" for r in range(per_shard)] for n, shard in enumerate(self.ids)
        }
        self.listed = list(self.ids)
        self.meta = type("Meta", (), {"region_name": "local"})()

    def describe_table(self, TableName: str) -> dict[str, Any]:
        return {"Table": {"LatestStreamArn": "arn:stream"}}

    def describe_stream(self, StreamArn: str, ExclusiveStartShardId: str = "") -> dict[str, Any]:
        after = self.listed.index(ExclusiveStartShardId) + 1 if ExclusiveStartShardId else 0
        page = self.listed[after : after + 100]
        description: dict[str, Any] = {
            "Shards": [
                {"ShardId": s, **({"ParentShardId": self._parent(s)} if self._parent(s) else {})}
                for s in page
            ]
        }
        if after + 100 < len(self.listed):
            description["LastEvaluatedShardId"] = page[-1]
        return {"StreamDescription": description}

    def _parent(self, shard: str) -> str | None:
        n = self.ids.index(shard)
        return self.ids[n - 1] if n else None

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        shard, kind = kwargs["ShardId"], kwargs["ShardIteratorType"]
        sequences = self.records[shard]
        at = {
            "TRIM_HORIZON": 0,
            "LATEST": len(sequences),
            "AT_SEQUENCE_NUMBER": sequences.index(kwargs.get("SequenceNumber", "")) + 0
            if kind == "AT_SEQUENCE_NUMBER"
            else 0,
            "AFTER_SEQUENCE_NUMBER": sequences.index(kwargs.get("SequenceNumber", "")) + 1
            if kind == "AFTER_SEQUENCE_NUMBER"
            else 0,
        }[kind]
        return {"ShardIterator": f"{shard}@{at}"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        shard, at = ShardIterator.split("@")
        sequences = self.records[shard][int(at) : int(at) + Limit]
        end = int(at) + len(sequences)
        last = shard == self.ids[-1] and not self.closed
        following = None if end >= len(self.records[shard]) and not last else f"{shard}@{end}"
        return {
            "Records": [
                {
                    "eventID": s,
                    "eventName": "INSERT",
                    "dynamodb": {"SequenceNumber": s, "Keys": {"pk": {"S": s}}},
                }
                for s in sequences
            ],
            "NextShardIterator": following,
        }


def _pump(stream: _Stream, max_shards: int) -> tuple[StreamPump, list[str]]:
    delivered: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        delivered.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])

    pump = StreamPump(
        dynamodb=stream, streams=stream, table="t", handler=handler, max_shards=max_shards
    )
    return pump, delivered


@pytest.mark.parametrize("max_shards", [1, 2, 16])
def test_the_stream_pump_keeps_at_most_max_shards_and_reads_every_record_once(
    max_shards: int,
) -> None:
    stream = _Stream(200)
    pump, delivered = _pump(stream, max_shards=max_shards)
    sizes = []
    for _ in range(len(stream.ids) + 5):  # at least a shard a poll
        pump.poll_once()
        sizes.append(len(pump.shards))
    assert max(sizes) == max_shards
    # every record once, in order, though the stream still lists all 200 shards: the state of a
    # finished one is dropped, and its child having started says it was read to its end
    assert delivered == [s for shard in stream.ids for s in stream.records[shard]]
    assert list(pump.shards) == [stream.ids[-1]]  # the open shard: the only state left
    pump.drain(idle_polls=3)
    assert len(delivered) == 400


def test_the_stream_pump_keeps_a_finished_shard_until_its_child_starts() -> None:
    stream = _Stream(3, per_shard=150)  # a shard takes two polls (100 records a read)
    pump, delivered = _pump(stream, max_shards=10)
    pump.poll_once()
    assert list(pump.shards) == stream.ids and len(delivered) == 100
    pump.poll_once()  # the first shard read to its end, then its child started
    first = pump.shards.peek(stream.ids[0])
    assert first is not None and first.done and len(delivered) == 250
    pump.poll_once()  # its child started: the parent's state is gone, and stays gone
    pump.poll_once()
    assert stream.ids[0] not in pump.shards and len(delivered) == 450


def test_the_stream_pump_forgets_finished_shards_the_stream_no_longer_lists() -> None:
    stream = _Stream(50, closed=True)
    pump, delivered = _pump(stream, max_shards=10_000)
    pump.drain(idle_polls=3)
    assert list(pump.shards) == [stream.ids[-1]]  # finished, with no child to say so: kept
    stream.listed = []  # a day later the stream trimmed them all, oldest first
    pump.drain(idle_polls=3)
    assert len(pump.shards) == 0
    assert delivered == [s for shard in stream.ids for s in stream.records[shard]]


def test_the_stream_pump_keeps_its_most_recent_dead_letters_only() -> None:
    stream = _Stream(1, per_shard=30)

    def failing(event: dict[str, Any], context: Any) -> dict[str, Any]:
        first = event["Records"][0]["dynamodb"]["SequenceNumber"]
        return {"batchItemFailures": [{"itemIdentifier": first}]}

    pump = StreamPump(
        dynamodb=stream,
        streams=stream,
        table="t",
        handler=failing,
        retry_attempts=0,
        max_dead_letters=5,
    )
    for _ in range(40):
        pump.poll_once()
        assert len(pump.dead_letters) <= 5
        assert all(len(shard.attempts) <= 1 for _, shard in pump.shards.items())
    assert [r["dynamodb"]["SequenceNumber"] for r in pump.dead_letters] == stream.records[
        stream.ids[0]
    ][-5:]


# --- the shard counts products and events learn -----------------------------------------------


def test_products_keep_the_shard_counts_of_their_most_recent_products_only(
    moto_tables: Any, moto_ddb: Any
) -> None:
    shop = Products(client=moto_ddb, table=moto_tables["products"], shard_counts=LRU(4))
    for i in range(10):
        shop.create(f"p{i}", "thing", stock=10, shards=2)
    assert len(shop.shard_counts) == 4 and "p0" not in shop.shard_counts
    # forgotten: the purchase goes to the unsharded item first, learns it is sharded, and sells
    shop.purchase("p0", 3)
    assert shop.shard_counts.get("p0") == 2
    assert shop.get("p0")["stock"] == 7
    assert len(shop.shard_counts) == 4


def test_events_keep_the_shard_counts_of_their_most_recent_events_only(
    moto_tables: Any, moto_ddb: Any
) -> None:
    events = Events(client=moto_ddb, table=moto_tables["events"], shard_counts=LRU(4))
    for i in range(10):
        events.create(f"e{i}", "talk", 10, shards=2)
    assert len(events.shard_counts) == 4 and "e0" not in events.shard_counts
    events.register("e0", "alice")  # forgotten: learnt again from the event's counter
    learnt = events.shard_counts.get("e0")
    assert learnt is not None and learnt.shards == 2
    assert events.get("e0")["registered"] == 1
    assert len(events.shard_counts) == 4


def test_the_fake_payment_provider_keeps_its_most_recent_calls_and_keys_only() -> None:
    provider = FakeProvider(max_calls=20, max_keys=10)
    first = provider.charge("w", 5, "r0", idempotency_key="k0")
    charged = {}
    for i in range(1, MANY):
        charged[i] = provider.charge("w", 1, f"r{i}", idempotency_key=f"k{i}")
        assert provider.charge("w", 1, "again", idempotency_key="k0") == first  # hot key kept
    assert len(provider.calls()) == 20 and len(provider._by_key) == 10
    last = MANY - 1
    assert provider.charge("w", 1, "retry", idempotency_key=f"k{last}") == charged[last]
    assert provider.charge("w", 1, "retry", idempotency_key="k1") != charged[1]  # forgotten
    provider.refund(first)  # older than the record: refunded all the same
    assert provider.calls("refund")[-1].charge_id == first
