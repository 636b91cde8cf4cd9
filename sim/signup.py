"""Capacity-limited sign-ups and slot bookings: the synchronous paths, near their limits.

Several clients sign users up for events and cancel them through the service's real domain code
(:class:`service.domain.events.Events`: ``register`` is :func:`turnstile_ddb.capacity.join`, the
event item as the materialized lock and counter, on a sharded event
:func:`turnstile_ddb.sharded.join` over per-shard capacity rows; ``unregister`` is the reverse
transaction), and book and release pre-created slots through the library's public API
(:func:`turnstile_ddb.slots.book_any`, :func:`turnstile_ddb.slots.release`; the service has no
slots). The users of an event are a small pool shared by every client, more than its capacity, so
sign-ups race for the last seats, for the same user, and with cancellations; there are fewer
slots than clients, so bookings race for the last free slot. (Requests decided by the stream
consumer are not run here: no streams.)

Judged (:meth:`Signup.check`) by :func:`chaos.checkers.registrations` (the count within
capacity and equal to the registrations that exist, nobody registered twice) and by
:func:`sim.checks.capacity_rows` (every counter item, each shard of a sharded event too, within
its limit and equal to the registrations recorded on it), :func:`sim.checks.seats_in_time` (never
more acknowledged, uncancelled registrations at once than the capacity; each one exists at the
end, and every registration that exists was asked for) and :func:`sim.checks.slots_booked_once`
(no two acknowledged bookings of one slot overlap; the final holders are the ones the history
leaves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from chaos.checkers import EventState, Report, registrations
from chaos.history import FAIL, OK, UNKNOWN
from service.domain.errors import AlreadyRegistered, EventFull, NotFound
from service.domain.events import REGISTRATION_PREFIX, SHARD_SK, Events
from sim import checks
from sim.ddb import create_table
from sim.scheduler import Crashed, Task
from turnstile_ddb import codec, retry, sharded, slots

EVENTS_TABLE = "sim-events"
SLOTS_TABLE = "sim-slots"
REGISTRATIONS = "registrations"  # the history pattern of sign-ups (chaos's checker reports it)
SLOTS = "slots"


def _never_sleeps(seconds: float) -> None:
    raise AssertionError("set-up and final reads run without faults and never wait")


_SETUP = retry.Backoff(attempts=1, sleep=_never_sleeps)


@dataclass
class Signup:
    # (event id, capacity, shards): one event on one counter item, one over two shard counters.
    events: list[tuple[str, int, int]] = field(
        default_factory=lambda: [("sync-e0", 3, 1), ("sync-e1", 4, 2)]
    )
    users: int = 6  # per event, shared by every client: more than any capacity
    slots: int = 3  # fewer than the clients
    operations: int = 8  # per client
    slot_share: float = 0.35  # of a client's operations: a booking or a release
    leave_share: float = 0.3  # of its sign-up operations, when it has signed someone up

    def setup(self, real: Any) -> None:
        real.create_table(
            TableName=EVENTS_TABLE,
            KeySchema=[
                {"AttributeName": "eventId", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "eventId", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        events = Events(real, EVENTS_TABLE, backoff=_SETUP, transactions=_SETUP)
        for event_id, capacity, shards in self.events:
            events.create(event_id, event_id, capacity, shards)
        create_table(real, SLOTS_TABLE, "slotId")
        slots.create(real, SLOTS_TABLE, [{"slotId": s} for s in self._slot_ids()], backoff=_SETUP)

    def _slot_ids(self) -> list[str]:
        return [f"slot{i}" for i in range(self.slots)]

    def body(self, recorder: Any, client: Any) -> Any:
        def run(task: Task) -> None:
            events = Events(
                client,
                EVENTS_TABLE,
                backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
                transactions=task.backoff(attempts=6, base=0.005, cap=0.1, budget=1.0),
                clock=lambda: _iso(task.clock()),
                hints=sharded.Hints(
                    shards=sharded.ShardHints(clock=task.clock),
                    sold_out=sharded.SoldOutHints(clock=task.clock),
                ),
                rand=task.rng,
            )
            booking = task.backoff(attempts=4, base=0.005, cap=0.1)
            signed: list[tuple[str, str]] = []  # (event, user) this client signed up
            held: list[tuple[str, str]] = []  # (slot, holder) this client booked
            for number in range(self.operations):
                call: Callable[[], tuple[str, Any]]
                if task.rng.random() < self.slot_share:
                    if held and task.rng.random() < 0.5:
                        slot, holder = held.pop(task.rng.randrange(len(held)))
                        op = recorder.invoke(SLOTS, task.name, "release", slot=slot, holder=holder)
                        call = partial(_release, client, slot, holder, booking)
                    else:
                        holder = f"{task.name}-{number}"
                        order = self._slot_ids()
                        task.rng.shuffle(order)
                        op = recorder.invoke(SLOTS, task.name, "book", holder=holder, order=order)
                        call = partial(_book, client, order, holder, booking)
                else:
                    event_id = task.rng.choice(self.events)[0]
                    mine = [user for event, user in signed if event == event_id]
                    if mine and task.rng.random() < self.leave_share:
                        user = task.rng.choice(mine)
                        signed.remove((event_id, user))
                        op = recorder.invoke(
                            REGISTRATIONS, task.name, "cancel", event=event_id, user=user
                        )
                        call = partial(_cancel, events, event_id, user)
                    else:
                        user = f"u{task.rng.randrange(self.users)}"
                        op = recorder.invoke(
                            REGISTRATIONS, task.name, "register", event=event_id, user=user
                        )
                        call = partial(_register, events, event_id, user)
                try:
                    outcome, value = call()
                except Crashed:
                    recorder.complete(op, UNKNOWN)
                    raise
                recorder.complete(op, outcome, value)
                if outcome == OK and op.f == "register":
                    signed.append((op.args["event"], op.args["user"]))
                if outcome == OK and op.f == "book":
                    held.append((value["slot"], op.args["holder"]))
                task.sleep(task.rng.random() * 0.05)

        return run

    def state(self, real: Any) -> dict[str, Any]:
        """The tables as they ended, read consistently: per event its counter items and its
        registrations (user -> the shard it recorded), and each slot's holder."""
        events: dict[str, Any] = {}
        for event_id, capacity, shards in self.events:
            if shards == 1:
                parts = [event_id]
                counters = [_get(real, EVENTS_TABLE, {"eventId": event_id, "sk": "EVENT"})]
            else:
                parts = [f"{event_id}#{k}" for k in range(shards)]
                counters = [_get(real, EVENTS_TABLE, {"eventId": p, "sk": SHARD_SK}) for p in parts]
            users: dict[str, int] = {}
            for part in parts:
                for item in _registrations(real, part):
                    users[str(item["userId"])] = int(item.get("shard", 0))
            events[event_id] = {
                "capacity": capacity,
                "counters": [
                    [int(c.get("registered", -1)), int(c.get("capacity", -1))] for c in counters
                ],
                "users": dict(sorted(users.items())),
            }
        holders = {
            s: _get(real, SLOTS_TABLE, {"slotId": s}).get(slots.HOLDER) for s in self._slot_ids()
        }
        return {"events": events, "slots": holders}

    def final(self, real: Any) -> dict[str, Any]:
        return self.state(real)

    def check(self, recorder: Any, stats: Any, real: Any) -> Report:
        state = self.state(real)
        signups = [op for op in recorder.ops if op.pattern == REGISTRATIONS]
        signups = [op for op in signups if op.args.get("event") in state["events"]]
        final = {
            event_id: EventState(
                event["capacity"],
                sum(count for count, _ in event["counters"]),
                set(event["users"]),
                {},
            )
            for event_id, event in state["events"].items()
        }
        report = registrations(signups, final, set(), set())
        report.merge(checks.capacity_rows(signups, state["events"]))
        report.merge(checks.seats_in_time(signups, state["events"]))
        bookings = [op for op in recorder.ops if op.pattern == SLOTS]
        report.merge(checks.slots_booked_once(bookings, state["slots"]))
        return report


def _iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _get(real: Any, table: str, key: dict[str, Any]) -> dict[str, Any]:
    item = real.get_item(TableName=table, Key=codec.encode_item(key), ConsistentRead=True)
    return codec.decode_item(item.get("Item")) or {}


def _registrations(real: Any, partition: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    start: dict[str, Any] | None = None
    while True:
        kwargs: dict[str, Any] = {
            "TableName": EVENTS_TABLE,
            "KeyConditionExpression": "eventId = :e AND begins_with(sk, :p)",
            "ExpressionAttributeValues": codec.values(e=partition, p=REGISTRATION_PREFIX),
            "ConsistentRead": True,
        }
        if start:
            kwargs["ExclusiveStartKey"] = start
        response = real.query(**kwargs)
        items.extend(codec.decode_item(raw) or {} for raw in response["Items"])
        start = response.get("LastEvaluatedKey")
        if not start:
            return items


def _register(events: Events, event_id: str, user: str) -> tuple[str, Any]:
    try:
        return OK, events.register(event_id, user)
    except (EventFull, AlreadyRegistered, NotFound) as exc:
        return FAIL, {"error": exc.code, **exc.details}
    except retry.RetriesExhausted:
        return FAIL, {"error": "THROTTLED"}
    except retry.OutcomeUnknown:
        return UNKNOWN, None


def _cancel(events: Events, event_id: str, user: str) -> tuple[str, Any]:
    try:
        events.unregister(event_id, user)
    except NotFound as exc:
        return FAIL, {"error": exc.code}
    except retry.RetriesExhausted:
        return FAIL, {"error": "THROTTLED"}
    except retry.OutcomeUnknown:
        return UNKNOWN, None
    return OK, None


def _book(client: Any, order: list[str], holder: str, backoff: retry.Backoff) -> tuple[str, Any]:
    try:
        item = slots.book_any(
            client, SLOTS_TABLE, [{"slotId": s} for s in order], holder, backoff=backoff
        )
    except retry.RetriesExhausted:
        return FAIL, {"error": "THROTTLED"}
    except retry.OutcomeUnknown:
        return UNKNOWN, None
    if item is None:
        return FAIL, {"error": "NO_FREE_SLOT"}
    return OK, {"slot": item["slotId"], "version": item["version"]}


def _release(client: Any, slot: str, holder: str, backoff: retry.Backoff) -> tuple[str, Any]:
    try:
        slots.release(client, SLOTS_TABLE, {"slotId": slot}, holder, backoff=backoff)
    except slots.NotHolder as exc:
        return FAIL, {"error": "NOT_HOLDER", "holder": (exc.slot or {}).get(slots.HOLDER)}
    except retry.RetriesExhausted:
        return FAIL, {"error": "THROTTLED"}
    except retry.OutcomeUnknown:
        return UNKNOWN, None
    return OK, None
