"""Configuration objects refuse misuse when they are built (issue 39, on moto, one thread).

Two names of one layout that are one stored attribute make an item lose one of them (the item
is a dict keyed by stored name), so every name set refuses duplicates and empty names at
construction; an options object that can never succeed (no rounds, a negative count) is a
``ValueError`` saying which field and what it may be, never a retryable error forever or a
refusal that no read decided."""

from __future__ import annotations

import random
from typing import Any

import pytest

from turnstile_ddb import capacity, claims, codec, lease, retry, sharded
from turnstile_ddb.idempotency import IdempotencyStore, InProgress, RecordNames

NOW_MS = 2_000_000_000_000
FAST = retry.Backoff(attempts=2, sleep=lambda _: None)


# -- Defect 1: an idempotency store whose names collide runs one request twice -------------------


@pytest.mark.parametrize(
    ("names", "key_attr"),
    [(RecordNames(locked_until="expiresAt"), "id"), (RecordNames(token="id"), "id")],
    ids=["locked_until-is-the-expiry", "token-is-the-key"],
)
def test_a_store_whose_names_collide_never_runs_one_request_twice(
    moto_ddb, moto_tables, names, key_attr
):
    # Given a store whose layout names one stored attribute twice
    now = [1000.0]

    def build() -> IdempotencyStore:
        return IdempotencyStore(
            client=moto_ddb,
            table=moto_tables["idempotency"],
            clock=lambda: now[0],
            key_attr=key_attr,
            names=names,
        )

    # When it is built, it refuses, naming both fields and the name
    with pytest.raises(ValueError) as refused:
        store = build()
        # (before the fix: two begin() of one request both run it)
        first = store.begin("k-twice", "fp-a")
        second = store.begin("k-twice", "fp-a")
        assert not (isinstance(first, InProgress) and isinstance(second, InProgress)), (
            "both begin() calls answered InProgress: the request runs twice"
        )
    message = str(refused.value)
    assert "'id'" in message or "'expiresAt'" in message


@pytest.mark.parametrize(
    "build",
    [
        lambda: RecordNames(status=""),
        lambda: RecordNames(status="token"),
        lambda: RecordNames(answer="statusCode"),
        lambda: claims.UnitTable(table="t", index="i", key_attrs=("sku", "sk"), holder_attr="sk"),
        lambda: claims.UnitTable(table="t", index="i", key_attrs=("sku",), seq_attr="status"),
        lambda: claims.UnitTable(table="t", index="i", key_attrs=("sku", "sku")),
        lambda: claims.UnitTable(table="t", index="i", key_attrs=("sku", "")),
        lambda: sharded.ShardedCounter("t", "pk", "p1", 2, "pk"),
        lambda: sharded.ShardedCounter("t", "pk", "p1", 2, "stock", limit_attr="stock"),
        lambda: sharded.ShardedCounter("t", "pk", "p1", 2, "stock", extra_key=(("stock", 1),)),
        lambda: sharded.ShardedCounter("t", "pk", "p1", 2, ""),
        lambda: capacity.CapacityRow("t", {"pk": "c"}, count_attr="limit"),
        lambda: capacity.CapacityRow("t", {"pk": "c"}, version_attr="pk"),
        lambda: lease.LeaseAttributes(head="tickets"),
    ],
    ids=[
        "record-empty",
        "record-status-is-token",
        "record-answer-is-legacy",
        "units-holder-is-a-key",
        "units-seq-is-status",
        "units-key-twice",
        "units-key-empty",
        "counter-count-is-key",
        "counter-limit-is-count",
        "counter-extra-key-is-count",
        "counter-count-empty",
        "capacity-count-is-limit",
        "capacity-version-is-key",
        "lease-head-is-tickets",
    ],
)
def test_every_name_set_refuses_duplicate_and_empty_names(build):
    with pytest.raises(ValueError, match=r"(same stored attribute|empty)"):
        build()


def test_leases_refuse_a_key_attribute_that_is_also_a_lease_attribute(moto_ddb):
    with pytest.raises(
        ValueError, match=r"key_attr and attributes\.owner are the same stored attribute 'owner'"
    ):
        lease.Leases(moto_ddb, "leases", key_attr="owner")


def test_a_store_refuses_an_expiry_that_is_a_record_name(moto_ddb):
    with pytest.raises(ValueError, match="expiry_attr"):
        IdempotencyStore(client=moto_ddb, table="t", expiry_attr="status")


def test_the_default_layouts_are_accepted(moto_ddb):
    IdempotencyStore(client=moto_ddb, table="t")
    claims.UnitTable(table="t", index="i", key_attrs=("sku", "sk"))
    sharded.ShardedCounter("t", "productId", "p1", 4, "stock")
    capacity.CapacityRow("t", {"eventId": "e", "sk": "COUNTER"})
    lease.Leases(moto_ddb, "leases")


# -- Defect 3: TakeOptions that make a guess into "sold out" --------------------------------------


def stocked(client: Any, table: str, counts: list[int]) -> sharded.ShardedCounter:
    counter = sharded.ShardedCounter(table, "productId", "p-rounds", len(counts), "stock")
    for shard, count in enumerate(counts):
        client.put_item(
            TableName=table, Item=codec.encode_item({**counter.key(shard), "stock": count})
        )
    return counter


@pytest.mark.parametrize("rounds", [0, -1])
def test_take_options_without_a_round_are_refused_not_answered_sold_out(
    moto_ddb, moto_tables, rounds
):
    # Given a counter whose stock is all in one shard of two (a write to the other finds none)
    counter = stocked(moto_ddb, moto_tables["products"], [0, 10])
    # When options with no round to read are built (before the fix: a take that met the empty
    # shard first answered sold out, read nothing; rounds=-1 refused without a call)
    with pytest.raises(ValueError, match="rounds") as refused:
        for seed in range(8):  # some seed starts at the empty shard
            options = sharded.TakeOptions(rounds=rounds, backoff=FAST, rand=random.Random(seed))
            sharded.take(moto_ddb, counter, 1, options)
    assert ">= 1" in str(refused.value) or "at least 1" in str(refused.value)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: sharded.TakeOptions(rounds=0), "rounds"),
        (lambda: claims.ReserveOptions(rounds=0), "rounds"),
        (lambda: claims.ReserveOptions(rounds=-3), "rounds"),
        (lambda: claims.ReserveOptions(page_size=0), "page_size"),
        (lambda: claims.ReserveOptions(pages_per_pool=0), "pages_per_pool"),
        (lambda: retry.Backoff(attempts=0), "attempts"),
        (lambda: retry.Backoff(base=-1.0), "base"),
        (lambda: retry.Backoff(budget=-1.0), "budget"),
        (lambda: sharded.ShardHints(trust_seconds=-1.0), "trust_seconds"),
        (lambda: sharded.SoldOutHints(max_counters=0), "max_counters"),
    ],
)
def test_every_options_object_says_which_field_is_out_of_range(build, field):
    with pytest.raises(ValueError, match=field):
        build()


# -- Defect 4: ReserveOptions that can never succeed answer a retryable error forever -------------


def free_units(client: Any, table: str, sku: str, count: int) -> claims.UnitTable:
    units = claims.UnitTable(table=table, index="claimable", key_attrs=("sku", "sk"))
    for n in range(count):
        item = claims.new_unit(units, {"sku": sku, "sk": f"u#{n:03d}"}, sku, 1000 + n)
        client.put_item(TableName=table, Item=codec.encode_item(item))
    return units


def test_reserve_options_without_a_round_are_refused(moto_ddb, moto_tables):
    # Given 40 free units
    units = free_units(moto_ddb, moto_tables["inventory"], "s-rounds", 40)
    # When options with no round are built (before the fix: RetriesExhausted with 40 free)
    with pytest.raises(ValueError, match="rounds"):
        claims.reserve(
            moto_ddb,
            units,
            pools=["s-rounds"],
            quantity=1,
            holder=lambda lead: "r",
            now_ms=NOW_MS,
            until_ms=NOW_MS + 60_000,
            options=claims.ReserveOptions(rounds=0, backoff=FAST),
        )


def test_a_page_smaller_than_the_quantity_still_reserves(moto_ddb, moto_tables):
    # Given 40 free units in one pool
    units = free_units(moto_ddb, moto_tables["inventory"], "s-pages", 40)
    # When 5 are reserved reading pages of one unit
    claimed = claims.reserve(
        moto_ddb,
        units,
        pools=["s-pages"],
        quantity=5,
        holder=lambda lead: "r",
        now_ms=NOW_MS,
        until_ms=NOW_MS + 60_000,
        options=claims.ReserveOptions(page_size=1, backoff=FAST),
    )
    # Then it holds 5 (before the fix: Unsettled on every try)
    assert len(claimed.keys) == 5


def test_slots_refuse_a_holder_attribute_that_is_a_key_attribute(moto_ddb):
    from turnstile_ddb import slots

    with pytest.raises(ValueError, match="same stored attribute 'roomId'"):
        slots.book(moto_ddb, "rooms", {"roomId": "r1"}, "me", backoff=FAST, holder_attr="roomId")
