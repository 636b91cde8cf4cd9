"""The reserving workload, run through either front door: ``claims`` or ``aio.claims``.

Each client reserves one to three units of one sku spread over four small pools (so a
reservation often reads several pools), then confirms, releases, or lets the hold lapse. Written
once (:class:`Reserving`), it runs the synchronous front door with the
:class:`sim.ddb.SimClient`, or the asyncio one on an event loop of its own with the client
awaited (:class:`sim.ddb.Awaited`). The asyncio front door reads ahead (after a short first
pool, the other pools in one Gather, one Query each), the synchronous one pool by pool; so the
drivers are compared on one protocol at a time: ``sync-ahead`` drives the asyncio front door's
protocol with the synchronous driver, ``async-in-order`` the synchronous front door's with the
asyncio driver (tests/sim/test_reserving_drivers_agree.py).

Judged by the table and the history: every acknowledged reservation holds exactly the units it
asked for, a confirm answered while its hold was still live (by more than any clock skew) is
never refused, no unit is in two acknowledged sales, every acknowledged sale's units are sold to
it, and every sold unit belongs to a sale that was acknowledged or whose outcome is unknown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import FAIL, OK, UNKNOWN
from sim.ddb import Awaited, Faults, Stats
from sim.model import Model
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import _core, aio, claims, codec, errors, retry

TABLE = "sim-reserving"
PATTERN = "reserving"
UNITS = claims.UnitTable(TABLE, "claimable", ("sku", "sk"))
POOLS = [f"s#{n}" for n in range(4)]
REFUSED = (errors.Refused, retry.RetriesExhausted, claims.Unsettled)
DRIVERS = ("sync", "async", "sync-ahead", "async-in-order")
# The default faults but crashes. A client that dies inside a Gather is where the drivers part:
# the sync driver sends nothing after the crash, while asyncio.gather has already started the
# other requests (in the simulator they then run one after another, each handing the baton),
# so a seed with such a crash gives two histories by design, not by drift.
NO_CRASH = Faults(crash=0.0)
SKEW_MS = 1_000  # more than the clients' clocks differ (sim.run: at most 0.2 s each way)


def create_units(client: Any, units: claims.UnitTable, pools: Sequence[str], each: int) -> None:
    """``units``' table with its claimable-at index, and ``each`` free units in every pool (unit
    ``n`` of pool ``p`` is ``{"sku": "s", "sk": "p/n"}``, spread evenly over claimable-at)."""
    strings = ["sku", "sk", units.pool_attr]
    attributes = [{"AttributeName": name, "AttributeType": "S"} for name in strings]
    attributes.append({"AttributeName": units.claimable_at_attr, "AttributeType": "N"})
    index = {
        "IndexName": units.index,
        "KeySchema": [
            {"AttributeName": units.pool_attr, "KeyType": "HASH"},
            {"AttributeName": units.claimable_at_attr, "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }
    client.create_table(
        TableName=units.table,
        KeySchema=[
            {"AttributeName": "sku", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=attributes,
        GlobalSecondaryIndexes=[index],
        BillingMode="PAY_PER_REQUEST",
    )
    for pool in pools:
        for n in range(each):
            at = (n * 2**20) // each + 1
            unit = claims.new_unit(units, {"sku": "s", "sk": f"{pool}/{n}"}, pool, at)
            client.put_item(TableName=units.table, Item=codec.encode_item(unit))


@dataclass
class Reserving:
    operations: int = 5
    driver: str = "sync"
    each: int = 2  # units in each pool

    def setup(self, client: Any) -> None:
        create_units(client, UNITS, POOLS, self.each)

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        if self.driver in ("sync", "sync-ahead"):
            return lambda task: self._run(recorder, task, client)
        awaited = Awaited(client)
        return lambda task: asyncio.run(self._run_async(recorder, task, awaited))

    def _plan(self, task: Task, number: int) -> tuple[dict[str, Any], str]:
        """The next reservation's arguments and what follows it (the same draws either way)."""
        now_ms = int(task.clock() * 1000)
        name = f"{task.name}-{number}"
        hints = claims.PoolHints(clock=task.clock)  # its throttle and miss windows on sim time
        options = claims.ReserveOptions(
            backoff=task.backoff(attempts=4), rand=task.rng.random, hints=hints
        )
        arguments = {
            "pools": POOLS,
            "quantity": task.rng.randint(1, 3),
            "holder": lambda lead: name,
            "now_ms": now_ms,
            "until_ms": now_ms + 5_000,
            "options": options,
        }
        roll = task.rng.random()
        then = "confirm" if roll < 0.5 else "release" if roll < 0.8 else "lapse"
        return arguments, then

    def _settle(
        self, task: Task, then: str, claimed: claims.Claimed, until_ms: int
    ) -> tuple[Any, dict[str, Any]]:
        """After a while (some holds lapse meanwhile): the call settling ``claimed`` and its
        arguments."""
        task.sleep(task.rng.uniform(0, 7))
        keys, backoff = claimed.keys, task.backoff(attempts=4)
        now_ms = int(task.clock() * 1000)
        kwargs = {"keys": keys, "holder": claimed.holder, "backoff": backoff}
        if then == "confirm":
            return claims.confirm, {**kwargs, "now_ms": now_ms}
        return claims.release, {**kwargs, "rand": task.rng.random}

    def _run(self, recorder: Recorder, task: Task, client: Any) -> None:
        for number in range(self.operations):
            arguments, then = self._plan(task, number)
            op = recorder.invoke(PATTERN, task.name, "reserve", quantity=arguments["quantity"])
            try:
                if self.driver == "sync":
                    claimed = claims.reserve(client, UNITS, **arguments)
                else:
                    claimed = _core.run(client, _protocol(arguments, read_ahead=True))
            except BaseException as exc:  # noqa: BLE001 - recorded, Crashed raised again
                _complete(recorder, op, exc)
                continue
            _complete(recorder, op, None, claimed)
            if then != "lapse":
                until_ms = arguments["until_ms"]
                settle, kwargs = self._settle(task, then, claimed, until_ms)
                op = recorder.invoke(
                    PATTERN, task.name, then, holder=claimed.holder, until=until_ms
                )
                try:
                    settle(client, UNITS, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - recorded, Crashed raised again
                    _complete(recorder, op, exc)
                    continue
                _complete(recorder, op, None, claimed if then == "confirm" else None)

    async def _run_async(self, recorder: Recorder, task: Task, client: Awaited) -> None:
        for number in range(self.operations):
            arguments, then = self._plan(task, number)
            op = recorder.invoke(PATTERN, task.name, "reserve", quantity=arguments["quantity"])
            try:
                if self.driver == "async":
                    claimed = await aio.claims.reserve(client, UNITS, **arguments)
                else:
                    claimed = await _core.run_async(client, _protocol(arguments, read_ahead=False))
            except BaseException as exc:  # noqa: BLE001 - recorded, Crashed raised again
                _complete(recorder, op, exc)
                continue
            _complete(recorder, op, None, claimed)
            if then != "lapse":
                until_ms = arguments["until_ms"]
                settle, kwargs = self._settle(task, then, claimed, until_ms)
                op = recorder.invoke(
                    PATTERN, task.name, then, holder=claimed.holder, until=until_ms
                )
                try:
                    await getattr(aio.claims, settle.__name__)(client, UNITS, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - recorded, Crashed raised again
                    _complete(recorder, op, exc)
                    continue
                _complete(recorder, op, None, claimed if then == "confirm" else None)

    def final(self, real: Any) -> dict[str, Any]:
        items = [codec.decode_item(i) or {} for i in real.scan(TableName=TABLE)["Items"]]
        return {str(i["sk"]): {k: str(v) for k, v in sorted(i.items())} for i in items}

    def check(self, recorder: Recorder, real: Any) -> Report:
        report = Report()
        units = self.final(real)
        mine = [op for op in recorder.ops if op.pattern == PATTERN]
        for op in mine:
            if op.f == "reserve" and op.type == OK:
                got = op.value["units"]
                wanted = op.args["quantity"]
                report.expect(
                    len(set(got)) == len(got) == wanted, PATTERN, "held as asked", f"{op.value}"
                )
        sales = [op for op in mine if op.f == "confirm" and op.type == OK]
        sold_to = {}
        for op in sales:
            for unit in op.value["units"]:
                report.expect(unit not in sold_to, PATTERN, "no unit sold twice", f"{unit}")
                sold_to[unit] = op.value["holder"]
                row = units[unit]
                report.expect(
                    row.get("status") == claims.SOLD and row.get("holder") == op.value["holder"],
                    PATTERN,
                    "a sale's units stay sold to it",
                    f"{unit} {row}",
                )
        for op in mine:
            live = op.f == "confirm" and op.completed_ms + SKEW_MS < op.args["until"]
            if live and op.type == FAIL:
                report.expect(
                    op.value != {"error": "HoldLost"}, PATTERN, "a live hold is sold", f"{op}"
                )
        unknown = {op.args["holder"] for op in mine if op.f == "confirm" and op.type == UNKNOWN}
        for unit, row in units.items():
            if row.get("status") == claims.SOLD:
                report.expect(
                    row.get("holder") in set(sold_to.values()) | unknown,
                    PATTERN,
                    "every sold unit was sold by an answered (or unknown) confirm",
                    f"{unit} {row}",
                )
        return report


def _protocol(arguments: Mapping[str, Any], *, read_ahead: bool) -> _core.Steps[claims.Claimed]:
    """:func:`turnstile_ddb.claims.reserve`'s protocol for ``arguments`` (its keywords)."""
    a = arguments
    hold = claims._Hold(a["holder"], a["now_ms"], a["until_ms"], None)
    return claims.reserve_protocol(
        UNITS, a["pools"], a["quantity"], hold, a["options"], read_ahead=read_ahead
    )


def _complete(recorder: Recorder, op: Any, exc: BaseException | None, answer: Any = None) -> None:
    if exc is None:
        shown = None
        if isinstance(answer, claims.Claimed):
            shown = {"units": [str(k["sk"]) for k in answer.keys], "holder": answer.holder}
        recorder.complete(op, OK, shown)
    elif isinstance(exc, REFUSED):
        recorder.complete(op, FAIL, {"error": type(exc).__name__})
    elif isinstance(exc, errors.OutcomeUnknown | Crashed):
        recorder.complete(op, UNKNOWN)
        if isinstance(exc, Crashed):
            raise exc
    else:
        raise exc


def run(seed: int, driver: str, *, clients: int = 4, operations: int = 5) -> tuple[str, Report]:
    """One seed of the reserving workload alone, through ``driver`` (one of :data:`DRIVERS`):
    its history and its report."""
    from sim.run import run_alone

    workload = Reserving(operations=operations, driver=driver)

    def check(recorder: Recorder, stats: Stats, real: Model) -> Report:
        return workload.check(recorder, real)

    return run_alone(seed, workload, PATTERN, check, clients=clients, faults=NO_CRASH)


def run_pair(drivers: Mapping[str, str], seed: int, driver: str) -> tuple[str, Report]:
    """:func:`run` with ``driver`` ("sync" or "async") mapped to one of :data:`DRIVERS`, so that
    ``sim.drift`` compares the two drivers on one protocol."""
    return run(seed, drivers[driver])
