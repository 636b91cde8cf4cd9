"""The soak's invariants, read from the tables once the load has stopped, against what the clients
were told (the ``op`` lines of the record, ``bench.soak_locustfile``).

The chaos tester's checkers judge registrations (capacity, the counter, nobody twice, every
request decided), leases (one holder per fence, fences increasing) and inventory (no unit held
twice, sold once, the summary converged) from the same kind of history: the ops are rebuilt as
:class:`chaos.history.Op` and handed to them. Products and wallets are checked here, because the
soak's differ from chaos's: its products are restocked under load (chaos's counter model has no
restock), and its top-ups go through the real payment stand-in, whose charges chaos reads from its
own provider.

* products: stock never negative; final stock = initial + acknowledged restocks - acknowledged
  sales, give or take the purchases whose reply was lost (some subset of them);
* wallets: balance and top-up count = the acknowledged top-ups (one per key; a retry under the
  key answers the same top-up), give or take the lost ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chaos import checkers
from chaos.history import OK, UNKNOWN, Op
from chaos.runner import _get, _query
from service import config
from service.domain.inventory import pool_names


@dataclass(frozen=True)
class Fixtures:
    """What the soak created before the load, with the figures the checks start from."""

    products: dict[str, int]  # productId -> initial stock
    events: list[str]
    skus: list[str]
    wallets: list[str]


def ops_of(lines: Iterable[Mapping[str, Any]]) -> list[Op]:
    """The record's ``op`` lines as the chaos checkers' ops (a lost reply completes never)."""
    found = []
    for index, line in enumerate(x for x in lines if x.get("kind") == "op"):
        unknown = line["type"] == UNKNOWN
        found.append(
            Op(
                index,
                line["pattern"],
                line["process"],
                line["f"],
                dict(line["args"]),
                float(line["invoked"]),
                int(line["invoked"] * 1000),
                line["type"],
                float("inf") if unknown else float(line["completed"]),
                int(line["completed"] * 1000),
                line["status"],
                line["value"],
                [(status, body) for status, body in line["attempts"]],
            )
        )
    return found


def products(
    ops: list[Op], final: Mapping[str, int | None], initial: Mapping[str, int]
) -> checkers.Report:
    report = checkers.Report()
    by_product: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        by_product[op.args["product"]].append(op)
    for product, start in initial.items():
        mine = by_product.get(product, [])
        stock = final.get(product)
        sold = sum(op.args["quantity"] for op in mine if op.f == "purchase" and op.type == OK)
        restocked = sum(op.args["units"] for op in mine if op.f == "restock" and op.type == OK)
        lost = [op.args["quantity"] for op in mine if op.f == "purchase" and op.type == UNKNOWN]
        report.expect(
            stock is not None and stock >= 0 and sold <= start + restocked,
            "products",
            "no oversell",
            f"{product}: initial {start} + restocked {restocked}, sold {sold}, stock {stock}",
        )
        if stock is None:
            continue
        missing = start + restocked - sold - stock
        report.expect(
            any(
                checkers.subset_sum_reaches([(1, q) for q in lost], n, missing)
                for n in range(len(lost) + 1)
            ),
            "products",
            "stock accounting",
            f"{product}: initial {start} + restocked {restocked} - sold {sold} - final {stock} = "
            f"{missing}, not a sum of the lost purchases {lost}",
        )
    return report


def wallets(ops: list[Op], final: Mapping[str, tuple[int, int]]) -> checkers.Report:
    report = checkers.Report()
    for op in ops:
        ids = {
            body.get("topUpId")
            for status, body in op.attempts
            if status is not None and 200 <= status < 300 and isinstance(body, dict)
        }
        report.expect(
            len(ids) <= 1,
            "wallets",
            "one effect per key",
            f"{op.args['wallet']}: the attempts under key {op.args['key']} answered "
            f"{sorted(map(str, ids))}",
            [op],
        )
    for wallet, (balance, count) in final.items():
        mine = [op for op in ops if op.args["wallet"] == wallet]
        acknowledged = [op for op in mine if op.type == OK]
        lost = [(1, op.args["amount"]) for op in mine if op.type == UNKNOWN]
        credited = sum(op.args["amount"] for op in acknowledged)
        report.expect(
            checkers.subset_sum_reaches(lost, count - len(acknowledged), balance - credited),
            "wallets",
            "balance = sum of top-ups",
            f"{wallet}: balance {balance} ({count} top-ups), acknowledged {credited} "
            f"({len(acknowledged)}), lost {[amount for _, amount in lost]}",
        )
    return report


def check(
    ops: list[Op],
    fixtures: Fixtures,
    client: Any,
    tables: config.Tables,
    summary: Callable[[str], dict[str, int] | None],
) -> checkers.Report:
    """Every invariant, from the tables as they are now. ``client``: a DynamoDB client;
    ``summary(sku)``: the API's counts of a sku (``GET /inventory/{sku}``), None if it failed."""
    of = defaultdict(list)
    for op in ops:
        of[op.pattern].append(op)
    report = checkers.Report()

    stocks: dict[str, int | None] = {}
    for product in fixtures.products:
        item = _get(client, tables[config.PRODUCTS], {"productId": product})
        stocks[product] = int(item["stock"]) if item else None
    report.merge(products(of["purchases"], stocks, fixtures.products))

    events: dict[str, checkers.EventState] = {}
    for event in fixtures.events:
        items = _query(client, tables[config.EVENTS], "eventId", event)
        header = next(item for item in items if item["sk"] == "EVENT")
        users = {item["userId"] for item in items if str(item["sk"]).startswith("REG#")}
        requests = {
            item["requestId"]: item["status"]
            for item in _query(client, tables[config.REGISTRATION_REQUESTS], "eventId", event)
        }
        events[event] = checkers.EventState(
            int(header["capacity"]), int(header["registered"]), users, requests
        )
    report.merge(checkers.registrations(of["registrations"], events, set(), set()))

    report.merge(checkers.leases(of["leases"], {}))

    balances = {}
    for wallet in fixtures.wallets:
        item = _get(client, tables[config.WALLETS], {"walletId": wallet}) or {}
        balances[wallet] = (int(item.get("balance", 0)), int(item.get("topUps", 0)))
    report.merge(wallets(of["wallets"], balances))

    skus = {}
    for sku in fixtures.skus:
        header = _get(client, tables[config.INVENTORY], {"sku": sku, "sk": "sku"}) or {}
        items = [
            item
            for pool in pool_names(sku, int(header.get("pools", 1)))
            for item in _query(client, tables[config.INVENTORY], "sku", pool)
        ]
        units = {
            str(item["sk"]).removeprefix("unit#"): str(item["status"])
            for item in items
            if str(item["sk"]).startswith("unit#")
        }
        holders = {
            str(item["sk"]).removeprefix("unit#"): str(item.get("holder"))
            for item in items
            if str(item["sk"]).startswith("unit#") and item.get("status") in ("held", "sold")
        }
        skus[sku] = checkers.SkuState(units, summary(sku), holders)
    report.merge(checkers.inventory(of["inventory"], skus))
    return report
