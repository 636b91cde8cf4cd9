"""The places workload, run through either front door: ``capacity`` and ``slots``.

Each client joins or leaves a bounded membership (a counter with three places) and books or
releases one of four slots (``book_any`` over all of them). Like :mod:`sim.stock`, the client is
written once and runs the synchronous front doors or ``turnstile_ddb.aio``'s on an event loop of
its own (:class:`sim.ddb.Awaited`), so one seed gives one history through both drivers, call
for call (tests/sim/test_places_drivers_agree.py).

Judged by the table: the counter never exceeds its limit and equals the member items; a slot
whose booking was acknowledged and not released since is held by that booker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import OK
from sim.ddb import Awaited, Stats, create_table
from sim.model import Model
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import aio, capacity, codec, errors, retry, slots

TABLE = "sim-places"
PATTERN = "places"
LIMIT = 3
SLOTS = [{"pk": f"slot-{n}"} for n in range(4)]
COUNTER = capacity.CapacityRow(TABLE, {"pk": "counter"})
REFUSED = (errors.Refused, errors.NotFound, retry.RetriesExhausted)


@dataclass
class Places:
    operations: int = 6
    driver: str = "sync"

    def setup(self, client: Any) -> None:
        create_table(client, TABLE, "pk")
        row = {"pk": "counter", "count": 0, "limit": LIMIT, "version": 1}
        client.put_item(TableName=TABLE, Item=codec.encode_item(row))
        for slot in SLOTS:
            client.put_item(TableName=TABLE, Item=codec.encode_item({**slot, "version": 1}))

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        if self.driver == "sync":
            return lambda task: self._run(recorder, task, client, None)
        awaited = Awaited(client)
        return lambda task: asyncio.run(self._run_async(recorder, task, awaited))

    def _plan(self, task: Task, number: int) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        """The next operation (the same draws whichever driver runs it)."""
        backoff = {"backoff": task.backoff(attempts=4)}
        member = capacity.Member(TABLE, {"pk": f"member-{task.name}"}, {"of": "counter"})
        roll = task.rng.random()
        if roll < 0.35:
            return "join", (COUNTER, member), backoff
        if roll < 0.5:
            return "leave", (COUNTER, member), backoff
        if roll < 0.85:
            return "book_any", (TABLE, SLOTS, task.name), backoff
        slot = task.rng.choice(SLOTS)
        return "release", (TABLE, slot, task.name), backoff

    def _run(self, recorder: Recorder, task: Task, client: Any, _: None) -> None:
        for number in range(self.operations):
            name, args, kwargs = self._plan(task, number)
            module = capacity if name in ("join", "leave") else slots
            op = recorder.invoke(PATTERN, task.name, name, slot=_slot(name, args))
            try:
                answer = getattr(module, name)(client, *args, **kwargs)
            except BaseException as exc:
                _complete(recorder, op, exc)
                if isinstance(exc, Crashed):
                    raise
                continue
            _complete(recorder, op, None, answer)

    async def _run_async(self, recorder: Recorder, task: Task, client: Awaited) -> None:
        for number in range(self.operations):
            name, args, kwargs = self._plan(task, number)
            module = aio.capacity if name in ("join", "leave") else aio.slots
            op = recorder.invoke(PATTERN, task.name, name, slot=_slot(name, args))
            try:
                answer = await getattr(module, name)(client, *args, **kwargs)
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
        members = sorted(pk for pk in rows if pk.startswith("member-"))
        count = int(rows["counter"]["count"])
        report.expect(count <= LIMIT, PATTERN, "never over the limit", f"{count}")
        report.expect(count == len(members), PATTERN, "counted members", f"{count} {members}")
        held = {pk: row.get("holder") for pk, row in rows.items() if pk.startswith("slot-")}
        for op in recorder.ops:
            if op.pattern == PATTERN and op.f == "book_any" and op.type == OK and op.value:
                slot, holder = op.value["pk"], op.process
                later = [
                    o
                    for o in recorder.ops
                    if o.process == holder and o.f == "release" and o.index > op.index
                ]
                if not later:
                    report.expect(held[slot] == holder, PATTERN, "booking kept", f"{slot}")
        return report


def _slot(name: str, args: tuple[Any, ...]) -> str:
    return str(args[1]["pk"]) if name == "release" else ""


def _complete(recorder: Recorder, op: Any, exc: BaseException | None, answer: Any = None) -> None:
    shown = {"pk": answer["pk"]} if isinstance(answer, dict) else None
    recorder.outcome(op, exc, shown, REFUSED)


def run(seed: int, driver: str, *, clients: int = 4, operations: int = 6) -> tuple[str, Report]:
    """One seed of the places workload alone, through ``driver``: its history and its report."""
    from sim.run import run_alone

    workload = Places(operations=operations, driver=driver)

    def check(recorder: Recorder, stats: Stats, real: Model) -> Report:
        return workload.check(recorder, real)  # the places checks need no call counts

    return run_alone(seed, workload, "places", check, clients=clients)
