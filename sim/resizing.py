"""The resizing workload: a sharded counter and a sharded capacity whose shard counts change
while clients take, restock, join and leave, through either front door.

Two of the clients are resizers: every other operation of theirs resizes the counter or the
capacity (:func:`turnstile_ddb.sharded.resize`) to the next count of their own sequence, so the
shard counts grow and shrink (the counter from one shard: 1, 4, 8, 2, 5, ... and the capacity
from two) and the two resizers race each other as well as everyone else. Every client takes one
to three units (sometimes more than any one shard holds, so the transaction over several shards
runs too), restocks (``add``, and now and then ``set_total``), reads, and joins or leaves the
capacity, and at its end leaves the capacity for good. Each client keeps its own hints, and some
start from a wrong shard count on purpose (:data:`BELIEVED`): they must learn the current one
from what the table answers. The faults are the simulator's: lost replies, throttles, cancelled
transactions, pauses, crashes.

Like :mod:`sim.counters`, a client is written once and each operation is either called (the
synchronous front door) or run to completion on the client's own event loop
(``turnstile_ddb.aio``), so one seed gives one history through both drivers, call for call
(tests/sim/test_resizing_drivers_agree.py).

Judged (:meth:`Resizing.check`) by the table and the history:

* the counter: no shard below zero; the total is what the acknowledged takes and restocks left
  (within what the ones of unknown outcome may have done; a ``set_total`` starts the count
  again); the acknowledged takes never exceed what was ever there (no unit sold twice);
* both: shard items exist for exactly ``k < N``, N the shard count stored on them, and all carry
  the same N and the same layout generation; every transaction a resize applied (its ``steps``:
  one for a grow, one per dropped shard for a shrink) raised the generation by one (no two
  acknowledged resizes answered the same generation, and the final generation is at least the
  acknowledged steps and at most those plus what the resizes of unknown outcome may have made);
* the capacity: the limits add up to what they did at first; no shard over its limit or below
  zero; the counts add up to the member items that exist (each member counted once); every member
  could leave (a member item is left at the end only by a client that crashed or whose every
  final leave was lost).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.checkers import Report, shard_layout
from chaos.history import FAIL, OK, UNKNOWN, Op
from sim.ddb import Awaited, Stats, create_table
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import aio, capacity, codec, errors, retry, sharded

TABLE = "sim-resizing"
PATTERN = "resizing"
INITIAL = 12  # the counter's units at first, on one shard
RESTOCK = 3
TOTALS = (8, 15)  # what a set_total sets the counter to
STOCK = sharded.ShardedCounter(TABLE, "pk", "hot", 1, "count")
LIMITS = (2, 1)  # the capacity's places per shard at first: three places, four would-be members
SEATS = sharded.ShardedCounter(TABLE, "pk", "seats", len(LIMITS), "count")
# Client i believes the counter has BELIEVED[i % 4] shards when it starts (the truth is 1): half
# the clients start wrong. Of the capacity every client believes the truth at first (its items
# do not say their shard count until a resize), and is wrong after a resize of another client.
BELIEVED = (1, 4, 1, 8)
# The shard counts each resizer asks for in turn (the counter's, the capacity's), cycled.
COUNTER_SIZES = ((4, 8, 2, 5), (3, 6, 1, 4))
SEAT_SIZES = ((3, 1, 4, 2), (1, 3, 2, 4))
RESIZERS = len(COUNTER_SIZES)
FINAL_LEAVES = 6  # tries of each client's last leave (each after a pause longer than a burst)
LOST = ("RetriesExhausted", "LostEveryRace", "StayedThrottled")  # a leave refused for faults
REFUSED = (errors.Refused, errors.NotFound, retry.RetriesExhausted)


@dataclass
class Client:
    """One client's state: which one it is, what it believes, what it has learned."""

    number: int
    stock: sharded.ShardedCounter
    seats: sharded.ShardedCounter
    hints: sharded.Hints
    resizes: int = 0

    @property
    def resizer(self) -> bool:
        return self.number < RESIZERS


@dataclass
class Resizing:
    operations: int = 10
    driver: str = "sync"
    # Clients made so far: the first RESIZERS are the resizers, and BELIEVED is by this number.
    _spawned: int = field(default=0, init=False, repr=False)

    def setup(self, client: Any) -> None:
        create_table(client, TABLE, "pk")
        # The counter's items say their shard count, so a caller who believes another one learns
        # it from the first item it reads; the capacity's do not, as a capacity made before
        # resizing existed: until its first resize, N is the count every caller builds it with.
        rows = [
            *sharded.shard_items(STOCK, INITIAL, **{STOCK.shards_attr: STOCK.shards}),
            *(
                {**SEATS.key(k), "count": 0, "limit": limit, "version": 1}
                for k, limit in enumerate(LIMITS)
            ),
        ]
        for row in rows:
            client.put_item(TableName=TABLE, Item=codec.encode_item(row))

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        number = self._spawned
        self._spawned += 1
        if self.driver == "sync":
            return lambda task: self._run(recorder, task, number, sharded, client, _same)

        def run(task: Task) -> None:
            loop = asyncio.new_event_loop()
            try:
                self._run(
                    recorder, task, number, aio.sharded, Awaited(client), loop.run_until_complete
                )
            finally:
                loop.close()

        return run

    def _plan(self, task: Task, me: Client, step: int) -> tuple[str, tuple[Any, ...], Any]:
        """The next operation (the same draws whichever driver runs it)."""
        backoff = task.backoff(attempts=4)
        stock = me.hints.shards.current(me.stock)
        seats = me.hints.shards.current(me.seats)
        if me.resizer and step % 2 == 0:
            sizes = COUNTER_SIZES if me.resizes % 2 == 0 else SEAT_SIZES
            target = sizes[me.number][(me.resizes // 2) % len(sizes[me.number])]
            on_seats = me.resizes % 2 == 1
            me.resizes += 1
            kwargs = {"capacity": on_seats, "backoff": backoff, "hints": me.hints}
            return "resize", (seats if on_seats else stock, target), kwargs
        options = sharded.TakeOptions(backoff=backoff, hints=me.hints, rand=task.rng)
        member = _member(task.name)
        roll = task.rng.random()
        if roll < 0.45:
            return "take", (stock, task.rng.choice([1, 1, 2, 3])), {"options": options}
        if roll < 0.55:
            return "add", (stock, RESTOCK), {"backoff": backoff, "hints": me.hints}
        if roll < 0.6:
            total = task.rng.choice(TOTALS)
            return "set_total", (stock, total), {"backoff": backoff, "hints": me.hints}
        if roll < 0.67:
            return "read_all", (stock, backoff), {}
        if roll < 0.87:
            return "join", (seats, member, options), {}
        return "leave", (seats, member, options), {}

    def _run(
        self,
        recorder: Recorder,
        task: Task,
        number: int,
        module: Any,
        client: Any,
        finish: Callable[[Any], Any],
    ) -> None:
        hints = sharded.Hints(
            shards=sharded.ShardHints(clock=task.clock),
            sold_out=sharded.SoldOutHints(clock=task.clock),
        )
        me = Client(
            number,
            STOCK.with_shards(BELIEVED[number % len(BELIEVED)]),
            SEATS,
            hints,
        )

        def call(name: str, args: tuple[Any, ...], kwargs: Any, **shown: Any) -> Op:
            op = recorder.invoke(PATTERN, task.name, name, **_args(name, args, kwargs), **shown)
            try:
                answer = finish(getattr(module, name)(client, *args, **kwargs))
            except BaseException as exc:
                _complete(recorder, op, exc)
                if isinstance(exc, Crashed):
                    raise
                return op
            _complete(recorder, op, None, answer)
            return op

        for step in range(self.operations):
            call(*self._plan(task, me, step))
        # The end: every client leaves the capacity for good (NotMember: it was not in it),
        # trying again while faults keep the answer from it.
        for _ in range(FINAL_LEAVES):
            backoff = task.backoff(attempts=4)
            options = sharded.TakeOptions(backoff=backoff, hints=hints, rand=task.rng)
            seats = hints.shards.current(me.seats)
            if not _lost(call("leave", (seats, _member(task.name), options), {}, final=True)):
                return
            task.sleep(0.5)

    def final(self, real: Any) -> dict[str, Any]:
        items = [codec.decode_item(i) or {} for i in real.scan(TableName=TABLE)["Items"]]
        return {str(i["pk"]): {k: str(v) for k, v in sorted(i.items())} for i in items}

    def check(self, recorder: Recorder, stats: Stats, real: Any) -> Report:
        report = Report()
        rows = self.final(real)
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        stock = shard_layout(
            report, PATTERN, rows, STOCK, [op for op in ops if _resizes(op, False)]
        )
        counts = [int(row["count"]) for row in stock]
        report.expect(min(counts) >= 0, PATTERN, "no shard oversold", f"{counts}")
        _totals(report, sum(counts), ops)
        seats = shard_layout(report, PATTERN, rows, SEATS, [op for op in ops if _resizes(op, True)])
        counts = [int(row["count"]) for row in seats]
        limits = [int(row["limit"]) for row in seats]
        report.expect(sum(limits) == sum(LIMITS), PATTERN, "places kept", f"limits {limits}")
        for k, (count, limit) in enumerate(zip(counts, limits, strict=True)):
            report.expect(0 <= count <= limit, PATTERN, "never over the limit", f"{k}: {count}")
        members = {pk: row for pk, row in rows.items() if pk.startswith("member-")}
        report.expect(
            sum(counts) == len(members),
            PATTERN,
            "members counted once",
            f"counts {counts}, members {sorted(members)}",
        )
        for pk in sorted(members):
            # A client that crashed never got to its final leaves, or crashed in one (unknown).
            process = pk.removeprefix("member-")
            finals = [op for op in ops if op.process == process and op.args.get("final")]
            report.expect(
                not finals or _lost(finals[-1]),
                PATTERN,
                "every member could leave",
                f"{pk} is still a member after its last leave: {finals[-1:]}",
                finals[-1:],
            )
        return report


def _lost(op: Op) -> bool:
    """Whether faults kept ``op``'s answer from its client (lost, or refused for retries)."""
    return op.type == UNKNOWN or (op.type == FAIL and op.value["error"] in LOST)


def _same(answer: Any) -> Any:
    return answer


def _member(process: str) -> capacity.Member:
    return capacity.Member(TABLE, {"pk": f"member-{process}"}, {"of": "seats"})


def _args(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What the history shows of an operation's arguments (the same through both drivers)."""
    if name in ("take", "add"):
        return {"quantity": int(args[1])}
    if name == "set_total":
        return {"total": int(args[1])}
    if name == "resize":
        return {"capacity": bool(kwargs["capacity"]), "shards": int(args[1])}
    return {}


def _complete(recorder: Recorder, op: Op, exc: BaseException | None, answer: Any = None) -> None:
    if exc is None:
        if isinstance(answer, sharded.Taken):
            shown: Any = {"shards": list(answer.shards)}
        elif dataclasses.is_dataclass(answer) and not isinstance(answer, type):
            shown = dataclasses.asdict(answer)  # a resize's answer
        else:
            shown = answer
        recorder.complete(op, OK, shown)
    elif isinstance(exc, REFUSED):
        recorder.complete(op, FAIL, {"error": type(exc).__name__})
    elif isinstance(exc, errors.OutcomeUnknown | Crashed):
        recorder.complete(op, UNKNOWN)
    else:
        raise exc


def _resizes(op: Op, on_seats: bool) -> bool:
    return op.f == "resize" and op.args["capacity"] == on_seats


def _totals(report: Report, total: int, ops: list[Op]) -> None:
    """The counter's total against the history: for each set_total that may have been the last
    one applied (or none), the range the takes and adds that may have come after it allow."""
    changes = [op for op in ops if op.f in ("take", "add") and op.type in (OK, UNKNOWN)]
    resets = [op for op in ops if op.f == "set_total" and op.type in (OK, UNKNOWN)]
    ranges = []
    for reset in (None, *resets):
        since = float("-inf") if reset is None else reset.invoked
        until = float("-inf") if reset is None else reset.completed
        if any(r.type == OK and r is not reset and r.invoked > until for r in resets):
            continue  # an acknowledged set_total surely came after it
        low = high = INITIAL if reset is None else int(reset.args["total"])
        for op in changes:
            if op.completed < since:
                continue  # surely before it: overwritten
            change = -int(op.args["quantity"]) if op.f == "take" else RESTOCK
            if op.type == OK and op.invoked > until:
                low, high = low + change, high + change
            else:
                low, high = low + min(change, 0), high + max(change, 0)
        ranges.append((low, high))
    report.expect(
        any(low <= total <= high for low, high in ranges),
        PATTERN,
        "total exact",
        f"{total} not in any of {ranges}",
    )
    taken = sum(int(op.args["quantity"]) for op in changes if op.f == "take" and op.type == OK)
    there = (
        INITIAL
        + sum(RESTOCK if op.f == "add" else 0 for op in changes)
        + sum(int(op.args["total"]) for op in resets)
    )
    report.expect(taken <= there, PATTERN, "no unit sold twice", f"{taken} taken of {there}")


def run(seed: int, driver: str, *, clients: int = 4, operations: int = 10) -> tuple[str, Report]:
    """One seed of the resizing workload alone, through ``driver``: its history and its report."""
    from sim.run import run_alone

    workload = Resizing(operations=operations, driver=driver)

    return run_alone(seed, workload, "resizing", workload.check, clients=clients)
