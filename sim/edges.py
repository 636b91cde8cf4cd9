"""The lease's edges, run through either front door: ``lease.Leases`` or ``aio.lease.Leases``.

Each client, a few rounds over, tries to take one of two short leases (``acquire``, one attempt),
reading its clock just before. A holder writes its fence on the resource's fenced item
(``fenced_update``), now and then twice, as a duplicated message would; half the time it
overstays: it sleeps past its lease's expiry on its own clock, then tries the guarded
transaction; otherwise it transacts in time; then it releases. A client refused the lease turns
on the holder the refusal names (``Held``): as an intruder, it renews with the holder's fence
under its own name; as a successor, it takes the lease with a clock that reads exactly the
holder's expiry. Like :mod:`sim.keyed`, each client is one coroutine, driving the synchronous
``Leases`` (its calls wrapped to be awaited, :class:`sim.workloads.Blocking`) or the asyncio
one, so one seed gives one history through both drivers.

Judged from the history:

* a lease lasts what was asked: its expiry is at least the asked length after the clock reading
  taken before the acquisition;
* a fence is written once: no two acknowledged fenced writes of one item carry the same fence;
* a holder that overstayed writes nothing: its guarded transaction, sent after its own clock
  passed its expiry, is refused;
* an intruder renews nothing: a renewal under another holder's fence is refused;
* a lease is not taken at its holder's expiry instant (a lease is live while ``now`` is not past
  its expiry), unless the holder had released it before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import OK, Op
from sim.ddb import Awaited, Stats, create_table
from sim.model import Model
from sim.scheduler import Task
from sim.workloads import Blocking, Recorder, settled
from turnstile_ddb import aio, codec, errors, lease, retry

LEASES_TABLE = "sim-edges"
FENCED_TABLE = "sim-edges-fenced"
PATTERN = "edges"
RESOURCES = ("x", "y")
TTL_MS = 400
REFUSED = (errors.Refused, errors.Retryable, retry.RetriesExhausted, lease.StaleFence)


@dataclass
class Edges:
    rounds: int = 3
    driver: str = "sync"

    def setup(self, client: Any) -> None:
        create_table(client, LEASES_TABLE, "resource")
        create_table(client, FENCED_TABLE, "id")

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        """One client, written once as a coroutine, through either driver."""
        fenced: Any
        if self.driver == "sync":

            def leases(clock: Callable[[], float], task: Task) -> Any:
                backoff = task.backoff(attempts=3)
                return Blocking(lease.Leases(client, LEASES_TABLE, backoff=backoff, clock=clock))

            fenced = Blocking(_FencedSync(client))
        else:
            awaited = Awaited(client)

            def leases(clock: Callable[[], float], task: Task) -> Any:
                backoff = task.backoff(attempts=3)
                return aio.lease.Leases(awaited, LEASES_TABLE, backoff=backoff, clock=clock)

            fenced = _FencedAsync(awaited)
        return lambda task: asyncio.run(self._rounds(recorder, task, leases, fenced))

    async def _rounds(
        self, recorder: Recorder, task: Task, leases: Callable[..., Any], fenced: Any
    ) -> None:
        mine = leases(task.clock, task)
        for number in range(self.rounds):
            resource = task.rng.choice(RESOURCES)
            owner = f"{task.name}.{number}"
            before = task.clock()
            op = recorder.invoke(PATTERN, task.name, "acquire", resource=resource, before=before)
            held = await settled(recorder, op, mine.acquire(resource, owner, TTL_MS), _complete)
            if isinstance(held, lease.Lease):
                await self._hold(recorder, task, mine, fenced, held)
            elif isinstance(op.value, dict) and "holder" in op.value:
                await self._turn(recorder, task, leases, op.value["holder"], owner)
            task.sleep(task.rng.uniform(0.0, TTL_MS / 1000))

    async def _hold(
        self, recorder: Recorder, task: Task, mine: Any, fenced: Any, held: lease.Lease
    ) -> None:
        args = {"resource": held.resource, "fence": held.fence}
        for _ in range(2 if task.rng.random() < 0.4 else 1):
            op = recorder.invoke(PATTERN, task.name, "fenced", **args)
            await settled(recorder, op, fenced.update(task, held), _complete)
        overstay = task.rng.random() < 0.5
        if overstay:
            task.sleep((held.expires_at_ms / 1000 - task.clock()) + task.rng.uniform(0.001, 0.05))
        put = {
            "Put": {
                "TableName": FENCED_TABLE,
                "Item": codec.encode_item({"id": f"{held.resource}.{held.fence}.written"}),
            }
        }
        late = task.clock() > held.expires_at_ms / 1000
        op = recorder.invoke(PATTERN, task.name, "transact", late=late, **args)
        await settled(recorder, op, mine.transact(held, [put]), _complete)
        op = recorder.invoke(PATTERN, task.name, "release", **args)
        await settled(recorder, op, mine.release(held), _complete)

    async def _turn(
        self,
        recorder: Recorder,
        task: Task,
        leases: Callable[..., Any],
        holder: dict[str, Any],
        owner: str,
    ) -> None:
        """Against the holder a refusal named: renew under its fence, or take it at its expiry."""
        resource, fence, expires_ms = holder["resource"], holder["fence"], holder["expires_ms"]
        args = {"resource": resource, "fence": fence}
        if task.rng.random() < 0.5:
            mine = leases(task.clock, task)
            forged = lease.Lease(resource, owner, fence, expires_ms, expires_ms - TTL_MS)
            op = recorder.invoke(PATTERN, task.name, "intrude", **args)
            await settled(recorder, op, mine.renew(forged, TTL_MS), _complete)
            return
        at_expiry = leases(lambda: (expires_ms + 0.5) / 1000, task)  # reads expires_ms exactly
        op = recorder.invoke(PATTERN, task.name, "at-expiry", **args)
        await settled(recorder, op, at_expiry.acquire(resource, owner, TTL_MS), _complete)

    def final(self, real: Any) -> dict[str, Any]:
        rows: dict[str, Any] = {}
        for table in (LEASES_TABLE, FENCED_TABLE):
            for raw in real.scan(TableName=table)["Items"]:
                item = codec.decode_item(raw) or {}
                name = str(item.get("resource", item.get("id")))
                rows[f"{table}/{name}"] = {k: str(v) for k, v in sorted(item.items())}
        return rows

    def check(self, recorder: Recorder, real: Any) -> Report:
        report = Report()
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        done = [op for op in ops if op.type == OK]
        for op in done:
            if op.f == "acquire":
                asked = int(op.args["before"] * 1000) + TTL_MS  # as the library reads its clock
                report.expect(
                    op.value["expires_ms"] >= asked,
                    PATTERN,
                    "a lease lasts what was asked",
                    f"{op.process}: expires {op.value['expires_ms']}, asked {asked}",
                    [op],
                )
            late = op.f == "transact" and op.args["late"]
            report.expect(not late, PATTERN, "an overstayer writes nothing", op.process, [op])
            intruded = op.f == "intrude"
            report.expect(not intruded, PATTERN, "an intruder renews nothing", op.process, [op])
        fenced = [(op.args["resource"], op.args["fence"]) for op in done if op.f == "fenced"]
        report.expect(
            len(fenced) == len(set(fenced)),
            PATTERN,
            "a fence is written once",
            f"{sorted(fenced)}",
        )
        report.merge(_at_expiry(ops))
        return report


def _at_expiry(ops: list[Op]) -> Report:
    """No lease taken at its holder's expiry instant while that holder still had it: a
    successor's acquisition at the instant, taking the very next fence, is acknowledged only if
    the holder's release was sent before. Any release counts, a refused one too: its first
    attempt may have landed and its reply been lost, and the resend then found the lease taken."""
    report = Report()
    for op in ops:
        if op.f != "at-expiry" or op.type != OK or op.value["fence"] != op.args["fence"] + 1:
            continue
        released = [
            r
            for r in ops
            if r.f == "release"
            and r.args == {"resource": op.args["resource"], "fence": op.args["fence"]}
            and r.invoked < op.completed
        ]
        report.expect(
            bool(released),
            PATTERN,
            "a lease is not taken at its expiry instant",
            f"{op.process} took {op.args['resource']} at fence {op.args['fence']}'s expiry",
            [op],
        )
    return report


class _FencedSync:
    def __init__(self, client: Any) -> None:
        self.client = client

    def update(self, task: Task, held: lease.Lease) -> Any:
        return lease.fenced_update(self.client, **_fenced_arguments(task, held))


class _FencedAsync:
    def __init__(self, client: Any) -> None:
        self.client = client

    async def update(self, task: Task, held: lease.Lease) -> Any:
        return await aio.lease.fenced_update(self.client, **_fenced_arguments(task, held))


def _fenced_arguments(task: Task, held: lease.Lease) -> dict[str, Any]:
    return {
        "table": FENCED_TABLE,
        "key": {"id": held.resource},
        "fence": held.fence,
        "changes": {"owner": held.owner},
        "backoff": task.backoff(attempts=3),
    }


def _complete(recorder: Recorder, op: Op, exc: BaseException | None, answer: Any = None) -> None:
    shown: Any = None
    if isinstance(answer, lease.Lease):
        shown = {"fence": answer.fence, "expires_ms": answer.expires_at_ms}
    elif isinstance(exc, lease.Held):
        holder = {"resource": exc.resource, "fence": exc.fence, "expires_ms": exc.expires_at_ms}
        recorder.outcome(op, exc, None, REFUSED)
        op.value = {**op.value, "holder": holder}
        return
    recorder.outcome(op, exc, shown, REFUSED)


def run(seed: int, driver: str, *, clients: int = 4, rounds: int = 3) -> tuple[str, Report]:
    """One seed of the edges workload alone, through ``driver``: its history and its report."""
    from sim.run import run_alone

    workload = Edges(rounds=rounds, driver=driver)

    def check(recorder: Recorder, stats: Stats, real: Model) -> Report:
        return workload.check(recorder, real)

    return run_alone(seed, workload, "edges", check, clients=clients)
