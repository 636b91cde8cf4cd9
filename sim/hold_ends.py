"""The ends of a reservation's hold, run through either front door: ``claims`` or ``aio.claims``.

The reserving workload (:mod:`sim.reserving`) confirms at random moments, seconds from a hold's
end, and never reads its clock at the very millisecond a hold ends; its clients do not pass a
clock to ``reserve`` at all. The boundaries of a hold's end are reached on purpose by the
synchronous simulator's reservation edges (:mod:`sim.reservation_edges`, through the service's
``Inventory``), which only ever calls the synchronous front door. This workload is their twin
for the library's two front doors: each client runs short *episodes*, every one on a pool of 3
units of its own, reading a :class:`sim.boundary.BoundaryClock` (passed to ``reserve`` as
``ReserveOptions.clock_ms``, and read for each confirm's ``now_ms``):

* **confirm at the end**: reserve 1 or 2 units, then confirm with ``now_ms`` read when the
  client's clock shows exactly the hold's end (``until_ms``): a hold at its end has ended, so the
  confirm is refused (``HoldLost``);
* **claim after the end**: reserve 1 to 3 units, the client stalling just before its claim's
  write until after the hold's end (a process paused between its read and its write): the answer
  must not be a hold that has already ended; the library gives the units back and answers
  ``ClaimHoldLapsed``;
* **answered at the end**: reserve 1 to 3 units, the library's first clock reading after its
  claim's write showing exactly the end that write recorded (``seek_written``): a hold ending at
  that very millisecond has ended (``clock >= until``), so it is given back as well.

Written once as a coroutine, like :mod:`sim.edges`: the synchronous front door's calls are made
where the asyncio one's are awaited, so one seed gives one history through both drivers (with
one pool per reservation, the asyncio front door's read-ahead never starts: one protocol).
Crashes are off (:data:`sim.reserving.NO_CRASH`); the other faults are on.

Judged from the history by :func:`sim.checks.late_confirms` (an acknowledged confirm sent a
``now`` before its hold's end), :func:`sim.checks.live_on_arrival` (an acknowledged reservation's
hold was still live on its client's clock when the answer came) and, from the table, every sold
unit was sold by an acknowledged (or unknown) confirm of its holder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.checkers import Report
from chaos.history import FAIL, OK, UNKNOWN, Op
from sim import checks
from sim.boundary import BoundaryClock, Noting, Stalling
from sim.ddb import Awaited, Stats
from sim.model import Model
from sim.reserving import NO_CRASH, create_units
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import aio, claims, codec, errors, retry

TABLE = "sim-hold-ends"
PATTERN = "hold-ends"
UNITS = claims.UnitTable(TABLE, "claimable", ("sku", "sk"))
EACH = 3  # units in each episode's pool
HOLD_MS = 300
EPISODES = ("confirm-at-end", "claim-after-end", "answered-at-end")
REFUSED = (errors.Refused, retry.RetriesExhausted, claims.Unsettled)


class _Door:
    """One client's reserve and confirm through one front door, on its boundary clock."""

    def __init__(self, task: Task, client: Any, driver: str) -> None:
        self.task = task
        self.clock = BoundaryClock(task)
        self.stalling: Any = Stalling(Noting(client, self.clock), task)
        self.driver = driver
        self.awaited = Awaited(self.stalling)

    def clock_ms(self) -> int:
        return int(self.clock() * 1000)

    async def reserve(self, **arguments: Any) -> claims.Claimed:
        if self.driver == "sync":
            return claims.reserve(self.stalling, UNITS, **arguments)
        return await aio.claims.reserve(self.awaited, UNITS, **arguments)

    async def confirm(self, **arguments: Any) -> None:
        if self.driver == "sync":
            claims.confirm(self.stalling, UNITS, **arguments)
        else:
            await aio.claims.confirm(self.awaited, UNITS, **arguments)

    def reset(self, op: Op | None = None) -> None:
        """Disarm the clock and the stall; ``op`` records the first armed millisecond and the
        reading it gave (``end``, ``read``: equal unless another client carried time past it)."""
        if op is not None and self.clock.landed:
            op.args["end"], op.args["read"] = self.clock.landed[0]
        self.clock.reset()
        self.stalling.seconds = None


@dataclass
class HoldEnds:
    episodes: int = 3  # per client
    clients: int = 2
    driver: str = "sync"
    spawned: list[str] = field(default_factory=list)

    def pools(self) -> list[str]:
        return [f"h{n}" for n in range(self.clients * self.episodes)]

    def setup(self, client: Any) -> None:
        create_units(client, UNITS, self.pools(), EACH)

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        number = len(self.spawned)
        mine = self.pools()[number * self.episodes : (number + 1) * self.episodes]
        self.spawned.append(str(number))

        def run(task: Task) -> None:
            asyncio.run(self._episodes(recorder, _Door(task, client, self.driver), mine))

        return run

    async def _episodes(self, recorder: Recorder, door: _Door, pools: list[str]) -> None:
        task = door.task
        start = task.rng.randrange(len(EPISODES))
        for n, pool in enumerate(pools):
            episode = EPISODES[(start + n) % len(EPISODES)]
            if episode == "confirm-at-end":
                await self._confirm_at_end(recorder, door, pool)
            elif episode == "claim-after-end":
                stall = HOLD_MS / 1000 + task.rng.uniform(0.05, 0.3)
                await self._reserve(recorder, door, pool, task.rng.randint(1, EACH), stall=stall)
            else:
                quantity = task.rng.randint(1, EACH)
                await self._reserve(recorder, door, pool, quantity, seek_end=True)

    async def _reserve(
        self,
        recorder: Recorder,
        door: _Door,
        pool: str,
        quantity: int,
        *,
        stall: float | None = None,
        seek_end: bool = False,
    ) -> tuple[Op, claims.Claimed | None]:
        """Reserve ``quantity`` units of ``pool`` for :data:`HOLD_MS`; ``stall``: the claim's
        write first waits that long; ``seek_end``: the first clock reading after the write
        waits until the end it recorded. Records when the answer came (``answered``)."""
        task = door.task
        name = f"{task.name}-{pool}"
        now_ms = door.clock_ms()
        until_ms = now_ms + HOLD_MS
        options = claims.ReserveOptions(
            backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
            rand=task.rng.random,
            hints=claims.PoolHints(clock=task.clock),
            clock_ms=door.clock_ms,
        )
        op = recorder.invoke(PATTERN, task.name, "reserve", sku=pool, quantity=quantity)
        door.reset()
        door.stalling.seconds = stall
        door.clock.seek_written = seek_end
        try:
            claimed = await door.reserve(
                pools=[pool],
                quantity=quantity,
                holder=lambda lead: name,
                now_ms=now_ms,
                until_ms=until_ms,
                options=options,
            )
        except BaseException as exc:  # noqa: BLE001 - recorded, Crashed raised again
            self._failed(recorder, op, door, exc)
            return op, None
        door.reset(op)
        op.args["answered"] = int(task.clock() * 1000)
        units = [str(key["sk"]) for key in claimed.keys]
        recorder.complete(
            op, OK, {"reservationId": claimed.holder, "units": units, "expiresAt": until_ms}
        )
        return op, claimed

    @staticmethod
    def _failed(recorder: Recorder, op: Op, door: _Door, exc: BaseException) -> None:
        door.reset(op)
        op.args["answered"] = int(door.task.clock() * 1000)
        if isinstance(exc, claims.ClaimHoldLapsed) and not exc.given_back:
            recorder.complete(op, UNKNOWN)  # its units may still name it
            return
        recorder.outcome(op, exc, None, REFUSED)
        if isinstance(exc, Crashed):
            raise exc

    async def _confirm_at_end(self, recorder: Recorder, door: _Door, pool: str) -> None:
        """Reserve 1 or 2 units, then confirm with ``now_ms`` read at exactly the hold's end."""
        task = door.task
        held, claimed = await self._reserve(recorder, door, pool, task.rng.randint(1, 2))
        if claimed is None:
            return
        until = int(held.value["expiresAt"])
        task.sleep(max(0.0, until / 1000 - 0.1 - task.clock()))
        door.clock.arm(until)
        now_ms = door.clock_ms()
        op = recorder.invoke(
            PATTERN, task.name, "confirm", sku=pool, reservation=claimed.holder, now=now_ms
        )
        try:
            await door.confirm(
                keys=claimed.keys,
                holder=claimed.holder,
                now_ms=now_ms,
                backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
            )
        except BaseException as exc:  # noqa: BLE001 - recorded, Crashed raised again
            self._failed(recorder, op, door, exc)
            return
        door.reset(op)
        recorder.complete(op, OK, {"units": [str(key["sk"]) for key in claimed.keys]})

    def final(self, real: Any) -> dict[str, Any]:
        items = [codec.decode_item(i) or {} for i in real.scan(TableName=TABLE)["Items"]]
        return {str(i["sk"]): {k: str(v) for k, v in sorted(i.items())} for i in items}

    def check(self, recorder: Recorder, real: Any) -> Report:
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        report = checks.late_confirms(ops)
        report.merge(checks.live_on_arrival(ops))
        confirmed = {op.args["reservation"] for op in ops if op.f == "confirm" and op.type != FAIL}
        for unit, row in self.final(real).items():
            if row.get("status") == claims.SOLD:
                report.expect(
                    row.get("holder") in confirmed,
                    PATTERN,
                    "every sold unit was sold by an answered (or unknown) confirm",
                    f"{unit} {row}",
                )
        return report


def run(seed: int, driver: str, *, clients: int = 2) -> tuple[str, Report]:
    """One seed of the hold-ends workload, through ``driver`` ("sync" or "async"): its history
    and its report."""
    from sim.run import run_alone

    workload = HoldEnds(clients=clients, driver=driver)

    def check(recorder: Recorder, stats: Stats, real: Model) -> Report:
        return workload.check(recorder, real)

    return run_alone(seed, workload, PATTERN, check, clients=clients, faults=NO_CRASH)
