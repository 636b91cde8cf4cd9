"""What the stack costs a month while nobody calls it, read from its synthesized template, at list
prices for one region (:data:`REGION`), each price with the page it was read from and the date.

    python -m infra.cost                      # the table docs/cost.md shows, from cdk.out
    python -m infra.cost --table-gb 5         # with another assumed size per table
    python -m infra.cost --per-million bench/results/cost.json   # USD per million, per route

Idle means no request at all: API Gateway, Lambda invocations, DynamoDB on-demand reads and
writes, SQS, streams and X-Ray all bill per use and cost nothing. What is left is billed for
existing: the SnapStart cache of each published version (by memory, every second), the alarms (per
alarm metric), the dashboard, and each table's stored bytes and their point-in-time recovery (by
table size: an empty table costs nothing, so the size is an assumption, :data:`TABLE_GB`).

A resource type that is neither priced here nor known to be free idle is refused
(:class:`UnpricedResource`): adding a NAT gateway, a KMS key or a provisioned table to the stack
fails the test that recomputes docs/cost.md (tests/infra/test_idle_cost.py) until it is priced.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

REGION = "us-east-1"
READ_ON = "2026-11-28"
HOURS_PER_MONTH = 730  # AWS's own monthly convention (the pricing calculator's)
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
TABLE_GB = Decimal(1)  # assumed size of each table (items and indexes) for storage and PITR
ROOT = Path(__file__).resolve().parent.parent
MEMORY_RECORD = ROOT / "bench" / "memory.json"  # the functions' memory, chosen by measurement
COST_RECORD = ROOT / "bench" / "results" / "cost.json"  # bench --only cost (kept in the tree)


class UnpricedResource(ValueError):
    """The template holds a resource that may cost money idle and has no price here."""


@dataclass(frozen=True)
class Price:
    """One list price in :data:`REGION`: USD per ``unit``, where it was read and when."""

    key: str
    label: str
    usd: Decimal
    unit: str
    source: str
    free_per_month: Decimal = Decimal(0)  # the account's always-free monthly quantity, if any
    note: str = ""
    read_on: str = READ_ON


PRICES: dict[str, Price] = {
    price.key: price
    for price in (
        Price(
            "snapstart_cache",
            "SnapStart cache",
            Decimal("0.0000015046"),
            "GB-second cached",
            "https://aws.amazon.com/lambda/pricing/",
            note="the page renders its rates client-side, so its stored text does not show "
            "them; the figure is the AWS Price List API's (SKU WRKYMVM4XSRFFQ7B, "
            "'SnapStart - Cached Snapshots') as quoted in public notes, and "
            "https://awsnegotiations.com/lambda-snapstart-cost-impact.html gives "
            "'approximately $0.0000015 per GB-second'",
        ),
        Price(
            "alarm_metric",
            "CloudWatch alarms",
            Decimal("0.10"),
            "alarm metric-month (standard resolution)",
            "https://c3x.dev/resources/aws/aws_cloudwatch_metric_alarm",
            free_per_month=Decimal(10),
            note="the free tier is read from https://aws.amazon.com/cloudwatch/pricing/",
        ),
        Price(
            "dashboard",
            "CloudWatch dashboard",
            Decimal("3.00"),
            "dashboard-month",
            "https://github.com/nishinoshake/aws-rough/issues/37",
            free_per_month=Decimal(3),
            note="the rate is not in the stored text of https://aws.amazon.com/cloudwatch/pricing/ "
            "(its free tier is: 3 dashboards of up to 50 metrics); the figure is quoted from "
            "that page's Japanese edition in that GitHub thread",
        ),
        Price(
            "pitr",
            "DynamoDB point-in-time recovery",
            Decimal("0.20"),
            "GB-month of table size",
            "https://finops.com.py/services/dynamodb/backups",
            note="billed on the table's size whatever the recovery period "
            "(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
            "PointInTimeRecovery_Howitworks.html)",
        ),
        Price(
            "table_storage",
            "DynamoDB table storage",
            Decimal("0.25"),
            "GB-month stored (Standard class)",
            "https://gist.github.com/bluejack/68dd851e8ff1c480d623fc0b09e0423b",
            free_per_month=Decimal(25),
            note="not in the stored text of https://aws.amazon.com/dynamodb/pricing/on-demand/; "
            "the figure and the free tier are from the table in that note (written in 2019)",
        ),
    )
}

# What one request costs, per route: API Gateway's call, Lambda's invocation and its duration by
# memory, and the DynamoDB request units it consumes (on-demand). First-tier rates of each.
REQUEST_PRICES: dict[str, Price] = {
    price.key: price
    for price in (
        Price(
            "api_request",
            "API Gateway REST API calls",
            Decimal("3.50"),
            "million requests (the first 333 million a month)",
            "https://docs.aws.amazon.com/pt_br/whitepapers/latest/"
            "best-practices-api-gateway-private-apis-integration/cost-optimization.html",
            note="AWS's whitepaper table of REST API pricing; cheaper tiers start past 333 "
            "million requests a month; the 12-month free tier for new accounts is left out",
        ),
        Price(
            "lambda_request",
            "Lambda requests",
            Decimal("0.20"),
            "million requests",
            "https://cloudchipr.com/blog/aws-lambda-pricing",
            note="weak source: a vendor's guide (2024); https://aws.amazon.com/lambda/pricing/ "
            "renders its rates client-side, so its stored text does not show them",
        ),
        Price(
            "lambda_gb_second",
            "Lambda duration (arm64)",
            Decimal("0.0000133334"),
            "GB-second (first 7.5 billion a month)",
            "https://cloudchipr.com/blog/aws-lambda-pricing",
            note="weak source, as for Lambda requests; the same arm64 figure is in "
            "https://git.mcrn.ar/mariano/lambda_local_runner/src/branch/main/docs/lambdas-md/"
            "lambda-13-cost.md; billed per 1 ms of duration",
        ),
        Price(
            "read_unit",
            "DynamoDB on-demand reads",
            Decimal("0.125"),
            "million read request units",
            "https://airbyte.com/data-engineering-resources/dynamodb-pricing",
            note="the rate after the November 2024 cut of on-demand prices by half, from a "
            "vendor's guide (July 2025); pages written before the cut give $0.25",
        ),
        Price(
            "write_unit",
            "DynamoDB on-demand writes",
            Decimal("0.625"),
            "million write request units",
            "https://airbyte.com/data-engineering-resources/dynamodb-pricing",
            note="as for reads; pages written before the cut give $1.25",
        ),
    )
}
ONE_VCPU_MB = 1769  # Lambda's CPU share grows with memory; at 1,769 MB a function has one vCPU


def modelled_ms(cpu_ms: Decimal, wait_ms: Decimal, memory_mb: int) -> Decimal:
    """A request's duration at ``memory_mb``, modelled from a local measurement: its CPU time
    (measured on a whole core) stretched by the share of a vCPU the memory buys, never shrunk
    below it (a Python request runs on one thread: a second vCPU idles), plus its time waiting
    on DynamoDB, which memory does not change."""
    stretch = max(Decimal(1), Decimal(ONE_VCPU_MB) / Decimal(memory_mb))
    return cpu_ms * stretch + wait_ms


@dataclass(frozen=True)
class PerMillion:
    """What a million requests of one route cost, in USD, by what bills them."""

    route: str
    contention: str
    memory_mb: int
    duration_ms: Decimal
    api: Decimal
    invocations: Decimal
    compute: Decimal
    reads: Decimal
    writes: Decimal

    @property
    def total(self) -> Decimal:
        return self.api + self.invocations + self.compute + self.reads + self.writes


def _measured(row: Mapping[str, Any], key: str) -> Decimal:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{row.get('route')!r}: {key} must be a number >= 0, not {value!r}")
    return Decimal(str(value))


def per_million(row: Mapping[str, Any], memory_mb: int, wait_ms: Decimal) -> PerMillion:
    """A million requests of the route a cost.json ``row`` measured (units and CPU per request),
    run by a function of ``memory_mb`` that waits ``wait_ms`` per request on DynamoDB."""
    route = row.get("route")
    if not isinstance(route, str) or not route:
        raise ValueError(f"a cost row names its route, not {route!r}")
    rcu, wcu, cpu_ms = (_measured(row, key) for key in ("rcu", "wcu", "cpu_ms"))
    duration = modelled_ms(cpu_ms, wait_ms, memory_mb)
    gb_seconds = Decimal(memory_mb) / 1024 * duration / 1000 * 1_000_000
    prices = REQUEST_PRICES
    return PerMillion(
        route=route,
        contention=str(row.get("contention", "")),
        memory_mb=memory_mb,
        duration_ms=duration,
        api=prices["api_request"].usd,
        invocations=prices["lambda_request"].usd,
        compute=gb_seconds * prices["lambda_gb_second"].usd,
        reads=rcu * prices["read_unit"].usd,
        writes=wcu * prices["write_unit"].usd,
    )


# Resource types that bill only per use (or not at all): nothing while the stack is idle.
FREE_IDLE: dict[str, str] = {
    "AWS::ApiGateway::Account": "no charge",
    "AWS::ApiGateway::Authorizer": "per request",
    "AWS::ApiGateway::Deployment": "no charge",
    "AWS::ApiGateway::GatewayResponse": "no charge",
    "AWS::ApiGateway::Method": "per request",
    "AWS::ApiGateway::Model": "no charge",
    "AWS::ApiGateway::RequestValidator": "no charge",
    "AWS::ApiGateway::Resource": "per request",
    "AWS::ApiGateway::RestApi": "per request (REST API calls)",
    "AWS::ApiGateway::Stage": "per request (no cache cluster)",
    "AWS::Cognito::UserPool": "per monthly active user (none idle)",
    "AWS::Cognito::UserPoolClient": "no charge (no client-credentials grants)",
    "AWS::Cognito::UserPoolGroup": "no charge",
    "AWS::IAM::Policy": "no charge",
    "AWS::IAM::Role": "no charge",
    "AWS::Lambda::Alias": "no charge",
    "AWS::Lambda::EventSourceMapping": "stream reads by Lambda triggers are free",
    "AWS::Lambda::Function": "per request and duration (no SnapStart version)",
    "AWS::Lambda::LayerVersion": "no charge (code storage quota only)",
    "AWS::Lambda::Permission": "no charge",
    "AWS::Lambda::Version": "priced with its function's SnapStart cache",
    "AWS::Logs::LogGroup": "per GB ingested; stored logs expire with the retention",
    "AWS::SQS::Queue": "per request (a dead-letter queue is not polled)",
    "AWS::SQS::QueuePolicy": "no charge",
    "CDK::Metadata": "no charge",
}


@dataclass(frozen=True)
class LineItem:
    resource: str  # the template's logical id
    quantity: Decimal  # in the price's unit
    price: Price

    @property
    def usd(self) -> Decimal:
        return self.quantity * self.price.usd


@dataclass(frozen=True)
class IdleCost:
    items: tuple[LineItem, ...]
    free: tuple[tuple[str, str], ...]  # (logical id, why it costs nothing idle)
    table_gb: Decimal

    @property
    def total(self) -> Decimal:
        return sum((item.usd for item in self.items), Decimal(0))

    def quantity(self, key: str) -> Decimal:
        return sum((i.quantity for i in self.items if i.price.key == key), Decimal(0))

    @property
    def total_after_free_tier(self) -> Decimal:
        """The total if the account uses no free tier elsewhere (free tiers are per account)."""
        return sum(
            (
                max(self.quantity(p.key) - p.free_per_month, Decimal(0)) * p.usd
                for p in PRICES.values()
            ),
            Decimal(0),
        )


def _snapstart_gb(properties: Mapping[str, Any]) -> Decimal | None:
    if properties.get("SnapStart", {}).get("ApplyOn") != "PublishedVersions":
        return None
    return Decimal(properties.get("MemorySize", 128)) / 1024


def _alarm_metrics(logical: str, properties: Mapping[str, Any]) -> int:
    periods = [properties.get("Period", 60)] if "MetricName" in properties else []
    periods += [
        m["MetricStat"].get("Period", 60)
        for m in properties.get("Metrics", [])
        if "MetricStat" in m
    ]
    if not periods or min(periods) < 60:
        raise UnpricedResource(f"{logical}: only standard-resolution metric alarms are priced")
    return len(periods)


def idle_cost(template: Mapping[str, Any], table_gb: Decimal = TABLE_GB) -> IdleCost:
    """The month's bill of ``template`` (a synthesized CloudFormation template) with no traffic."""
    resources: Mapping[str, Any] = template.get("Resources", {})
    versions: dict[str, int] = {}
    for resource in resources.values():
        if resource["Type"] == "AWS::Lambda::Version":
            target = resource["Properties"]["FunctionName"]
            if isinstance(target, dict) and "Ref" in target:
                versions[target["Ref"]] = versions.get(target["Ref"], 0) + 1
    items: list[LineItem] = []
    free: list[tuple[str, str]] = []
    for logical, resource in resources.items():
        kind, properties = resource["Type"], resource.get("Properties", {})
        before = len(items)
        if kind == "AWS::Lambda::Function":
            gb = _snapstart_gb(properties)
            if gb is not None and versions.get(logical):
                quantity = gb * SECONDS_PER_MONTH * versions[logical]
                items.append(LineItem(logical, quantity, PRICES["snapstart_cache"]))
        elif kind == "AWS::CloudWatch::Alarm":
            metrics = Decimal(_alarm_metrics(logical, properties))
            items.append(LineItem(logical, metrics, PRICES["alarm_metric"]))
        elif kind == "AWS::CloudWatch::Dashboard":
            items.append(LineItem(logical, Decimal(1), PRICES["dashboard"]))
        elif kind == "AWS::DynamoDB::Table":
            if properties.get("BillingMode") != "PAY_PER_REQUEST":
                raise UnpricedResource(f"{logical}: provisioned capacity bills idle")
            items.append(LineItem(logical, table_gb, PRICES["table_storage"]))
            pitr = properties.get("PointInTimeRecoverySpecification", {})
            if pitr.get("PointInTimeRecoveryEnabled"):
                items.append(LineItem(logical, table_gb, PRICES["pitr"]))
        elif kind == "AWS::ApiGateway::Stage" and properties.get("CacheClusterEnabled"):
            raise UnpricedResource(f"{logical}: a stage cache cluster bills by the hour")
        elif kind not in FREE_IDLE:
            raise UnpricedResource(f"{logical}: {kind} has no idle price here (infra/cost.py)")
        if len(items) == before:
            free.append((logical, FREE_IDLE.get(kind, "")))
    return IdleCost(tuple(items), tuple(free), table_gb)


def dollars(amount: Decimal) -> str:
    """``amount`` to the cent, as the pages write it: ``$17.79``."""
    return f"${amount.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)}"


def render(idle: IdleCost) -> str:
    """The idle bill as a Markdown table, one row per price, then the totals."""
    rows = [
        "| what | resources | quantity a month | USD per unit | USD a month |",
        "|---|---:|---:|---|---:|",
    ]
    for price in PRICES.values():
        quantity = idle.quantity(price.key)
        count = len({i.resource for i in idle.items if i.price.key == price.key})
        usd = quantity * price.usd
        rows.append(
            f"| {price.label} | {count} | {quantity.normalize():f} | "
            f"${price.usd} per {price.unit} | {dollars(usd)} |"
        )
    rows.append(f"| **total at list prices** | | | | **{dollars(idle.total)}** |")
    rows.append(
        "| total after the account's free tier (if unused elsewhere) | | | | "
        f"{dollars(idle.total_after_free_tier)} |"
    )
    return "\n".join(rows)


def render_prices(prices: Mapping[str, Price] | None = None) -> str:
    """Every price (of :data:`PRICES`, or ``prices``) as a Markdown table: the figure, where it
    was read, when, and any caveat."""
    rows = ["| price | USD | source (read on) | note |", "|---|---|---|---|"]
    for price in (PRICES if prices is None else prices).values():
        free = (
            f"; free tier {price.free_per_month.normalize():f} a month"
            if price.free_per_month
            else ""
        )
        rows.append(
            f"| {price.label} | ${price.usd} per {price.unit} | <{price.source}> ({price.read_on}) "
            f"| {price.note}{free} |"
        )
    return "\n".join(rows)


def _wait_ms(record: Mapping[str, Any], function: str) -> Decimal:
    return Decimal(str(record["functions"][function]["wait_ms_median"]))


def render_memory(record: Mapping[str, Any]) -> str:
    """The memory chosen per function (bench/memory.json) with what it was chosen from."""
    rows = [
        "| function | CPU per request (median) | wait per request (median) | memory | "
        "Lambda USD per million requests (modelled) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, found in record["functions"].items():
        memory, wait = int(found["memory_mb"]), _wait_ms(record, name)
        alone = {"route": name, "rcu": 0, "wcu": 0, "cpu_ms": found["cpu_ms_median"]}
        bill = per_million(alone, memory, wait)
        rows.append(
            f"| {name} | {found['cpu_ms_median']} ms | {wait} ms | {memory} MB | "
            f"{dollars(bill.invocations + bill.compute)} |"
        )
    return "\n".join(rows)


def render_per_million(rows: list[Mapping[str, Any]], record: Mapping[str, Any]) -> str:
    """Per route and contention level of a cost.json, what a million requests cost, run by the
    function that serves the route with the memory and the wait ``record`` (bench/memory.json)
    gives it."""
    from service import catalog  # the routes' declarations, only when a table is asked for

    function_of = {
        f"{route.method} {route.path}": spec.name for spec, route in catalog.api_routes()
    }
    lines = [
        "| route | contention | memory | duration (modelled) | API Gateway | Lambda | DynamoDB | "
        "USD per million |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        function = function_of.get(str(row.get("route")))
        if function is None:
            raise ValueError(f"{row.get('route')!r} is not a route of the API")
        memory = int(record["functions"][function]["memory_mb"])
        bill = per_million(row, memory, _wait_ms(record, function))
        lines.append(
            f"| `{bill.route}` | {bill.contention} | {memory} MB | {bill.duration_ms:.1f} ms | "
            f"{dollars(bill.api)} | {dollars(bill.invocations + bill.compute)} | "
            f"{dollars(bill.reads + bill.writes)} | {dollars(bill.total)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", type=Path, default=Path("cdk.out/Turnstile.template.json"))
    parser.add_argument("--table-gb", type=Decimal, default=TABLE_GB)
    parser.add_argument("--memory", type=Path, default=MEMORY_RECORD, help="the memory choice")
    parser.add_argument("--per-million", type=Path, help="a cost.json: print its route table")
    args = parser.parse_args(argv)
    if args.per_million is not None:
        record = json.loads(args.memory.read_text())
        print(render_per_million(json.loads(args.per_million.read_text())["routes"], record))
        print()
        print(render_memory(record))
        print()
        print(render_prices(REQUEST_PRICES))
        return
    idle = idle_cost(json.loads(args.template.read_text()), table_gb=args.table_gb)
    print(render(idle))
    print()
    print(render_prices())


if __name__ == "__main__":
    main()
