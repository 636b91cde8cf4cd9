"""A beat that lands between a passer's look and its pass-over write keeps the head, against
DynamoDB Local.

A waiter may pass over the head of the queue only when the head's last beat is L old, and a plain
acquisition may clear a queue only when that held already I ago. Both decide from a look (the
reply to a refused write, which hands back the item) and then send the pass-over write under a
condition that repeats the rule. These tests build the one interleaving in which the condition's
beat clause, and nothing else, decides: the look shows the lease free for longer than L and the
head's beat older than L, and then, before the pass-over write reaches the table, the head beats
(a head whose clock stepped, or that stalled between its look and its beat, is alive). The
head's new beat lands at the moment botocore is about to send the passer's write (a handler on
the passer's client's ``before-parameter-build`` event, which runs on the same thread before the
request is built): written with exactly the shape of the queue's own beat, on another client, or,
in the last test, sent by a real head waiter that runs on a thread of its own in lockstep with
the test (it runs only while the test waits for it, so every call's order is the test's).
The simulator cannot produce it: its heads are live waiters that beat every H only while they
see the lease held, and a beat's reply shows them a release so they claim at once; a passer
whose look shows a beat L old therefore never meets a newer one unless the head itself was slow,
and then the pass-over is allowed. The first two tests also run without the beat, to show that
the same look and write would pass the head over: the refusal is the beat clause's doing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.helpers import metric_totals
from turnstile_ddb import codec, lease, metrics, retry
from turnstile_ddb.lease_queue import LeaseQueue, QueueSettings, WaitTimedOut

FAST = QueueSettings(heartbeat_ms=100, expiry_ms=300, poll_ms=20, margin_ms=100)
# What only the head's beat may say: its clause of the pass-over condition (the queue's own
# pass-over write and a plain acquisition's clearing write both carry it).
BEAT_CLAUSE = "#beatTicket = :head"


class Clock:
    """Everyone's clocks (epoch and monotonic) and the waiters' sleep: time moves only when a
    waiter sleeps, by what it asked, or when the test moves it."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


class Frozen(Exception):
    """The head waiter's process stops (frozen, or its clock about to step) right after a beat."""


@pytest.fixture
def counted() -> Iterator[metrics.Tally]:
    with metric_totals() as tally:
        yield tally


@pytest.fixture
def client(dynamodb_local: Any) -> Any:
    """A client of the passer's own, so a handler on its events sees only the passer's calls."""
    return dynamodb_local.client(config=retry.client_config())


def leases_on(client: Any, tables: Any, clock: Clock) -> lease.Leases:
    return lease.Leases(
        client=client, table=tables["leases"], backoff=retry.Backoff(attempts=8), clock=clock
    )


def item_of(ddb: Any, tables: Any, resource: str) -> dict[str, Any]:
    response = ddb.get_item(
        TableName=tables["leases"],
        Key=codec.encode_item({"resource": resource}),
        ConsistentRead=True,
    )
    return codec.decode_item(response.get("Item")) or {}


def queue_behind_a_holder(ddb: Any, tables: Any, clock: Clock, resource: str) -> lease.Lease:
    """A holder, and a head waiter (ticket 1) that naps behind it, says it is next once (its
    first beat, after H) and then stops; the holder releases. Returns the holder's lease."""
    holder = leases_on(ddb, tables, clock).acquire(resource, "holder", 60_000)

    def sleep(seconds: float) -> None:
        if "beatTicket" in item_of(ddb, tables, resource):
            raise Frozen
        clock.sleep(seconds)

    head = LeaseQueue(leases_on(ddb, tables, clock), FAST, sleep=sleep, monotonic=clock)
    with pytest.raises(Frozen):
        head.acquire(resource, "head", wait_ms=60_000)
    leases_on(ddb, tables, clock).release(holder)
    item = item_of(ddb, tables, resource)
    assert (item["head"], item["tickets"], item["beatTicket"], item["expiresAt"]) == (1, 1, 1, 0)
    return holder


def beat(ddb: Any, tables: Any, resource: str, ticket: int, now_ms: int) -> dict[str, Any]:
    """The head's beat, with the queue's own write (its ``ALL_NEW`` reply is the head's look)."""
    response = ddb.update_item(
        TableName=tables["leases"],
        Key=codec.encode_item({"resource": resource}),
        UpdateExpression="SET #beatTicket = :ticket, #beatAt = :now",
        ConditionExpression="#head = :ticket",
        ExpressionAttributeNames={
            "#beatTicket": "beatTicket",
            "#beatAt": "beatAt",
            "#head": "head",
        },
        ExpressionAttributeValues=codec.values(ticket=ticket, now=now_ms),
        ReturnValues="ALL_NEW",
    )
    return codec.new_item(response)


def before_pass_over(client: Any, action: Callable[[], None]) -> list[str]:
    """Run ``action`` once, just before ``client`` sends a write whose condition carries the
    head's beat clause (after the look that decided to send it). Returns the conditions seen."""
    seen: list[str] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        condition = str(params.get("ConditionExpression", ""))
        if BEAT_CLAUSE in condition and not seen:
            seen.append(condition)
            action()

    client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", hook)
    return seen


@pytest.mark.parametrize("behind", [1, 2], ids=["right-behind", "further-back"])
@pytest.mark.parametrize("beats", [True, False], ids=["head-beats", "head-silent"])
def test_a_beat_landing_before_the_pass_over_write_keeps_the_head(
    ddb, tables, client, unique, counted, behind, beats
):
    # Given a head (ticket 1) whose last beat is long past, and the lease free for as long
    clock = Clock()
    resource = f"beat-pass-{unique}-{behind}-{beats}"
    holder = queue_behind_a_holder(ddb, tables, clock, resource)
    for _ in range(behind - 1):  # a ticket between them, whose waiter never came
        ddb.update_item(
            TableName=tables["leases"],
            Key=codec.encode_item({"resource": resource}),
            UpdateExpression="ADD tickets :one",
            ExpressionAttributeValues=codec.values(one=1),
        )
    clock.now += 1.0  # L is 0.3 s
    # And, if it beats, the head beats again between a waiter's look and its pass-over write
    looks: list[dict[str, Any]] = []

    def head_beats() -> None:
        if beats:
            looks.append(beat(ddb, tables, resource, 1, int(clock() * 1000)))

    sent = before_pass_over(client, head_beats)
    before = counted.snapshot()
    # When a waiter queues behind it and looks once (a wait shorter than L: the beat it meets
    # is never L old while it waits)
    passer = LeaseQueue(leases_on(client, tables, clock), FAST, sleep=clock.sleep, monotonic=clock)
    ticket = behind + 1
    item: dict[str, Any]
    if beats:
        with pytest.raises(WaitTimedOut) as timed_out:
            passer.acquire(resource, "passer", wait_ms=FAST.heartbeat_ms)
        # Then its look said the head was silent: it sent the pass-over write...
        assert len(sent) == 1
        # ... the head's beat landed first, and its reply showed it the lease free (it claims)
        assert looks and looks[0]["expiresAt"] < clock() * 1000
        # ... and the write was refused: the head is still the head, the lease untaken, and the
        # waiter left behind it at its deadline, one live ticket still ahead of it
        item = item_of(ddb, tables, resource)
        assert item["head"] == 1 and item["beatTicket"] == 1
        assert (item["owner"], item["fence"]) == ("holder", holder.fence)
        assert item["left"] == {ticket}
        assert timed_out.value.position == behind
        skipped = counted.get("lease", "LeaseWaiterSkipped") - before.get(
            ("lease", "LeaseWaiterSkipped"), 0.0
        )
        assert skipped == 0
        if behind == 1:  # right behind, the pass-over is a claim: refused, it counts as busy
            busy = counted.get("lease", "LeaseBusy") - before.get(("lease", "LeaseBusy"), 0.0)
            assert busy >= 1
        else:  # further back, the pass-over only moves the head: refused, it counts as such
            refused = counted.get("lease", "LeaseSkipRefused") - before.get(
                ("lease", "LeaseSkipRefused"), 0.0
            )
            assert refused == 1
    else:
        # (without the beat, the same look and write pass the head over)
        if behind == 1:
            held = passer.acquire(resource, "passer", wait_ms=FAST.heartbeat_ms)
            assert (held.ticket, held.fence) == (ticket, holder.fence + 1)
        else:
            with pytest.raises(WaitTimedOut):
                passer.acquire(resource, "passer", wait_ms=FAST.heartbeat_ms)
        assert len(sent) == 1
        item = item_of(ddb, tables, resource)
        assert item["head"] > 1
        assert (
            counted.get("lease", "LeaseWaiterSkipped")
            - before.get(("lease", "LeaseWaiterSkipped"), 0.0)
            >= 1
        )


@pytest.mark.parametrize("beats", [True, False], ids=["head-beats", "head-silent"])
def test_a_beat_landing_before_a_plain_acquisition_clears_the_queue_keeps_it(
    ddb, tables, client, unique, counted, beats
):
    # Given a queue whose head has been silent long enough for a plain acquisition to clear it
    # (its beat and the release long past I + L, nobody queued for 2 I)
    clock = Clock()
    resource = f"beat-clear-{unique}-{beats}"
    holder = queue_behind_a_holder(ddb, tables, clock, resource)
    clock.now += 10.0  # I is 1.2 s, L 0.3 s

    # And, if it beats, the head beats again between the plain acquisition's refused first
    # write (its look) and its clearing write
    def head_beats() -> None:
        if beats:
            beat(ddb, tables, resource, 1, int(clock() * 1000))

    sent = before_pass_over(client, head_beats)
    before = counted.snapshot()
    plain = leases_on(client, tables, clock)
    if beats:
        # When a plain acquisition comes
        with pytest.raises(lease.Held) as refused:
            plain.acquire(resource, "plain", 5_000)
        # Then it judged the queue stale and sent the clearing write, which was refused: the
        # queue is kept (its head, its ticket), the lease untaken, nothing counted as cleared
        assert len(sent) == 1
        assert refused.value.attempts == 2 and refused.value.waiting == 1
        item = item_of(ddb, tables, resource)
        assert (item["head"], item["tickets"], item["beatTicket"]) == (1, 1, 1)
        assert (item["owner"], item["fence"]) == ("holder", holder.fence)
        cleared = counted.get("lease", "LeaseQueueCleared") - before.get(
            ("lease", "LeaseQueueCleared"), 0.0
        )
        assert cleared == 0
    else:
        # (without the beat, the same acquisition clears the queue and takes the lease)
        taken = plain.acquire(resource, "plain", 5_000)
        assert len(sent) == 1
        assert taken.fence == holder.fence + 1
        item = item_of(ddb, tables, resource)
        assert item["head"] == item["tickets"] + 1
        assert (
            counted.get("lease", "LeaseQueueCleared")
            - before.get(("lease", "LeaseQueueCleared"), 0.0)
            == 1
        )


class Lockstep:
    """A waiter running on a thread of its own only while the test lets it: it stops at
    ``pause`` (telling the test it got there) until the test calls :meth:`resume`; one thread
    runs at a time, so the order of every call is the test's. Every wait is bounded: a broken
    queue fails the test, it never hangs it."""

    TIMEOUT_S = 60.0

    def __init__(self) -> None:
        self._arrived = threading.Semaphore(0)
        self._go = threading.Semaphore(0)
        self.result: Any = None
        self.thread: threading.Thread | None = None

    def start(self, run: Callable[[], Any]) -> None:
        def body() -> None:
            try:
                self.result = run()
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                self.result = exc
            self._arrived.release()

        self.thread = threading.Thread(target=body, name="head-waiter", daemon=True)
        self.thread.start()

    def pause(self) -> None:
        """On the waiter's thread: stop here until resumed."""
        self._arrived.release()
        if not self._go.acquire(timeout=self.TIMEOUT_S):
            raise TimeoutError("the test never resumed the waiter")

    def arrived(self, what: str) -> None:
        """On the test's thread: wait for the waiter to pause (or end)."""
        if not self._arrived.acquire(timeout=self.TIMEOUT_S):
            pytest.fail(f"gave up waiting for the head waiter to {what}")

    def resume(self, until: str) -> None:
        """Let the waiter run until its next pause (or its end)."""
        self._go.release()
        self.arrived(until)

    def finish(self) -> Any:
        self._go.release()
        assert self.thread is not None
        self.thread.join(timeout=self.TIMEOUT_S)
        assert not self.thread.is_alive(), "the head waiter never finished"
        return self.result


def test_a_real_head_whose_beat_lands_before_the_pass_over_write_is_served(
    ddb, tables, client, dynamodb_local, unique, counted
):
    # Given a holder, and a head waiter (ticket 1, on a thread of its own run in lockstep) that
    # said it was next once, looked again (a claim refused: held), and then stalls before its
    # next step, which is its next beat
    clock = Clock()
    resource = f"beat-real-{unique}"
    holder = leases_on(ddb, tables, clock).acquire(resource, "holder", 60_000)
    head_client = dynamodb_local.client(config=retry.client_config())
    step = Lockstep()
    calls: list[str] = []

    def before(params: dict[str, Any], **_: Any) -> None:
        calls.append(str(params.get("UpdateExpression", "")))

    def after(**_: Any) -> None:
        beats = sum(call.startswith("SET #beatTicket") for call in calls)
        if beats == 1 and "#head = :next" in calls[-1]:
            step.pause()  # the claim after its first beat was refused: it stalls here
        elif beats == 2 and calls[-1].startswith("SET #beatTicket"):
            step.pause()  # its second beat is in (its reply shows the lease free)

    head_client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", before)
    head_client.meta.events.register("after-call.dynamodb.UpdateItem", after)
    head = LeaseQueue(
        leases_on(head_client, tables, clock), FAST, sleep=clock.sleep, monotonic=clock
    )
    step.start(lambda: head.acquire(resource, "head", wait_ms=60_000))
    try:
        step.arrived("stall after its first beat")
        # And, while it stalls, the holder releases and more than L passes
        leases_on(ddb, tables, clock).release(holder)
        clock.now += 1.0  # L is 0.3 s
        # When a waiter queues behind it, its look says the head is silent, and the head wakes
        # and beats just before the waiter's pass-over write goes
        sent = before_pass_over(client, lambda: step.resume("beat"))
        passer = LeaseQueue(
            leases_on(client, tables, clock), FAST, sleep=clock.sleep, monotonic=clock
        )
        with pytest.raises(WaitTimedOut) as timed_out:
            passer.acquire(resource, "passer", wait_ms=FAST.heartbeat_ms)
    finally:
        served = step.finish()
    # Then the pass-over write was sent and refused: the waiter left behind the head, and the
    # head, going on from its beat's reply, claimed the lease in its turn
    assert len(sent) == 1 and timed_out.value.position == 1
    assert isinstance(served, lease.Lease), served
    assert (served.owner, served.ticket, served.fence) == ("head", 1, holder.fence + 1)
    item = item_of(ddb, tables, resource)
    assert (item["owner"], item["head"], item["left"]) == ("head", 2, {2})
    assert sum(call.startswith("SET #beatTicket") for call in calls) == 2
    assert counted.get("lease", "LeaseWaiterSkipped") == 0
