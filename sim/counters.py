"""The sharded workload, run through either front door: ``sharded``'s counter and capacity.

Each client takes one to three units from a counter of four shards (sometimes more than any one
shard holds, so the transaction over several shards runs too), restocks it, reads it, and joins
or leaves a sharded capacity of three shards with one place each. Its hints are its own, on its
virtual clock. The client is written once: each operation is either called (the synchronous
front door) or run to completion on the client's own event loop (``turnstile_ddb.aio``, the
client awaited: :class:`sim.ddb.Awaited`), so one seed gives one history through both drivers,
call for call (tests/sim/test_counters_drivers_agree.py).

Judged by the table and the history: no shard below zero and the total exactly what the
acknowledged takes and restocks left (within what the unknown ones may have done); no capacity
shard over its limit, and each shard counting exactly the members that recorded it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import FAIL, OK, UNKNOWN
from sim.ddb import Awaited, Stats, create_table
from sim.model import Model
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import aio, capacity, codec, errors, retry, sharded

TABLE = "sim-counters"
PATTERN = "counters"
STOCK = [4, 4, 4, 4]
RESTOCK = 3
COUNTER = sharded.ShardedCounter(TABLE, "pk", "stock", len(STOCK), "count")
PLACES = sharded.ShardedCounter(TABLE, "pk", "places", 3, "count")
REFUSED = (errors.Refused, errors.NotFound, retry.RetriesExhausted)


@dataclass
class Counters:
    operations: int = 8
    driver: str = "sync"

    def setup(self, client: Any) -> None:
        create_table(client, TABLE, "pk")
        rows = [
            *({**COUNTER.key(k), "count": n} for k, n in enumerate(STOCK)),
            *({**PLACES.key(k), "count": 0, "limit": 1, "version": 1} for k in range(3)),
        ]
        for row in rows:
            client.put_item(TableName=TABLE, Item=codec.encode_item(row))

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        if self.driver == "sync":
            return lambda task: self._run(recorder, task, sharded, client, lambda answer: answer)

        def run(task: Task) -> None:
            loop = asyncio.new_event_loop()
            try:
                self._run(recorder, task, aio.sharded, Awaited(client), loop.run_until_complete)
            finally:
                loop.close()

        return run

    def _plan(self, task: Task, hints: sharded.Hints) -> tuple[str, tuple[Any, ...], Any]:
        """The next operation (the same draws whichever driver runs it)."""
        backoff = task.backoff(attempts=4)
        options = sharded.TakeOptions(backoff=backoff, hints=hints, rand=task.rng)
        member = capacity.Member(TABLE, {"pk": f"member-{task.name}"}, {"of": "places"})
        roll = task.rng.random()
        if roll < 0.5:
            return "take", (COUNTER, task.rng.choice([1, 1, 2, 3])), {"options": options}
        if roll < 0.6:
            return "add", (COUNTER, RESTOCK), {"backoff": backoff, "hints": hints}
        if roll < 0.7:
            return "read_all", (COUNTER, backoff), {}
        if roll < 0.85:
            return "join", (PLACES, member, options), {}
        return "leave", (PLACES, member, options), {}

    def _run(
        self,
        recorder: Recorder,
        task: Task,
        module: Any,
        client: Any,
        finish: Callable[[Any], Any],
    ) -> None:
        hints = sharded.Hints(
            shards=sharded.ShardHints(clock=task.clock),
            sold_out=sharded.SoldOutHints(clock=task.clock),
        )
        for _ in range(self.operations):
            name, args, kwargs = self._plan(task, hints)
            op = recorder.invoke(PATTERN, task.name, name, quantity=_quantity(name, args))
            try:
                answer = finish(getattr(module, name)(client, *args, **kwargs))
            except BaseException as exc:
                _complete(recorder, op, exc)
                if isinstance(exc, Crashed):
                    raise
                continue
            _complete(recorder, op, None, answer)

    def final(self, real: Any) -> dict[str, Any]:
        items = [codec.decode_item(i) or {} for i in real.scan(TableName=TABLE)["Items"]]
        return {str(i["pk"]): {k: str(v) for k, v in sorted(i.items())} for i in items}

    def check(self, recorder: Recorder, real: Any) -> Report:
        report = Report()
        rows = self.final(real)
        counts = [int(rows[str(COUNTER.key(k)["pk"])]["count"]) for k in range(COUNTER.shards)]
        report.expect(min(counts) >= 0, PATTERN, "no shard oversold", f"{counts}")
        low = high = sum(STOCK)
        for op in recorder.ops:
            if op.pattern != PATTERN or op.f not in ("take", "add"):
                continue
            change = -int(op.args["quantity"]) if op.f == "take" else RESTOCK
            if op.type == OK:
                low, high = low + change, high + change
            elif op.type == UNKNOWN:
                low, high = low + min(change, 0), high + max(change, 0)
        total = sum(counts)
        report.expect(low <= total <= high, PATTERN, "total exact", f"{total} not in {low}..{high}")
        members = [row for pk, row in rows.items() if pk.startswith("member-")]
        places = [int(rows[str(PLACES.key(k)["pk"])]["count"]) for k in range(PLACES.shards)]
        for k, count in enumerate(places):
            report.expect(0 <= count <= 1, PATTERN, "never over the limit", f"{k}: {count}")
        # the sum, not each shard: a leave at a throttled shard gives the place back elsewhere
        report.expect(
            sum(places) == len(members), PATTERN, "members counted once", f"{places}, {members}"
        )
        return report


def _quantity(name: str, args: tuple[Any, ...]) -> int:
    return int(args[1]) if name in ("take", "add") else 0


def _complete(recorder: Recorder, op: Any, exc: BaseException | None, answer: Any = None) -> None:
    if exc is None:
        shown = {"shards": list(answer.shards)} if isinstance(answer, sharded.Taken) else answer
        recorder.complete(op, OK, shown)
    elif isinstance(exc, REFUSED):
        recorder.complete(op, FAIL, {"error": type(exc).__name__})
    elif isinstance(exc, errors.OutcomeUnknown | Crashed):
        recorder.complete(op, UNKNOWN)
    else:
        raise exc


def run(seed: int, driver: str, *, clients: int = 4, operations: int = 8) -> tuple[str, Report]:
    """One seed of the sharded workload alone, through ``driver``: its history and its report."""
    from sim.run import run_alone

    workload = Counters(operations=operations, driver=driver)

    def check(recorder: Recorder, stats: Stats, real: Model) -> Report:
        return workload.check(recorder, real)

    return run_alone(seed, workload, "counters", check, clients=clients)
