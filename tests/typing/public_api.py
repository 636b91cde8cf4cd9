"""Typing tests: what a caller's type checker infers from the public API (``typing.assert_type``).

Nothing here runs: mypy checks this file (``files`` in pyproject.toml, and ``mypy --strict``
in ``make typecheck``), and a changed return type, a lost annotation or an ``Any`` leaking out of
a public function fails it. The functions take their arguments so that no call is ever made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, assert_type

import turnstile_ddb
from turnstile_ddb import (
    adaptive,
    aio,
    capacity,
    claims,
    codec,
    creation,
    errors,
    idempotency,
    lease,
    lease_queue,
    retry,
    sharded,
    slots,
    transact,
    versioned,
)
from turnstile_ddb.deprecation import TurnstileDeprecationWarning, deprecated

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def versioned_api(client: DynamoDBClient, backoff: retry.Backoff) -> None:
    key = {"id": "1"}
    assert_type(versioned.read(client, "t", key, backoff), dict[str, Any] | None)
    assert_type(
        versioned.update_if_version(
            client, table="t", key=key, expected=1, changes={"a": 1}, backoff=backoff
        ),
        dict[str, Any],
    )
    written = versioned.update_versioned(
        client, table="t", key=key, decide=lambda item: {"a": 1}, backoff=backoff, conflicts=backoff
    )
    assert_type(written, versioned.Written)
    assert_type(
        versioned.decrement(client, table="t", key=key, attr="n", amount=1, backoff=backoff),
        dict[str, Any],
    )
    assert_type(
        versioned.bump(client, table="t", key=key, changes={"a": 1}, backoff=backoff),
        dict[str, Any],
    )


async def async_api(client: Any, backoff: retry.Backoff) -> None:
    """turnstile_ddb.aio infers what the sync front doors do, awaited."""
    key = {"id": "1"}
    assert_type(await aio.versioned.read(client, "t", key, backoff), dict[str, Any] | None)
    written = await aio.versioned.update_versioned(
        client, table="t", key=key, decide=lambda item: {"a": 1}, backoff=backoff, conflicts=backoff
    )
    assert_type(written, versioned.Written)
    assert_type(
        await aio.versioned.decrement(
            client, table="t", key=key, attr="n", amount=1, backoff=backoff
        ),
        dict[str, Any],
    )
    assert_type(await aio.transact.transact_write(client, [], backoff=backoff), None)

    async def three() -> int:
        return 3

    assert_type(await aio.retry.call(three, backoff=backoff, idempotent=True), int)


def lease_api(client: DynamoDBClient, waits: retry.Backoff) -> None:
    leases = lease.Leases(client=client, table="leases")
    named = lease.Leases(
        client=client, table="locks", attributes=lease.LeaseAttributes(expires_at_ms="until")
    )
    assert_type(named.attributes.ttl_attribute, str)
    assert_type(leases.wire_key("r"), dict[str, Any])
    assert_type(leases.names("#expiresAt"), dict[str, str])
    held = leases.acquire("r", "me", 1000)
    assert_type(held, lease.Lease)
    assert_type(held.fence, int)
    assert_type(held.expires_at_ms, int)
    assert_type(leases.renew(held, 1000), lease.Lease)
    assert_type(leases.release(held), None)
    assert_type(leases.transact(held, []), None)
    with leases.hold("r", "me", 1000, wait_ms=100, waits=waits) as inside:
        assert_type(inside, lease.Lease)
    queue = lease_queue.LeaseQueue(leases, lease_queue.QueueSettings(heartbeat_ms=100))
    assert_type(queue.acquire("r", "me", wait_ms=100), lease.Lease)
    with queue.heartbeat(held) as beat:
        assert_type(beat, lease_queue.Heartbeat)
    with queue.hold("r", "me", wait_ms=100) as holding:
        assert_type(holding, lease_queue.Heartbeat)
        assert_type(holding.lease, lease.Lease)


def other_patterns(client: DynamoDBClient, backoff: retry.Backoff) -> None:
    created = creation.create_if_absent(
        client, table="t", item={"id": "1"}, key_attr="id", backoff=backoff, token="request-1"
    )
    assert_type(created, creation.Created)
    assert_type(created.resent, bool)
    assert_type(created.item, dict[str, Any])
    store = idempotency.IdempotencyStore(
        client=client, table="idem", names=idempotency.RecordNames(answer="result")
    )
    begun = store.begin("k", "f")
    assert_type(begun, idempotency.InProgress | idempotency.Replay)
    if isinstance(begun, idempotency.Replay):
        assert_type(begun.answer, Any)
    else:
        assert_type(store.complete(begun, {"any": "json"}), bool)
        assert_type(store.complete_op(begun, begun.answer_of([1])), dict[str, Any])
    assert_type(transact.transact_write(client, [], backoff=backoff), None)
    assert_type(transact.new_token(), str)
    row = capacity.CapacityRow(table="t", key={"id": "e"})
    member = capacity.Member(table="t", key={"id": "e", "u": "1"}, item={"id": "e", "u": "1"})
    assert_type(capacity.join(client, row, member, backoff=backoff), None)
    assert_type(slots.book(client, "t", {"id": "1"}, "me", backoff=backoff), dict[str, Any])
    assert_type(
        slots.book_any(client, "t", [{"id": "1"}], "me", backoff=backoff), dict[str, Any] | None
    )
    counter = sharded.ShardedCounter(
        table="t", key_attr="id", base="p", shards=4, count_attr="stock"
    )
    assert_type(sharded.read_all(client, counter, backoff), list[int])
    assert_type(sharded.read_all(client, counter), list[int])
    assert_type(counter.key(0), dict[str, Any])
    assert_type(counter.wire_key(0), dict[str, Any])
    assert_type(counter.capacity_row(0), capacity.CapacityRow)
    hints = sharded.Hints(shards=sharded.ShardHints(max_counters=64))
    assert_type(hints.shards.remembered(), int)
    assert_type(hints.sold_out.remembered(), int)
    options = sharded.TakeOptions(backoff=backoff, hints=hints)
    assert_type(options.rounds, int)
    taken = sharded.take(client, counter, 1, options)
    assert_type(taken, sharded.Taken)
    assert_type(sharded.take(client, counter, 1), sharded.Taken)
    assert_type(sharded.add(client, counter, 5, hints=hints), None)
    assert_type(sharded.set_total(client, counter, 5, hints=hints), list[int])
    assert_type(sharded.join(client, counter, member, options), int)
    assert_type(sharded.leave(client, counter, member, options), int)
    full = sharded.Full(2, 2)
    assert_type(full, sharded.Full)
    assert_type(full.limit - full.count, int)
    units = claims.UnitTable(table="u", index="i", key_attrs=("sku", "sk"))
    pool_hints_ = claims.PoolHints(max_pools=64)
    reserve_options = claims.ReserveOptions(
        backoff=backoff, hints=pool_hints_, unit_cache=claims.UnitCache()
    )
    got = claims.reserve(
        client, units, pools=["p"], quantity=1, holder=lambda k: "h", now_ms=0, until_ms=1,
        options=reserve_options,
    )  # fmt: skip
    assert_type(got, claims.Claimed)
    assert_type(got.keys, list[dict[str, Any]])
    assert_type(pool_hints_.remembered_pools(), int)
    assert_type(reserve_options.hints, claims.PoolHints | None)
    # the keywords before ReserveOptions still type-check (deprecated until 2.0.0)
    old = claims.reserve(
        client, units, pools=["p"], quantity=1, holder=lambda k: "h", now_ms=0, until_ms=1,
        backoff=backoff, rounds=2, pool_hints=pool_hints_,
    )  # fmt: skip
    assert_type(old, claims.Claimed)
    assert_type(claims.new_claimable_at(), int)
    assert_type(claims.new_unit(units, {"sku": "s"}, "p", 1), dict[str, Any])
    kept = claims.release(client, units, got.keys, holder="h", backoff=backoff)
    assert_type(kept, list[dict[str, Any]])
    sold = claims.confirm(client, units, got.keys, holder="h", now_ms=0, backoff=backoff)
    assert_type(sold, None)


def helpers(exc: BaseException) -> None:
    assert_type(retry.call(lambda: 3, backoff=retry.Backoff(), idempotent=True), int)
    assert_type(retry.error_code(exc), str)
    assert_type(retry.condition_failed(exc), bool)
    assert_type(codec.encode(1), dict[str, Any])
    assert_type(codec.old_item(exc), dict[str, Any] | None)
    assert_type(turnstile_ddb.__version__, str)


def error_tree(exc: errors.AwsRefused) -> None:
    assert_type(exc.cause, BaseException)
    assert_type(exc.code, str)
    assert_type(exc.aws_message, str)
    assert_type(exc.operation, str)
    refused: turnstile_ddb.Refused = exc
    retryable: turnstile_ddb.Retryable = errors.AwsRetryable(exc, "ThrottlingException")
    unknown: turnstile_ddb.OutcomeUnknown = errors.AwsOutcomeUnknown(exc, "ReadTimeoutError")
    held: turnstile_ddb.Retryable = lease.Held("r", "them", 0, 1)
    assert_type(
        (refused, retryable, unknown, held),
        tuple[errors.Refused, errors.Retryable, errors.OutcomeUnknown, errors.Retryable],
    )


def deprecation_keeps_the_signature() -> None:
    @deprecated(since="1.0.0", removed_in="2.0.0", use="new")
    def old(a: int) -> str:
        return str(a)

    assert_type(old(1), str)
    assert_type(TurnstileDeprecationWarning("x"), TurnstileDeprecationWarning)


async def async_places_api(client: Any, backoff: retry.Backoff) -> None:
    """turnstile_ddb.aio's capacity, slots and idempotency store, awaited."""
    row = capacity.CapacityRow(table="t", key={"id": "e"})
    member = capacity.Member(table="t", key={"id": "e", "u": "1"}, item={"id": "e", "u": "1"})
    assert_type(await aio.capacity.join(client, row, member, backoff=backoff), None)
    assert_type(await aio.capacity.leave(client, row, member, backoff=backoff), None)
    assert_type(await aio.slots.create(client, "t", [{"id": "1"}], backoff=backoff), int)
    assert_type(
        await aio.slots.book(client, "t", {"id": "1"}, "me", backoff=backoff), dict[str, Any]
    )
    assert_type(
        await aio.slots.book_any(client, "t", [{"id": "1"}], "me", backoff=backoff),
        dict[str, Any] | None,
    )
    assert_type(await aio.slots.release(client, "t", {"id": "1"}, "me", backoff=backoff), None)
    store = aio.idempotency.IdempotencyStore(client, "answers", key_attr="pk")
    begun = await store.begin("k", idempotency.fingerprint("POST", "/orders"))
    assert_type(begun, idempotency.InProgress | idempotency.Replay)
    if isinstance(begun, idempotency.InProgress):
        assert_type(await store.complete(begun, {"status": 201}), bool)
        assert_type(await store.release(begun), None)
        assert_type(store.complete_op(begun, {"status": 201}), dict[str, Any])


async def async_sharded_api(client: Any, backoff: retry.Backoff) -> None:
    """turnstile_ddb.aio.sharded infers what the sync functions do, awaited."""
    counter = sharded.ShardedCounter(table="t", key_attr="id", base="p", shards=4, count_attr="n")
    member = capacity.Member(table="t", key={"id": "m"})
    options = sharded.TakeOptions(backoff=backoff, hints=sharded.Hints())
    assert_type(await aio.sharded.take(client, counter, 1, options), sharded.Taken)
    assert_type(await aio.sharded.read_all(client, counter), list[int])
    assert_type(await aio.sharded.read_items(client, counter, backoff), list[dict[str, Any]])
    assert_type(await aio.sharded.add(client, counter, 5, backoff=backoff), None)
    assert_type(await aio.sharded.set_total(client, counter, 5, attempts=2), list[int])
    assert_type(await aio.sharded.join(client, counter, member, options), int)
    assert_type(await aio.sharded.leave(client, counter, member, options), int)


def adaptive_api(client: DynamoDBClient) -> None:
    """turnstile_ddb.adaptive: the window, the policy's decision and the resizer's answer."""
    counter = sharded.ShardedCounter(table="t", key_attr="id", base="p", shards=1, count_attr="n")
    window = adaptive.LoadWindow(window=30.0)
    window.saw(counter, "taken", 2)
    seen = window.observe(counter)
    assert_type(seen, adaptive.Observation)
    assert_type(seen.last_taken, float | None)
    policy = adaptive.ResizePolicy(one_key_limit=1000)
    decision = policy.decide(seen, 1, 0.0)
    assert_type(decision, adaptive.Decision | None)
    if decision is not None:
        assert_type(decision.target, int)
    resizer = adaptive.Resizer(client, lease.Leases(client, "leases"), policy, window)
    assert_type(resizer.maybe_resize(counter), sharded.Resized | None)
    assert_type(resizer.decide(counter), adaptive.Decision | None)
    assert_type(resizer.decide(counter, capacity=True), adaptive.Decision | None)
    assert_type(policy.for_capacities(), adaptive.ResizePolicy)


async def async_adaptive_api(client: Any) -> None:
    """turnstile_ddb.aio.adaptive.Resizer answers what the sync one does, awaited."""
    counter = sharded.ShardedCounter(table="t", key_attr="id", base="p", shards=1, count_attr="n")
    resizer = aio.adaptive.Resizer(client, aio.lease.Leases(client, "leases"))
    assert_type(await resizer.maybe_resize(counter, capacity=True), sharded.Resized | None)


async def async_claims_api(client: Any, backoff: retry.Backoff) -> None:
    """turnstile_ddb.aio.claims infers what the sync reservation does, awaited."""
    units = claims.UnitTable(table="u", index="i", key_attrs=("sku", "sk"))
    got = await aio.claims.reserve(
        client,
        units,
        pools=["p"],
        quantity=2,
        holder=lambda lead: "r",
        now_ms=1,
        until_ms=2,
        options=claims.ReserveOptions(backoff=backoff),
    )
    assert_type(got, claims.Claimed)
    released = await aio.claims.release(client, units, got.keys, holder="r", backoff=backoff)
    assert_type(released, list[dict[str, Any]])
    assert_type(
        await aio.claims.confirm(client, units, got.keys, holder="r", now_ms=1, backoff=backoff),
        None,
    )
    lead = await aio.claims.holders_units(client, units, got.keys[0], backoff=backoff)
    assert_type(lead, dict[str, Any] | None)


async def async_lease_api(client: Any, waits: retry.Backoff) -> None:
    """turnstile_ddb.aio.lease infers what the sync Leases do, awaited; hold is async with."""
    leases = aio.lease.Leases(client=client, table="leases")
    held = await leases.acquire("r", "me", 1000)
    assert_type(held, lease.Lease)
    assert_type(await leases.acquire_wait("r", "me", 1000, wait_ms=50, waits=waits), lease.Lease)
    assert_type(await leases.renew(held, 1000), lease.Lease)
    assert_type(await leases.transact(held, []), None)
    assert_type(await leases.release(held), None)
    assert_type(leases.guard(held), dict[str, Any])
    async with leases.hold("r", "me", 1000, wait_ms=50, waits=waits) as holding:
        assert_type(holding.fence, int)
    updated = await aio.lease.fenced_update(
        client, table="t", key={"id": "1"}, fence=held.fence, changes={"a": 1}, backoff=waits
    )
    assert_type(updated, dict[str, Any])


async def async_lease_queue_api(client: Any) -> None:
    """turnstile_ddb.aio.lease_queue infers what the sync LeaseQueue does, awaited; its hold and
    heartbeat are async with."""
    leases = aio.lease.Leases(client=client, table="leases")
    queue = aio.lease_queue.LeaseQueue(leases, lease_queue.QueueSettings(heartbeat_ms=100))
    held = await queue.acquire("r", "me", wait_ms=100)
    assert_type(held, lease.Lease)
    assert_type(queue.deadline(100), float)
    async with queue.heartbeat(held) as beat:
        assert_type(beat, aio.lease_queue.Heartbeat)
    async with queue.hold("r", "me", wait_ms=100) as holding:
        assert_type(holding.lease, lease.Lease)
        assert_type(holding.lost.is_set(), bool)
