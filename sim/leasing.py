"""The lease workload, run through either front door: ``lease.Leases`` or ``aio.lease.Leases``
(and, ``queued``, its acquisitions through ``lease_queue.LeaseQueue`` or
``aio.lease_queue.LeaseQueue``, the waiters' naps and deadlines on the client's virtual time).

Each client, a few times over, waits for one of two leases (``acquire_wait``), adds one to that
resource's counter through the guarded transaction (``transact``), records its fence on a
fenced item (``fenced_update``), sometimes renews, and releases. Written once (:class:`Leasing`),
it runs the synchronous front door with the :class:`sim.ddb.SimClient`, or the asyncio one on an
event loop of its own, in its own thread, with the client awaited (:class:`sim.ddb.Awaited`):
one seed gives one history through both drivers (tests/sim/test_drivers_agree.py).

Judged by the fences: no two acknowledged acquisitions of a resource share a fence, the lease
item's fence counts every acquisition that landed, and no acquisition is acknowledged while the
previous holder still held (had neither started its release nor run out, clock skew allowed);
each counter counts the acknowledged guarded writes, give or take those whose outcome is
unknown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from chaos.checkers import Report
from chaos.history import FAIL, OK, UNKNOWN
from sim.ddb import Awaited, create_table
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import aio, codec, errors, lease, lease_queue, retry

LEASES_TABLE = "sim-leasing"
COUNTERS_TABLE = "sim-leasing-counters"
PATTERN = "leasing"
RESOURCES = ("x", "y")
REFUSED = (errors.Refused, retry.RetriesExhausted, lease.Held, lease.StaleFence)


@dataclass
class Leasing:
    rounds: int = 3
    driver: str = "sync"
    queued: bool = False  # acquire through the FIFO queue, not acquire_wait

    def setup(self, client: Any) -> None:
        create_table(client, LEASES_TABLE, "resource")
        create_table(client, COUNTERS_TABLE, "id")

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        if self.driver == "sync":
            return lambda task: _drive(recorder, self._rounds(recorder, task, client, lease.Leases))
        awaited = Awaited(client)

        def run(task: Task) -> None:
            steps = self._rounds(recorder, task, awaited, aio.lease.Leases)
            asyncio.run(_drive_async(recorder, steps))

        return run

    def _rounds(self, recorder: Recorder, task: Task, client: Any, kind: Callable[..., Any]) -> Any:
        """The client's operations as a generator of (op, what to call): the calls answer
        directly (sync) or with an awaitable (async); either driver runs the same plan."""
        leases = kind(client, LEASES_TABLE, backoff=task.backoff(attempts=4), clock=task.clock)
        queue = _queue(kind)(leases, sleep=task.sleep, monotonic=task.clock)
        for number in range(self.rounds):
            resource = task.rng.choice(RESOURCES)
            owner = f"{task.name}.{number}"
            waits = task.backoff(attempts=50, base=0.05, cap=0.5)
            op = recorder.invoke(PATTERN, task.name, "acquire", resource=resource, owner=owner)
            acquire = partial(
                leases.acquire_wait, resource, owner, 2_000, wait_ms=3_000, waits=waits
            )
            if self.queued:
                acquire = partial(queue.acquire, resource, owner, wait_ms=3_000, ttl_ms=2_000)
            held = yield op, acquire
            if held is None:
                continue
            add = {
                "Update": {
                    "TableName": COUNTERS_TABLE,
                    "Key": codec.encode_item({"id": resource}),
                    "UpdateExpression": "ADD #n :one",
                    "ExpressionAttributeNames": {"#n": "n"},
                    "ExpressionAttributeValues": codec.values(one=1),
                }
            }
            op = recorder.invoke(PATTERN, task.name, "transact", resource=resource, owner=owner)
            yield op, partial(leases.transact, held, [add])
            fenced = _fenced_update(client, kind)
            op = recorder.invoke(PATTERN, task.name, "fenced", resource=resource, owner=owner)
            yield (
                op,
                partial(
                    fenced,
                    table=COUNTERS_TABLE,
                    key={"id": f"{resource}.fenced"},
                    fence=held.fence,
                    changes={"owner": owner},
                    backoff=task.backoff(attempts=4),
                ),
            )
            if task.rng.random() < 0.5:
                op = recorder.invoke(PATTERN, task.name, "renew", resource=resource, owner=owner)
                renewed = yield op, partial(leases.renew, held, 2_000)
                held = renewed or held
            op = recorder.invoke(PATTERN, task.name, "release", resource=resource, owner=owner)
            yield op, partial(leases.release, held)

    def check(self, recorder: Recorder, stats: Any, real: Any) -> Report:
        report = Report()
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        for resource in RESOURCES:
            mine = [op for op in ops if op.args["resource"] == resource]
            taken = [op for op in mine if op.f == "acquire" and op.type == OK]
            fences = [op.value["fence"] for op in taken]
            report.expect(
                len(fences) == len(set(fences)), PATTERN, "fences unique", f"{resource}", taken
            )
            landed = [op for op in mine if op.f == "acquire" and op.type != FAIL]
            item = _get(real, LEASES_TABLE, {"resource": resource})
            report.expect(
                len(taken) <= int(item.get("fence", 0)) <= len(landed),
                PATTERN,
                "every acquisition counted",
                f"{resource}: fence {item.get('fence')}, {len(taken)}..{len(landed)}",
            )
            for earlier, later in _handovers(mine):
                report.expect(
                    later.completed >= _held_until(mine, earlier),
                    PATTERN,
                    "one holder at a time",
                    f"{resource}: fence {later.value['fence']} taken while "
                    f"{earlier.args['owner']} (fence {earlier.value['fence']}) held it",
                    [earlier, later],
                )
            writes = [op for op in mine if op.f == "transact"]
            sure = sum(1 for op in writes if op.type == OK)
            unsure = sum(1 for op in writes if op.type == UNKNOWN)
            count = int(_get(real, COUNTERS_TABLE, {"id": resource}).get("n", 0))
            report.expect(
                sure <= count <= sure + unsure,
                PATTERN,
                "guarded writes counted",
                f"{resource}: {count} not in {sure}..{sure + unsure}",
            )
        return report

    def final(self, real: Any) -> dict[str, Any]:
        return {
            name: sorted(
                map(str, (codec.decode_item(i) for i in real.scan(TableName=name)["Items"]))
            )
            for name in (LEASES_TABLE, COUNTERS_TABLE)
        }


# Clients' clocks differ by less than this (each is off by up to 0.2 s: sim.leasing.run).
SKEW = 0.4


def _handovers(ops: list[Any]) -> list[tuple[Any, Any]]:
    """Acknowledged acquisitions of one resource, each with the one of the next fence."""
    taken = {op.value["fence"]: op for op in ops if op.f == "acquire" and op.type == OK}
    return [(taken[f], taken[f + 1]) for f in sorted(taken) if f + 1 in taken]


def _held_until(ops: list[Any], acquired: Any) -> float:
    """The earliest a successor may take the lease ``acquired`` (virtual seconds): when its
    holder started releasing it, or its expiry less the clock skew, acknowledged renewals
    counted. A renewal whose outcome is unknown is not: it may not have landed, and then the
    lease ended at its last known expiry (a successor's take that the history cannot show
    wrong is not judged wrong)."""
    owner = acquired.args["owner"]
    expires = acquired.value["expires"]
    for op in ops:
        if op.args["owner"] == owner and op.f == "renew" and op.type == OK:
            expires = max(expires, op.value["expires"])
    released = [op.invoked for op in ops if op.args["owner"] == owner and op.f == "release"]
    return min([expires - SKEW, *released])


def _get(real: Any, table: str, key: dict[str, Any]) -> dict[str, Any]:
    raw = real.get_item(TableName=table, Key=codec.encode_item(key)).get("Item")
    return codec.decode_item(raw) or {}


def _queue(kind: Callable[..., Any]) -> Callable[..., Any]:
    return lease_queue.LeaseQueue if kind is lease.Leases else aio.lease_queue.LeaseQueue


def _fenced_update(client: Any, kind: Callable[..., Any]) -> Callable[..., Any]:
    update = lease.fenced_update if kind is lease.Leases else aio.lease.fenced_update
    return lambda **arguments: update(client, **arguments)


def _drive(recorder: Recorder, steps: Any) -> None:
    answer: Any = None
    while True:
        try:
            op, call = steps.send(answer)
        except StopIteration:
            return
        answer = _settle(recorder, op, call)


async def _drive_async(recorder: Recorder, steps: Any) -> None:
    answer: Any = None
    while True:
        try:
            op, call = steps.send(answer)
        except StopIteration:
            return

        async def awaited(call: Callable[[], Awaitable[Any]] = call) -> Any:
            return await call()

        answer = await _settle_async(recorder, op, awaited)


def _settle(recorder: Recorder, op: Any, call: Callable[[], Any]) -> Any:
    try:
        answer = call()
    except BaseException as exc:  # noqa: BLE001 - recorded; a crash is raised again
        return _failed(recorder, op, exc)
    return _answered(recorder, op, answer)


async def _settle_async(recorder: Recorder, op: Any, call: Callable[[], Awaitable[Any]]) -> Any:
    try:
        answer = await call()
    except BaseException as exc:  # noqa: BLE001 - recorded; a crash is raised again
        return _failed(recorder, op, exc)
    return _answered(recorder, op, answer)


def _answered(recorder: Recorder, op: Any, answer: Any) -> Any:
    shown = None
    if isinstance(answer, lease.Lease):
        shown = {"fence": answer.fence, "expires": answer.expires_at_ms / 1000}
    recorder.complete(op, OK, shown)
    return answer


def _failed(recorder: Recorder, op: Any, exc: BaseException) -> None:
    if isinstance(exc, REFUSED):
        recorder.complete(op, FAIL, {"error": type(exc).__name__})
        return None
    if isinstance(exc, errors.OutcomeUnknown | Crashed):
        recorder.complete(op, UNKNOWN)
        if isinstance(exc, Crashed):
            raise exc
        return None
    raise exc


def run(
    seed: int, driver: str, *, clients: int = 4, rounds: int = 3, queued: bool = False
) -> tuple[str, Report]:
    """One seed of the lease workload alone, through ``driver`` (``queued``: its acquisitions
    through the lease queue): its history and its report."""
    from sim.run import run_alone

    workload = Leasing(rounds=rounds, driver=driver, queued=queued)
    return run_alone(seed, workload, "lease", workload.check, clients=clients)
