"""The FIFO lease queue against DynamoDB Local.

Every claim is checked from the recorded history (tickets, fences, who held when) and from the
table's own items, never from how long something took. Waits are decided on virtual time
(:class:`VirtualTime`: the queue's clocks and sleep, which only its naps move), and what happens
"meanwhile" (a release, a restore, a rival) is done by the test when the waiter first naps, on
the same thread: a wait of L or I takes no wall time, and no race decides an outcome. Two tests
run real threads (strict FIFO under concurrency, and a heartbeat thread keeping its lease); every
wall-clock wait in them is bounded (:func:`wait_until` fails with what it waited for).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from turnstile_ddb import codec, lease, metrics, retry
from turnstile_ddb.lease_queue import (
    Heartbeat,
    LeaseQueue,
    PassedOver,
    QueueSettings,
    WaitTimedOut,
    waiter_key,
)

FAST = QueueSettings(heartbeat_ms=100, expiry_ms=300, poll_ms=20, margin_ms=100)
# For tests where nobody should be passed over even on a loaded machine: L is 10 H.
STEADY = QueueSettings(heartbeat_ms=200, expiry_ms=2_000, poll_ms=20, margin_ms=100)


@pytest.fixture
def counted() -> Iterator[metrics.Tally]:
    tally = metrics.Tally()
    metrics.add_sink(tally)
    yield tally
    metrics.remove_sink(tally)


class VirtualTime:
    """The queue's clocks (epoch and monotonic alike) and its sleep: time moves only when the
    queue sleeps, by exactly what it asked. ``meanwhile(action)`` runs ``action`` at the next
    sleep, before the clock moves: what other clients do while this waiter naps."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start
        self.naps: list[float] = []
        self._pending: list[Callable[[], None]] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        actions, self._pending = self._pending, []
        for action in actions:
            action()
        self.now += max(0.0, seconds)

    def meanwhile(self, action: Callable[[], None]) -> None:
        self._pending.append(action)


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Wait (for real threads) until ``condition`` holds; fail the test naming ``what`` if it
    does not within ``timeout_s``: a broken queue fails, it never hangs the run."""
    give_up = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > give_up:
            pytest.fail(f"gave up after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.01)


def make(
    ddb: Any,
    tables: Any,
    settings: QueueSettings = FAST,
    *,
    virtual: VirtualTime | None = None,
    **kwargs: Any,
) -> LeaseQueue:
    """A queue on the leases table; on ``virtual`` time if given, else on the real clocks."""
    leases = lease.Leases(client=ddb, table=tables["leases"], backoff=retry.Backoff(attempts=8))
    if virtual is not None:
        leases.clock = virtual.clock
        kwargs = {"sleep": virtual.sleep, "monotonic": virtual.clock, **kwargs}
    return LeaseQueue(leases, settings, **kwargs)


def get(ddb: Any, table: str, key: str) -> dict[str, Any] | None:
    response = ddb.get_item(
        TableName=table, Key=codec.encode_item({"resource": key}), ConsistentRead=True
    )
    return codec.decode_item(response.get("Item"))


class Recorder:
    """Tickets as handed out, and each acquisition with the ticket it was served on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tickets: dict[str, list[int]] = {}
        self.served: list[tuple[str, int, int]] = []  # (owner, ticket, fence) in holding order
        self.holding = 0
        self.overlaps = 0

    def on_ticket(self, resource: str, owner: str, ticket: int) -> None:
        with self.lock:
            self.tickets.setdefault(owner, []).append(ticket)

    def hold(self, owner: str, fence: int) -> None:
        with self.lock:
            self.holding += 1
            self.overlaps += self.holding > 1
            self.served.append((owner, self.tickets[owner][-1], fence))

    def done(self) -> None:
        with self.lock:
            self.holding -= 1


def test_waiters_are_served_strictly_in_ticket_order(ddb, tables, unique, counted):
    # Given a resource held (plainly) while twelve threads queue for it
    recorder = Recorder()
    queue = make(ddb, tables, STEADY, on_ticket=recorder.on_ticket)
    resource = f"fifo-{unique}"
    first = queue.leases.acquire(resource, "first", 60_000)
    queued = threading.Barrier(13)
    errors: list[BaseException] = []

    def wait(n: int) -> None:
        try:
            queued.wait()
            held = queue.acquire(resource, f"w{n}", wait_ms=60_000)
            with queue.heartbeat(held) as beat:
                recorder.hold(held.owner, held.fence)
                time.sleep(0.02)
                recorder.done()
            queue.leases.release(beat.lease)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=wait, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    # When everyone has a ticket and the first holder releases
    queued.wait()
    wait_until(lambda: len(recorder.tickets) == 12, "all twelve waiters to take a ticket")
    queue.leases.release(first)
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a waiter never finished"
    assert not errors, errors

    # Then nobody was passed over (one ticket each: a waiter overtaken would have queued again),
    # the holders' order is the tickets' order, fences rise by one, nobody held twice at once
    assert all(len(taken) == 1 for taken in recorder.tickets.values()), recorder.tickets
    tickets = [ticket for _, ticket, _ in recorder.served]
    assert tickets == sorted(tickets) and len(tickets) == 12
    fences = [fence for _, _, fence in recorder.served]
    assert fences == list(range(first.fence + 1, first.fence + 13))
    assert recorder.overlaps == 0
    # And the queue is empty behind them: every waiter row is gone
    item = get(ddb, tables["leases"], resource)
    assert item is not None and item["head"] == item["tickets"] + 1
    assert all(get(ddb, tables["leases"], waiter_key(resource, t)) is None for t in tickets)
    assert counted.get("lease", "LeaseQueued") == 12


def test_a_dead_waiter_ahead_is_passed_over_after_its_heartbeat_expires(
    ddb, tables, unique, counted
):
    # Given a waiter that took ticket 1, wrote its row, and died (never heartbeats again)
    queue = make(ddb, tables, virtual=VirtualTime())
    resource = f"dead-{unique}"
    dead = queue._enqueue(resource, "dead")
    # And one that took ticket 2 and died before writing its row
    ddb.update_item(
        TableName=tables["leases"],
        Key=codec.encode_item({"resource": resource}),
        UpdateExpression="ADD tickets :one",
        ExpressionAttributeValues=codec.values(one=1),
    )
    # When a live waiter queues behind them (ticket 3)
    held = queue.acquire(resource, "live", wait_ms=30_000)

    # Then it is served, as the first holder, past both dead tickets
    assert held.fence == 1
    item = get(ddb, tables["leases"], resource)
    assert item is not None and item["head"] == 4 and item["owner"] == "live"
    assert get(ddb, tables["leases"], waiter_key(resource, dead.ticket)) is None
    assert get(ddb, tables["leases"], waiter_key(resource, 2)) is None  # its placeholder too
    assert counted.get("lease", "LeaseWaiterSkipped") == 2


def test_a_waiter_whose_deadline_passes_leaves_and_nobody_waits_on_it(ddb, tables, unique, counted):
    # Given a live holder with a long lease, and a waiter whose deadline is short
    virtual = VirtualTime()
    queue = make(ddb, tables, virtual=virtual)
    resource = f"deadline-{unique}"
    holder = queue.leases.acquire(resource, "holder", 60_000)
    # When it waits past its deadline
    with pytest.raises(WaitTimedOut) as timed_out:
        queue.acquire(resource, "impatient", wait_ms=250)

    # Then it is told who holds it and its place (next in line), and its row is a tombstone
    assert timed_out.value.owner == "holder" and timed_out.value.position == 0
    row = get(ddb, tables["leases"], waiter_key(resource, 1))
    assert row is not None and row["expiresAt"] == 0
    assert counted.get("lease", "LeaseWaitGaveUp") == 1
    # And a later waiter, queued (ticket 2) when the holder releases, is served passing the
    # tombstone over at once: its heartbeat expiry (now + L) is never waited for, and the row is
    # removed
    virtual.meanwhile(lambda: queue.leases.release(holder))
    later = queue.acquire(resource, "next", wait_ms=30_000)
    assert later.ticket == 2 and later.fence == holder.fence + 1
    assert get(ddb, tables["leases"], waiter_key(resource, 1)) is None
    assert counted.get("lease", "LeaseWaiterSkipped") == 1


def test_a_holder_that_stops_heartbeating_is_taken_over_and_its_fenced_write_refused(
    ddb, tables, unique, counted
):
    # Given a holder served by the queue (lease L) whose heartbeat stops (paused, killed)
    queue = make(ddb, tables, virtual=VirtualTime())
    resource = f"takeover-{unique}"
    paused = queue.acquire(resource, "paused", wait_ms=5_000)
    # When a waiter queues behind it
    successor = queue.acquire(resource, "successor", wait_ms=30_000, ttl_ms=30_000)

    # Then the waiter takes over once the lease ran out, with the next fence
    assert successor.fence == paused.fence + 1
    assert successor.previous is not None and successor.previous["owner"] == "paused"
    assert counted.get("lease", "LeaseTakeover") == 1
    # And the paused holder, waking up, can neither write under its fence nor renew
    item = {
        "Put": {
            "TableName": tables["leases"],
            "Item": codec.encode_item({"resource": f"data-{unique}", "by": "paused"}),
        }
    }
    with pytest.raises(lease.LeaseLost):
        queue.leases.transact(paused, [item])
    with pytest.raises(lease.LeaseLost):
        queue.leases.renew(paused, 1_000)
    queue.leases.transact(successor, [item])  # the successor can


def test_a_heartbeating_holder_keeps_the_lease_and_a_lambda_heartbeat_stops_in_time(
    ddb, tables, unique
):
    # Given a holder renewing every H on a thread (L = 10 H: a loaded machine misses no lease)
    queue = make(ddb, tables, STEADY)
    resource = f"beat-{unique}"
    held = queue.acquire(resource, "beating", wait_ms=5_000)
    with queue.heartbeat(held) as beat:
        # When a waiter waits twice L
        with pytest.raises(WaitTimedOut) as timed_out:
            queue.acquire(resource, "waiting", wait_ms=2 * STEADY.expiry_ms)
        # Then it never got the lease: the holder kept it alive
        assert timed_out.value.owner == "beating"
        assert beat.renewals >= 1 and not beat.lost.is_set()
    # Given a Lambda invocation with little time left (each beat finds one H less: 2 H, then H
    # past the margin) and a stopped clock: the heartbeat stops renewing by itself
    stopped = make(ddb, tables, virtual=VirtualTime()).leases
    left = [FAST.margin_ms + FAST.heartbeat_ms * 3]
    told_to_stop = threading.Event()

    def remaining() -> int:
        left[0] -= FAST.heartbeat_ms
        if left[0] - FAST.margin_ms <= FAST.heartbeat_ms:
            told_to_stop.set()
        return left[0]

    renewed = stopped.renew(beat.lease, FAST.expiry_ms)
    with Heartbeat(
        stopped,
        renewed,
        period_ms=FAST.heartbeat_ms,
        ttl_ms=FAST.expiry_ms,
        remaining_ms=remaining,
        margin_ms=FAST.margin_ms,
    ) as lambda_beat:
        wait_until(told_to_stop.is_set, "the heartbeat's second beat (the one that stops it)")
    # Then it renewed once (2 H left past the margin), never past the invocation's end: that
    # renewal was cut from L to the 2 H left
    assert lambda_beat.renewals == 1 and not lambda_beat.lost.is_set()
    capped = renewed.expires_at_ms - FAST.expiry_ms + 2 * FAST.heartbeat_ms
    assert lambda_beat.lease.expires_at_ms == capped


def test_a_waiter_whose_heartbeat_pauses_is_passed_over_and_queues_again(
    ddb, tables, unique, counted
):
    # Given a holder, and a waiter next in line whose thread stalls once it has said it was next
    # (its first beat, after H); during the stall the holder releases, and a waiter queues
    # behind it and waits for its turn (all on virtual time: the stall lasts as long as the
    # waiter behind naps)
    recorder = Recorder()
    resource = f"pause-{unique}"
    virtual = VirtualTime()
    base = make(ddb, tables, virtual=virtual, on_ticket=recorder.on_ticket)
    holder = base.leases.acquire(resource, "holder", 60_000)
    results: dict[str, lease.Lease] = {}

    def run(queue: LeaseQueue, owner: str) -> None:
        held = queue.acquire(resource, owner, wait_ms=30_000)
        results[owner] = held
        recorder.hold(owner, held.fence)
        recorder.done()
        queue.leases.release(held)

    def stall() -> None:
        base.leases.release(holder)
        run(base, "behind")

    def stalling_sleep(seconds: float) -> None:
        if not results and "beatTicket" in (get(ddb, tables["leases"], resource) or {}):
            virtual.meanwhile(stall)
        virtual.sleep(seconds)

    slow = LeaseQueue(
        base.leases,
        FAST,
        sleep=stalling_sleep,
        monotonic=virtual.clock,
        on_ticket=recorder.on_ticket,
    )
    # When the stalled waiter wakes up
    run(slow, "stalled")

    # Then the waiter behind was served first, and the stalled one came back with a new ticket
    assert [owner for owner, _, _ in recorder.served] == ["behind", "stalled"]
    assert recorder.tickets["stalled"][0] < recorder.tickets["behind"][0]
    assert recorder.tickets["stalled"][-1] > recorder.tickets["behind"][0]
    assert results["stalled"].fence == results["behind"].fence + 1
    assert counted.get("lease", "LeasePassedOver") == 1


def test_fences_rise_across_plain_and_queued_acquisitions_and_after_a_restore(ddb, tables, unique):
    # Given plain and queued acquisitions of one resource, alternating
    queue = make(ddb, tables, virtual=VirtualTime())
    resource = f"mixed-{unique}"
    fences = []
    for n in range(6):
        if n % 2:
            held = queue.acquire(resource, f"q{n}", wait_ms=5_000)
        else:
            held = queue.leases.acquire(resource, f"p{n}", 5_000)
        fences.append(held.fence)
        queue.leases.release(held)
    # Then each fence is the previous one plus one, whichever way it was taken
    assert fences == list(range(1, 7))

    # Given the table restored to a snapshot taken now (the lease item as it was)
    snapshot = ddb.get_item(
        TableName=tables["leases"],
        Key=codec.encode_item({"resource": resource}),
        ConsistentRead=True,
    )["Item"]
    later = queue.acquire(resource, "after-snapshot", wait_ms=5_000)
    queue.leases.release(later)
    ddb.put_item(TableName=tables["leases"], Item=snapshot)
    # When both kinds acquire again
    again = []
    for n in range(4):
        if n % 2:
            held = queue.leases.acquire(resource, f"p-after{n}", 5_000)
        else:
            held = queue.acquire(resource, f"q-after{n}", wait_ms=5_000)
        again.append(held.fence)
        queue.leases.release(held)
    # Then the fence continues from the restored item (never below it) and strictly increases,
    # and the queue still serves (its counters came back with the item)
    assert again == list(range(fences[-1] + 1, fences[-1] + 5))
    assert all(b > a for a, b in itertools.pairwise([fences[-1], *again]))


def test_a_passed_over_waiter_that_runs_out_of_time_is_told_so(ddb, tables, unique):
    # PassedOver is retryable, and a wait that ends after one is a WaitTimedOut, never a hang
    assert issubclass(PassedOver, lease.errors.Retryable)
    queue = make(ddb, tables, virtual=VirtualTime())
    resource = f"short-{unique}"
    queue.leases.acquire(resource, "holder", 60_000)
    with pytest.raises(WaitTimedOut):
        queue.acquire(resource, "waiter", wait_ms=0)


def test_a_ticket_whose_answer_was_lost_is_passed_over_and_the_wait_goes_on(
    dynamodb_local, tables, unique, counted
):
    # Given the first ticket call is applied but its answer lost (a read timeout after sending)
    from tests.helpers import Faults

    client = dynamodb_local.client(config=retry.client_config())
    faults = Faults(client)
    faults.lose_reply("UpdateItem", 1)
    queue = make(client, tables, virtual=VirtualTime())
    resource = f"lost-ticket-{unique}"
    # When a waiter queues for the free resource
    held = queue.acquire(resource, "waiter", wait_ms=30_000)
    client.close()

    # Then it took a second ticket and was served on it, once the orphan ticket 1 (no row: it got
    # a placeholder) had been passed over after L; nothing of ticket 1 is left behind
    assert held.ticket == 2 and held.fence == 1
    assert counted.get("lease", "LeaseWaiterSkipped") == 1
    assert get(client_free(dynamodb_local), tables["leases"], waiter_key(resource, 1)) is None


def client_free(dynamodb_local: Any) -> Any:
    return dynamodb_local.client(config=retry.client_config())


def test_a_plain_acquisition_does_not_jump_a_queue_and_fences_rise_across_both(ddb, tables, unique):
    # Given a holder and a waiter queued behind it
    virtual = VirtualTime()
    queue = make(ddb, tables, STEADY, virtual=virtual)
    resource = f"nojump-{unique}"
    holder = queue.leases.acquire(resource, "holder", 60_000)
    refusals: list[lease.Held] = []

    def release_and_jump() -> None:
        # When, while the waiter naps, the holder releases and a plain acquisition comes for the
        # free lease before the waiter does
        queue.leases.release(holder)
        with pytest.raises(lease.Held) as refused:
            queue.leases.acquire(resource, "jumper", 60_000)
        refusals.append(refused.value)

    virtual.meanwhile(release_and_jump)
    served = queue.acquire(resource, "waiter", wait_ms=30_000)

    # Then the plain acquisition was refused although the lease was free, as someone was queued,
    # and the waiter was served with the next fence
    assert [held.waiting for held in refusals] == [1]
    assert served.fence == holder.fence + 1 and served.owner == "waiter"
    # And once the queue is empty, plain acquisitions go on from the queue's fence
    queue.leases.release(served)
    after = queue.leases.acquire(resource, "plain", 5_000)
    assert after.fence == served.fence + 1


def test_a_free_lease_with_a_live_queue_refuses_a_plain_acquisition(ddb, tables, unique):
    # Given a free lease (released just now) with one waiter queued just now, not yet served:
    # the state the test above reaches while the waiter naps, written directly
    queue = make(ddb, tables)
    now = queue.leases.now_ms()
    resource = f"queued-free-{unique}"
    ddb.put_item(
        TableName=tables["leases"],
        Item=codec.encode_item(
            {
                "resource": resource,
                "owner": "holder",
                "fence": 4,
                "expiresAt": 0,
                "releasedAt": now,
                "acquiredAt": now - 100,
                "queuedAt": now,
                "tickets": 1,
                "head": 1,
            }
        ),
    )
    # When a plain acquisition comes
    with pytest.raises(lease.Held) as refused:
        queue.leases.acquire(resource, "jumper", 5_000)
    # Then it is refused for the queue, and the item is as it was: no fence taken
    assert refused.value.waiting == 1
    item = get(ddb, tables["leases"], resource)
    assert item is not None and (item["fence"], item["owner"], item["head"]) == (4, "holder", 1)


def put_lease_item(ddb: Any, table: str, resource: str, **attributes: Any) -> None:
    ddb.put_item(TableName=table, Item=codec.encode_item({"resource": resource, **attributes}))


def test_a_plain_acquisition_never_clears_a_queue_whose_head_may_still_be_napping(
    ddb, tables, unique
):
    # Given a lease released 2 s ago (more than L) and one waiter, queued 2 s ago, that never said
    # it was next: further back it may sleep up to I - H (5.5 s by default) before looking, so
    # the queue itself passes it over only once it has been the head for I (6 s)
    queue = make(ddb, tables)
    now = queue.leases.now_ms()
    resource = f"napping-head-{unique}"
    put_lease_item(
        ddb,
        tables["leases"],
        resource,
        owner="holder",
        fence=4,
        expiresAt=0,
        releasedAt=now - 2_000,
        acquiredAt=now - 2_100,
        queuedAt=now - 2_000,
        tickets=1,
        head=1,
    )
    # When a plain acquisition comes
    with pytest.raises(lease.Held) as refused:
        queue.leases.acquire(resource, "jumper", 5_000)
    # Then it is refused, and the waiter's ticket is still the head: no fence taken
    assert refused.value.waiting == 1
    item = get(ddb, tables["leases"], resource)
    assert item is not None and (item["fence"], item["owner"], item["head"]) == (4, "holder", 1)


def test_a_plain_acquisition_judges_a_queue_by_the_settings_its_waiters_wrote(ddb, tables, unique):
    # Given waiters that queued with a long I (60 s): their ticket wrote it on the lease item
    slow = make(ddb, tables, QueueSettings(heartbeat_ms=1_000, expiry_ms=15_000, idle_ms=60_000))
    resource = f"own-settings-{unique}"
    holder = slow.leases.acquire(resource, "holder", 60_000)
    with pytest.raises(WaitTimedOut):
        slow.acquire(resource, "waiter", wait_ms=0)  # its ticket, then it leaves at once...
    item = get(ddb, tables["leases"], resource)
    assert item is not None
    ago = slow.leases.now_ms() - 30_000
    # ... and the queue as it would be 30 s later with that waiter still there (not left): a
    # free lease and a head silent for 30 s, stale by the defaults (L 1.5 s, I 6 s)
    item.update(expiresAt=0, releasedAt=ago, acquiredAt=ago, queuedAt=ago, left=None)
    put_lease_item(ddb, tables["leases"], **{k: v for k, v in item.items() if v is not None})
    # When a process with the default settings acquires plainly
    plain = lease.Leases(client=ddb, table=tables["leases"])
    with pytest.raises(lease.Held):
        plain.acquire(resource, "jumper", 5_000)
    # Then it was refused: by the waiters' own I the head may still come for its turn
    assert (get(ddb, tables["leases"], resource) or {}).get("fence") == holder.fence


def test_a_restored_queue_whose_waiters_vanished_recovers(ddb, tables, unique, counted):
    # Given lease items as a restore left them: three tickets handed out, the head at the first,
    # the lease free, and none of those waiters alive any more (their processes are gone)
    queue = make(ddb, tables, virtual=VirtualTime())
    long_ago = queue.leases.now_ms() - 60_000
    stuck = {
        "owner": "old",
        "fence": 7,
        "expiresAt": 0,
        "releasedAt": long_ago,
        "acquiredAt": long_ago,
        "tickets": 3,
        "head": 1,
    }
    plain, queued = f"restored-plain-{unique}", f"restored-queued-{unique}"
    for resource in (plain, queued):
        ddb.put_item(
            TableName=tables["leases"], Item=codec.encode_item({"resource": resource, **stuck})
        )
    # When a plain acquisition comes: the queue is stale (nobody came for the lease or queued for
    # L), so it is cleared and the lease taken, continuing the restored fence
    taken = queue.leases.acquire(plain, "plain", 5_000)
    assert taken.fence == 8
    item = get(ddb, tables["leases"], plain)
    assert item is not None and item["head"] == item["tickets"] + 1
    assert counted.get("lease", "LeaseQueueCleared") == 1
    # When a waiter queues behind the vanished tickets instead
    held = queue.acquire(queued, "live", wait_ms=30_000)
    # Then it passes each dead ticket over (I after it became the head) and is served
    assert held.ticket == 4 and held.fence == 8
    assert counted.get("lease", "LeaseWaiterSkipped") == 3


def test_a_waiter_whose_ticket_a_restore_took_back_queues_again(ddb, tables, unique, counted):
    # Given a holder, and a waiter queued behind it on ticket 1
    recorder = Recorder()
    virtual = VirtualTime()
    queue = make(ddb, tables, STEADY, virtual=virtual, on_ticket=recorder.on_ticket)
    resource = f"rewound-{unique}"
    holder = queue.leases.acquire(resource, "holder", 60_000)
    snapshot = ddb.get_item(
        TableName=tables["leases"],
        Key=codec.encode_item({"resource": resource}),
        ConsistentRead=True,
    )["Item"]

    def restore_and_release() -> None:
        # When, while the waiter naps, the table is restored to before its ticket (the counter
        # goes back to none) and the holder releases
        ddb.put_item(TableName=tables["leases"], Item=snapshot)
        queue.leases.release(holder)

    virtual.meanwhile(restore_and_release)
    served = queue.acquire(resource, "waiter", wait_ms=30_000)
    # Then the waiter noticed its ticket was beyond the counter, queued again, and was served
    assert recorder.tickets["waiter"] == [1, 1]
    assert served.fence == holder.fence + 1
    assert counted.get("lease", "LeasePassedOver") == 1


def test_a_claim_records_the_hold_it_ends_and_the_next_in_line_naps_by_it_not_by_the_turn(
    ddb, tables, unique
):
    # Given a stopped clock (epoch seconds) the test moves by hand, and a recorded turn far longer
    # than any hold (as an oversleeping queue records it)
    now = [1_800_000_000.0]
    naps: list[float] = []
    holders: list[lease.Lease] = []

    def sleep(seconds: float) -> None:  # the head's nap at a live holder: record it, then release
        naps.append(seconds)
        if holders:
            queue.leases.release(holders.pop())

    queue = make(ddb, tables, STEADY, sleep=sleep)
    queue.leases.clock = lambda: now[0]
    resource = f"hold-{unique}"
    first = queue.acquire(resource, "a", wait_ms=5_000)
    now[0] += 0.080  # held 80 ms
    queue.leases.release(first)

    # When the next waiter claims the released lease
    second = queue.acquire(resource, "b", wait_ms=5_000)
    item = get(ddb, tables["leases"], resource)
    assert item is not None
    # Then its claim recorded the hold it ended (the first holder's release minus acquisition)
    assert int(item["lastHoldMs"]) == 80
    assert int(item["acquiredAt"]) == int(now[0] * 1000)

    # Given that holder still holding, and a recorded turn of 1.5 s (longer than L - H)
    ddb.update_item(
        TableName=tables["leases"],
        Key=codec.encode_item({"resource": resource}),
        UpdateExpression="SET turnMs = :turn",
        ExpressionAttributeValues=codec.values(turn=1_500),
    )
    holders.append(second)
    # When the next waiter finds it next in line at that live holder
    third = queue.acquire(resource, "c", wait_ms=5_000)
    # Then it napped until the holder's acquisition plus the recorded hold (80 ms), not a turn,
    # and was served once the holder released
    assert naps[0] == pytest.approx(0.080)
    assert third.fence == second.fence + 1
    assert third.previous is not None and third.previous.get("owner") == "b"
    item = get(ddb, tables["leases"], resource)
    assert item is not None and int(item["holdMs"]) == 80
    queue.leases.release(third)


@pytest.mark.parametrize(("hold_s", "beats"), [(0.1, False), (0.5, True)])
def test_the_next_in_line_beats_only_once_it_has_waited_a_heartbeat(
    ddb, tables, unique, hold_s, beats
):
    # Given a stopped clock (monotonic and epoch alike) that only the waiter's naps move, and a
    # holder that releases once the clock has moved ``hold_s`` past its acquisition
    now = [1_800_000_000.0]
    naps: list[float] = []
    holder: list[lease.Lease] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        now[0] += seconds
        if holder and now[0] >= holder[0].acquired_at / 1000 + hold_s:
            queue.leases.release(holder.pop())

    queue = make(ddb, tables, STEADY, sleep=sleep, monotonic=lambda: now[0])
    queue.leases.clock = lambda: now[0]
    resource = f"firstbeat-{unique}"
    holder.append(queue.leases.acquire(resource, "holder", 60_000))

    # When a waiter queues behind it (next in line at once) and waits for the release
    held = queue.acquire(resource, "next", wait_ms=5_000)

    # Then it was served after the release; it said it was next (a beat) only when the hold
    # outlasted a heartbeat (H = 0.2 s): a short hold costs the ticket and the looks, no beat
    assert held.previous is not None and held.previous.get("owner") == "holder"
    item = get(ddb, tables["leases"], resource)
    assert item is not None
    assert ("beatTicket" in item) is beats
    if beats:
        assert int(item["beatTicket"]) == held.ticket
    assert sum(naps) >= hold_s


def test_a_process_that_saw_the_lease_quiet_takes_it_in_one_call_but_never_past_a_queue(
    ddb, tables, unique, counted
):
    # Given a process whose ticket found the lease free with nobody ahead (ticket and claim)
    queue = make(ddb, tables, STEADY)
    resource = f"quiet-{unique}"
    first = queue.acquire(resource, "a", wait_ms=5_000)
    assert first.attempts == 2 and resource in queue.quiet and first.ticket is not None
    queue.leases.release(first)

    # When it acquires the released lease again
    second = queue.acquire(resource, "b", wait_ms=5_000)

    # Then one write took it, as the next ticket, with the next fence, and left the queue empty
    assert second.attempts == 1 and second.ticket is not None
    assert (second.ticket, second.fence) == (first.ticket + 1, first.fence + 1)
    item = get(ddb, tables["leases"], resource)
    assert item is not None and item["owner"] == "b"
    assert int(item["head"]) == int(item["tickets"]) + 1 == second.ticket + 1
    assert counted.get("lease", "LeaseQueued") == 1
    queue.leases.release(second)

    # Given a waiter from another process queued at the free lease since (not yet served)
    ddb.update_item(
        TableName=tables["leases"],
        Key=codec.encode_item({"resource": resource}),
        UpdateExpression="ADD tickets :one SET queuedAt = :now",
        ExpressionAttributeValues=codec.values(one=1, now=queue.leases.now_ms()),
    )
    # When the process, still taking the lease for quiet, acquires with no time to wait
    with pytest.raises(WaitTimedOut):
        queue.acquire(resource, "c", wait_ms=0)

    # Then its one-write attempt was refused (no fence taken, nobody jumped), it queued behind
    # the waiter instead, and it no longer takes the lease for quiet
    item = get(ddb, tables["leases"], resource)
    assert item is not None and int(item["fence"]) == second.fence and item["owner"] == "b"
    assert resource not in queue.quiet
    assert counted.get("lease", "LeaseQueued") == 2


def test_a_queue_whose_waiters_all_left_lets_a_plain_acquisition_take_the_free_lease_at_once(
    ddb, tables, unique, counted
):
    # Given a holder and a queued waiter that gave up (its deadline passed: it left, and the lease
    # item records so in ``left``), and then the holder released
    virtual = VirtualTime()
    queue = make(ddb, tables, virtual=virtual)
    resource = f"all-left-{unique}"
    holder = queue.leases.acquire(resource, "holder", 60_000)
    with pytest.raises(WaitTimedOut):
        queue.acquire(resource, "impatient", wait_ms=250)
    queue.leases.release(holder)
    # When a plain acquisition comes at once (no clock moves: nobody waits for I or L)
    taken = queue.leases.acquire(resource, "plain", 5_000)
    # Then it takes the free lease with the next fence, and the queue nobody waits in is cleared
    assert taken.fence == holder.fence + 1 and taken.owner == "plain"
    item = get(ddb, tables["leases"], resource)
    assert item is not None and item["head"] == item["tickets"] + 1 and "left" not in item
    assert counted.get("lease", "LeaseQueueCleared") == 1
    # And a waiter queueing afterwards is served in order with the fence after it
    queue.leases.release(taken)
    later = queue.acquire(resource, "later", wait_ms=1_000)
    assert later.fence == taken.fence + 1 and later.ticket == item["tickets"] + 1


def test_a_queue_with_one_live_waiter_behind_one_that_left_still_refuses_and_says_so(
    ddb, tables, unique
):
    # Given a free lease, ticket 1 left and ticket 2 still waiting (queued just now)
    queue = make(ddb, tables)
    now = queue.leases.now_ms()
    resource = f"left-and-live-{unique}"
    put_lease_item(
        ddb,
        tables["leases"],
        resource,
        owner="holder",
        fence=4,
        expiresAt=0,
        releasedAt=now,
        acquiredAt=now - 100,
        queuedAt=now,
        tickets=2,
        head=1,
        left={1},
        turnMs=200,
    )
    # When a plain acquisition comes
    with pytest.raises(lease.Queued) as refused:
        queue.leases.acquire(resource, "jumper", 5_000)
    # Then it is refused for the live queue (one waiter, not a holder), with the time the queue
    # should take to serve it, and nothing was written
    assert refused.value.waiting == 1
    assert refused.value.retry_after_ms == 200  # one turn (turnMs) per waiter still queued
    item = get(ddb, tables["leases"], resource)
    assert item is not None and (item["fence"], item["owner"], item["head"]) == (4, "holder", 1)
