"""The stock workload, run through either front door: ``versioned`` and ``transact`` only.

Each client sells (``decrement``), restocks (``increment``), buys through a read-decide-write
that writes an order in the same transaction (``update_versioned`` with ``also``), renames with
``bump``, and writes at a version it read (``update_if_version``), on two products. The same
client is written once (:class:`Stock`) and runs either the synchronous front doors with the
:class:`sim.ddb.SimClient` or ``turnstile_ddb.aio``'s on an event loop of its own, in its own
thread, with the client awaited (:class:`sim.ddb.Awaited`): every request is the same scheduling
point either way, so one seed gives one history through both drivers, call for call, which is
what tests/sim/test_drivers_agree.py checks (:func:`run`).

Judged by conservation: each product's final stock is its first, less the sales and orders, plus
the restocks that were acknowledged, give or take the ones whose outcome is unknown; never below
zero; one order item per acknowledged order (and at most one per unknown one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import OK, UNKNOWN
from sim import checks
from sim.ddb import Awaited, create_table
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import aio, codec, errors, retry, versioned

STOCK_TABLE = "sim-stock"
ORDERS_TABLE = "sim-stock-orders"
PATTERN = "stock"
DRIVERS = ("sync", "async")


class SoldOut(errors.Refused):
    """``decide`` found too little stock for the order."""


# What a primitive's refusal is: the op failed, nothing was written.
REFUSED = (
    errors.Refused,
    errors.NotFound,
    retry.RetriesExhausted,
    versioned.VersionConflict,
    SoldOut,
)


@dataclass
class Stock:
    products: list[tuple[str, int]]
    operations: int = 6
    driver: str = "sync"

    def setup(self, client: Any) -> None:
        create_table(client, STOCK_TABLE, "productId")
        create_table(client, ORDERS_TABLE, "orderId")
        for product, stock in self.products:
            item = {"productId": product, "stock": stock, "version": 1, "name": product}
            client.put_item(TableName=STOCK_TABLE, Item=codec.encode_item(item))

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        if self.driver == "sync":
            return lambda task: self._run(recorder, task, _sync_call(client))
        awaited = Awaited(client)

        def run(task: Task) -> None:
            async def main() -> None:
                await self._run_async(recorder, task, awaited)

            asyncio.run(main())

        return run

    def _plan(self, task: Task, number: int) -> tuple[str, dict[str, Any]]:
        """The next operation: which primitive, with what arguments (drawn from the task's rng,
        the same draws whichever driver runs it)."""
        product = task.rng.choice([name for name, _ in self.products])
        key = {"productId": product}
        backoff = task.backoff(attempts=4)
        roll = task.rng.random()
        quantity = task.rng.randint(1, 3)
        common = {"table": STOCK_TABLE, "key": key, "backoff": backoff}
        if roll < 0.35:
            return "decrement", {**common, "attr": "stock", "amount": quantity}
        if roll < 0.5:
            return "increment", {**common, "attr": "stock", "amount": quantity}
        if roll < 0.8:
            order = f"{task.name}.{number}"
            return "update_versioned", {
                **common,
                "conflicts": task.backoff(attempts=6, base=0.01, cap=0.1),
                "decide": _taking(quantity),
                "also": _ordering(order, product, quantity),
            }
        if roll < 0.9:
            return "bump", {**common, "changes": {"name": f"{product}.{task.name}.{number}"}}
        return "read-then-write", {**common, "quantity": quantity}

    def _run(self, recorder: Recorder, task: Task, call: Callable[..., Any]) -> None:
        for number in range(self.operations):
            name, arguments = self._plan(task, number)
            op = _invoked(recorder, task, name, arguments)
            try:
                if name == "read-then-write":
                    answer = _read_then_write_sync(call, arguments)
                else:
                    answer = call(name, **arguments)
            except BaseException as exc:
                _complete(recorder, op, exc)
                if isinstance(exc, Crashed):
                    raise
                continue
            _complete(recorder, op, None, answer)

    async def _run_async(self, recorder: Recorder, task: Task, client: Awaited) -> None:
        call = _async_call(client)
        for number in range(self.operations):
            name, arguments = self._plan(task, number)
            op = _invoked(recorder, task, name, arguments)
            try:
                if name == "read-then-write":
                    answer = await _read_then_write_async(call, arguments)
                else:
                    answer = await call(name, **arguments)
            except BaseException as exc:
                _complete(recorder, op, exc)
                if isinstance(exc, Crashed):
                    raise
                continue
            _complete(recorder, op, None, answer)

    def stocks(self, client: Any) -> dict[str, int]:
        items = client.scan(TableName=STOCK_TABLE)["Items"]
        decoded = [codec.decode_item(item) or {} for item in items]
        return {str(item["productId"]): int(item["stock"]) for item in decoded}

    def orders(self, client: Any) -> list[str]:
        items = client.scan(TableName=ORDERS_TABLE)["Items"]
        return sorted(str((codec.decode_item(item) or {})["orderId"]) for item in items)

    def check(self, recorder: Recorder, stats: Any, real: Any) -> Report:
        report = Report()
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        stocks, orders = self.stocks(real), set(self.orders(real))
        for product, first in self.products:
            mine = [op for op in ops if op.args["product"] == product]
            sure = first + sum(_change(op) for op in mine if op.type == OK)
            unsure = [_change(op) for op in mine if op.type == UNKNOWN and _change(op)]
            reachable = {sure + total for total in checks._sums(unsure)}
            report.expect(
                stocks[product] in reachable,
                PATTERN,
                "stock conserved",
                f"{product}: {stocks[product]} not in {sorted(reachable)[:10]}",
                mine,
            )
            report.expect(stocks[product] >= 0, PATTERN, "never below zero", f"{product}")
        acknowledged = {
            op.args["order"] for op in ops if op.f == "update_versioned" and op.type == OK
        }
        possible = acknowledged | {
            op.args["order"] for op in ops if op.type == UNKNOWN and "order" in op.args
        }
        report.expect(acknowledged <= orders, PATTERN, "orders kept", f"{acknowledged - orders}")
        report.expect(orders <= possible, PATTERN, "no stray order", f"{orders - possible}")
        return report

    def final(self, real: Any) -> dict[str, Any]:
        return {"stock": self.stocks(real), "orders": self.orders(real)}


def _taking(quantity: int) -> versioned.Decide:
    def decide(item: versioned.Item | None) -> dict[str, Any]:
        if item is None or int(item["stock"]) < quantity:
            raise SoldOut(f"{quantity} wanted")
        return {"stock": int(item["stock"]) - quantity}

    return decide


def _ordering(order: str, product: str, quantity: int) -> versioned.Also:
    def also(item: versioned.Item | None, changes: Any) -> list[dict[str, Any]]:
        record = {"orderId": order, "productId": product, "quantity": quantity}
        put = {
            "TableName": ORDERS_TABLE,
            "Item": codec.encode_item(record),
            "ConditionExpression": "attribute_not_exists(orderId)",
        }
        return [{"Put": put}]

    return also


def _sync_call(client: Any) -> Callable[..., Any]:
    def call(name: str, *args: Any, **arguments: Any) -> Any:
        return getattr(versioned, name)(client, *args, **arguments)

    return call


def _async_call(client: Awaited) -> Callable[..., Awaitable[Any]]:
    async def call(name: str, *args: Any, **arguments: Any) -> Any:
        return await getattr(aio.versioned, name)(client, *args, **arguments)

    return call


def _read_then_write_sync(call: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    common, quantity = _split(arguments)
    item = call("read", common["table"], common["key"], common["backoff"])
    return call("update_if_version", **_at_version(common, item, quantity))


async def _read_then_write_async(
    call: Callable[..., Awaitable[Any]], arguments: dict[str, Any]
) -> Any:
    common, quantity = _split(arguments)
    item = await call("read", common["table"], common["key"], common["backoff"])
    return await call("update_if_version", **_at_version(common, item, quantity))


def _split(arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
    common = {name: arguments[name] for name in ("table", "key", "backoff")}
    return common, int(arguments["quantity"])


def _at_version(common: dict[str, Any], item: Any, quantity: int) -> dict[str, Any]:
    """``update_if_version`` adding ``quantity`` at the version read (a restock told If-Match)."""
    item = item or {"stock": 0, "version": 0}
    changes = {"stock": int(item["stock"]) + quantity}
    return {**common, "expected": int(item["version"]), "changes": changes}


def _invoked(recorder: Recorder, task: Task, name: str, arguments: dict[str, Any]) -> Any:
    """The op in the history: its product, and what it does to the stock if it lands
    (``delta``; a bump: nothing); an order's id."""
    product = arguments["key"]["productId"]
    delta = {
        "decrement": -arguments.get("amount", 0),
        "increment": arguments.get("amount", 0),
        "read-then-write": arguments.get("quantity", 0),
    }.get(name, 0)
    extra: dict[str, Any] = {}
    if name == "update_versioned":
        put = arguments["also"](None, {})[0]["Put"]["Item"]
        delta = -int(put["quantity"]["N"])
        extra["order"] = put["orderId"]["S"]
    return recorder.invoke(PATTERN, task.name, name, product=product, delta=delta, **extra)


def _complete(recorder: Recorder, op: Any, exc: BaseException | None, answer: Any = None) -> None:
    recorder.outcome(op, exc, _shown(answer), REFUSED)


def _shown(answer: Any) -> Any:
    if isinstance(answer, versioned.Written):
        return {"attempts": answer.attempts, "stock": int(answer.item["stock"])}
    if isinstance(answer, dict):
        return {"stock": int(answer.get("stock", 0)), "version": int(answer.get("version", 0))}
    return None


def _change(op: Any) -> int:
    """What the op did to its product's stock if it landed (a bump: nothing)."""
    return int(op.args.get("delta", 0))


def run(seed: int, driver: str, *, clients: int = 4, operations: int = 6) -> tuple[str, Report]:
    """One seed of the stock workload alone, through ``driver``: its history and its report."""
    from sim.run import run_alone

    workload = Stock([("a", 8), ("b", 3)], operations=operations, driver=driver)
    return run_alone(seed, workload, "stock", workload.check, clients=clients)
