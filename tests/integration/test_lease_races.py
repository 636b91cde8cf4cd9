"""Leases against DynamoDB Local with real threads: the invariants come from the recorded history
and from the database's own records, never from timing."""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from typing import Any

import pytest

from bench.leases import QUEUE, RETRY, lease_workload
from bench.leases import rows as bench_rows
from tests.helpers import Clock, item
from turnstile_ddb import codec, lease, retry
from turnstile_ddb.lease_queue import QueueSettings


def test_hundred_threads_racing_for_one_resource_exactly_one_wins(ddb, tables, unique):
    # Given 100 threads, each with its own owner name, released at once by a barrier
    leases = lease.Leases(client=ddb, table=tables["leases"])
    resource = f"race-{unique}"
    start = threading.Barrier(100)
    winners: list[lease.Lease] = []
    refusals: list[lease.Held] = []
    guard = threading.Lock()

    def contend(n: int) -> None:
        start.wait()
        try:
            won = leases.acquire(resource, f"t{n}", 30_000)
        except lease.Held as exc:
            with guard:
                refusals.append(exc)
        else:
            with guard:
                winners.append(won)

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(100)]
    # When they all try to acquire the same resource
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then exactly one wins, with the first fence, and the database names it as the holder
    assert len(winners) == 1 and len(refusals) == 99
    winner = winners[0]
    assert winner.fence == 1
    stored = item(ddb, tables["leases"], resource)
    assert stored is not None
    assert (stored["owner"], stored["fence"]) == (winner.owner, 1)
    # And every loser learned who holds it and until when from the failed write itself
    assert {(r.owner, r.expires_at_ms, r.fence) for r in refusals} == {
        (winner.owner, winner.expires_at_ms, 1)
    }


def test_contended_workload_history_shows_fence_order_and_no_overlap(ddb, tables):
    # Given 50 workers x 20 rounds over 5 resources: acquire, fenced read-modify-write, release
    # When the workload runs against DynamoDB Local
    outcome = lease_workload(ddb, tables["leases"], workers=50, rounds=20, resources=5)

    # Then every round acquired, and every protected write was accepted
    assert len(outcome.rounds) == 1000
    assert all(r.accepted for r in outcome.rounds)
    by_resource: dict[str, list[Any]] = defaultdict(list)
    for record in outcome.rounds:
        by_resource[record.resource].append(record)
    assert len(by_resource) == 5
    for lock_key, data_key in zip(outcome.lock_keys, outcome.data_keys, strict=True):
        rounds = sorted(by_resource[lock_key], key=lambda r: r.fence)
        # Fences are unique and gap-free: one fence per successful acquisition
        assert [r.fence for r in rounds] == list(range(1, len(rounds) + 1))
        # The database's handover records: each acquisition found its predecessor's lease,
        # already released by that predecessor (not taken over while live)
        assert rounds[0].previous is None
        for before, after in itertools.pairwise(rounds):
            assert after.previous is not None
            assert after.previous["fence"] == before.fence
            assert after.previous["owner"] == before.owner
            assert "releasedAt" in after.previous and after.previous["expiresAt"] == 0
            # And no two holders overlapped as the workers saw it: the predecessor started its
            # release before the successor's acquire returned
            assert before.releasing < after.acquired
        # The protected item accepted writes in strictly increasing fence order, one per round,
        # and its read-then-write counter lost no update
        protected = outcome.protected[data_key]
        assert protected["fences"] == [r.fence for r in rounds]
        assert protected["count"] == len(rounds)
        assert protected["lastFence"] == rounds[-1].fence


def test_paused_holder_is_refused_after_a_successor_takes_over(ddb, tables, unique):
    # Given A holds a 1 s lease, then is paused (its clock frozen) while B's clock passes expiry
    table = tables["leases"]
    resource, data = f"paused-{unique}", f"paused-data-{unique}"
    clock_a, clock_b = Clock(1_000_000.0), Clock(1_000_000.0)
    a_side = lease.Leases(client=ddb, table=table, clock=clock_a, safety_margin_ms=0)
    b_side = lease.Leases(client=ddb, table=table, clock=clock_b, safety_margin_ms=0)
    a = a_side.acquire(resource, "A", 1_000)
    clock_b.now += 5
    # When B acquires, and writes under its fence
    b = b_side.acquire(resource, "B", 30_000)
    b_side.transact(
        b, [{"Put": {"TableName": table, "Item": codec.encode_item({"resource": data, "v": "B"})}}]
    )
    lease.fenced_update(
        ddb,
        table=table,
        key={"resource": data},
        fence=b.fence,
        changes={"w": "B"},
        backoff=retry.Backoff(),
    )
    # Then A, resuming, has every protected write and its release and renewal refused
    with pytest.raises(lease.LeaseLost):
        a_side.transact(
            a,
            [
                {
                    "Put": {
                        "TableName": table,
                        "Item": codec.encode_item({"resource": data, "v": "A"}),
                    }
                }
            ],
        )
    with pytest.raises(lease.StaleFence):
        lease.fenced_update(
            ddb,
            table=table,
            key={"resource": data},
            fence=a.fence,
            changes={"w": "A"},
            backoff=retry.Backoff(),
        )
    with pytest.raises(lease.LeaseLost):
        a_side.release(a)
    with pytest.raises(lease.LeaseLost):
        a_side.renew(a, 60_000)
    # And B's lease and B's writes stand
    assert b.fence == a.fence + 1
    stored = item(ddb, table, resource)
    assert stored is not None
    assert (stored["owner"], stored["fence"], stored["expiresAt"]) == (
        "B",
        b.fence,
        b.expires_at_ms,
    )
    assert item(ddb, table, data) == {"resource": data, "v": "B", "w": "B", "lastFence": b.fence}


def test_guard_refuses_a_stale_holder_even_before_the_successor_writes(ddb, tables, unique):
    # Given B took over A's expired lease but has not written anything yet
    table = tables["leases"]
    resource, data = f"early-{unique}", f"early-data-{unique}"
    clock = Clock(2_000_000.0)
    leases = lease.Leases(client=ddb, table=table, clock=clock, safety_margin_ms=0)
    a = leases.acquire(resource, "A", 1_000)
    clock.now += 2
    leases.acquire(resource, "B", 30_000)
    # When A writes through the lease-item ConditionCheck
    put = {"Put": {"TableName": table, "Item": codec.encode_item({"resource": data, "v": "A"})}}
    with pytest.raises(lease.LeaseLost) as refused:
        leases.transact(a, [put])
    # Then it is refused (the guard checks the lease itself, not what the item has seen),
    # the failure names the current holder, and nothing was written
    assert refused.value.current is not None and refused.value.current["owner"] == "B"
    assert item(ddb, table, data) is None


def test_expired_lease_that_ttl_has_not_deleted_does_not_block(ddb, tables, unique):
    # Given a lease item whose expiresAt passed but whose TTL (purgeAt) is still ahead, as when
    # DynamoDB has not deleted it yet (TTL deletes late: the item is still there)
    table = tables["leases"]
    resource = f"ttl-lag-{unique}"
    clock = Clock(3_000_000.0)
    now_ms = int(clock() * 1000)
    ddb.put_item(
        TableName=table,
        Item=codec.encode_item(
            {
                "resource": resource,
                "owner": "ghost",
                "fence": 7,
                "expiresAt": now_ms - 60_000,
                "purgeAt": int(clock()) + 3600,
            }
        ),
    )
    leases = lease.Leases(client=ddb, table=table, clock=clock)
    # When someone acquires it
    acquired = leases.acquire(resource, "fresh", 10_000)
    # Then it wins, continuing the old fence (the item was there, not treated as absent)
    assert acquired.fence == 8
    assert acquired.previous is not None and acquired.previous["owner"] == "ghost"
    stored = item(ddb, table, resource)
    assert stored is not None and (stored["owner"], stored["fence"]) == ("fresh", 8)
    # And the TTL attribute earlier versions wrote is gone: lease items are kept (fences forever)
    assert "purgeAt" not in stored


def test_live_lease_blocks_until_released_and_the_fence_keeps_counting(ddb, tables, unique):
    # Given a live lease
    table = tables["leases"]
    resource = f"live-{unique}"
    leases = lease.Leases(client=ddb, table=table)
    first = leases.acquire(resource, "one", 30_000)
    # When another owner tries, then the holder releases, then the other tries again
    with pytest.raises(lease.Held):
        leases.acquire(resource, "two", 30_000)
    leases.release(first)
    leases.release(first)  # a resent release changes nothing
    second = leases.acquire(resource, "two", 30_000)
    # Then the second acquisition gets the next fence: release expired the item, kept the fence
    assert second.fence == first.fence + 1
    with pytest.raises(lease.LeaseLost):
        leases.release(first)


def test_fast_clock_steals_early_but_fencing_rejects_the_old_holder(ddb, tables, unique):
    # Given A holds a 10 s lease by a correct clock, and B's clock runs 60 s ahead
    table = tables["leases"]
    resource, data = f"skew-{unique}", f"skew-data-{unique}"
    true_time = Clock(4_000_000.0)
    ahead = Clock(true_time.now + 60)
    a_side = lease.Leases(client=ddb, table=table, clock=true_time)
    b_side = lease.Leases(client=ddb, table=table, clock=ahead)
    a = a_side.acquire(resource, "A", 10_000)
    # When B, believing A's lease is long over, acquires it while A still holds it
    b = b_side.acquire(resource, "B", 10_000)
    # Then the clock assumption is broken (A still believes it holds the lease)...
    assert a_side.time_left_ms(a) > 0
    # ...yet only B's writes are accepted: the database decides by fence, not by clock
    b_side.transact(
        b, [{"Put": {"TableName": table, "Item": codec.encode_item({"resource": data, "v": "B"})}}]
    )
    with pytest.raises(lease.LeaseLost):
        a_side.transact(
            a,
            [
                {
                    "Put": {
                        "TableName": table,
                        "Item": codec.encode_item({"resource": data, "v": "A"}),
                    }
                }
            ],
        )
    with pytest.raises(lease.LeaseLost):
        a_side.release(a)
    assert item(ddb, table, data) == {"resource": data, "v": "B"}


def test_skew_within_the_margin_never_lets_two_holders_act_at_once(ddb, tables, unique):
    # Given a 1 s safety margin and B's clock 0.5 s ahead of A's (inside the assumption)
    table = tables["leases"]
    resource = f"margin-{unique}"
    a_clock = Clock(5_000_000.0)
    b_clock = Clock(a_clock.now + 0.5)
    a_side = lease.Leases(client=ddb, table=table, clock=a_clock, safety_margin_ms=1000)
    b_side = lease.Leases(client=ddb, table=table, clock=b_clock, safety_margin_ms=1000)
    a = a_side.acquire(resource, "A", 10_000)
    # When real time moves on in 100 ms steps and B tries to acquire at every step
    stolen = None
    for _ in range(120):
        a_clock.now += 0.1
        b_clock.now += 0.1
        try:
            stolen = b_side.acquire(resource, "B", 10_000)
        except lease.Held:
            # Then while B is refused, A may still be acting; that is fine
            continue
        # Then the moment B gets the lease, A has already stopped acting on its own
        assert a_side.time_left_ms(a) <= 0
        break
    assert stolen is not None and stolen.fence == a.fence + 1


def test_queued_workload_serves_in_ticket_order_with_gap_free_fences(ddb, tables):
    # Given 12 workers x 4 rounds over 3 resources, each round a queued wait (FIFO tickets)
    settings = QueueSettings(heartbeat_ms=200, expiry_ms=2_000, poll_ms=20)
    # When the workload runs against DynamoDB Local
    outcome = lease_workload(
        ddb, tables["leases"], workers=12, rounds=4, resources=3, strategy=QUEUE, settings=settings
    )
    # Then every round acquired and wrote, each resource served its tickets in increasing order
    # with fences one apart, and the protected items saw exactly those fences in that order
    assert len(outcome.rounds) == 48 and all(r.accepted for r in outcome.rounds)
    for lock_key, data_key in zip(outcome.lock_keys, outcome.data_keys, strict=True):
        mine = [r for r in outcome.rounds if r.resource == lock_key]
        rounds = sorted(mine, key=lambda r: r.fence)
        assert [r.fence for r in rounds] == list(range(1, len(rounds) + 1))
        tickets = [r.ticket for r in rounds if r.ticket is not None]
        assert len(tickets) == len(rounds)
        assert tickets == sorted(tickets)
        assert outcome.protected[data_key]["fences"] == [r.fence for r in rounds]
    summary = outcome.summary()
    assert summary["order_violations"] == 0 and summary["fence_violations"] == 0


def test_lease_bench_rows_smoke(ddb, tables):
    # The bench section's code path, small and fast (no timings asserted): one row per strategy
    fast = QueueSettings(heartbeat_ms=100, expiry_ms=300, poll_ms=20)
    rows = bench_rows(
        ddb,
        tables["leases"],
        workers=6,
        rounds=2,
        resources=2,
        dead_resources=2,
        strategies=[("retry", RETRY, None), ("queue (fast)", QUEUE, fast)],
        retry_ttl_ms=500,
    )
    assert [row["strategy"] for row in rows] == ["retry", "queue (fast)"]
    for row in rows:
        assert row["fence_violations"] == 0 and row["takeover_p99_ms"] > 0
        assert 0 < row["fairness_jain"] <= 1 and row["calls_per_acquisition"] >= 2
    assert rows[1]["order_violations"] == 0
