"""Run every pattern at once under the nemesis, against DynamoDB Local, and judge the history.

:func:`run` starts its own DynamoDB Local and creates the synthesized template's tables, puts a
fault proxy in front of it (``local.dynamo_proxy``, its fault policy the nemesis), and starts every
function of the template as deployed: one worker per function, from its synthesized asset and the
layer, in a clean interpreter, with the template's environment and its role's policy enforced
(``local.workers``, as ``make local`` and the e2e tier run them), its DynamoDB endpoint the proxy.
The API functions answer through the bridge's routing, the stream consumers behind
:class:`local.pump.StreamPump` (wrapped by the nemesis's stream faults). Then the clients run for
the given time; then the nemesis is quieted, the streams drained, the final state read with a
clean client and the checkers run.

How the nemesis reaches the workers is in :mod:`chaos.deployed`: per request at the proxy
(throttles, lost replies, transaction conflicts, crashes), per invocation through the worker's
local-only chaos agent (crashes raised in the function, clock skew, wallet-charge pauses, and two
shorter settings: :data:`IDEMPOTENCY_LOCK_MS`, :data:`WALLET_LEASE_MS`). The lease and queue
workloads also call the library directly from their client threads; that in-process client takes
the same fault decisions (:meth:`chaos.nemesis.Nemesis.install`).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from chaos import checkers, deployed, workloads
from chaos.history import OK, UNKNOWN, History
from chaos.nemesis import Nemesis, Rates
from local import pump, workers
from local import template as cfn
from local.bridge import Bridge
from local.dynamo_proxy import Counts, DynamoProxy
from local.dynamodb_local import DynamoDBLocal
from service import catalog, config
from service.domain import locks as lock_domain
from service.domain.events import Events
from service.domain.inventory import pool_names
from service.domain.products import Products
from turnstile_ddb import codec, lease, sharded
from turnstile_ddb.lease_queue import LeaseQueue, QueueSettings

CLIENTS = {
    "purchases": 4,
    "registrations": 3,
    "leases": 3,
    "queue": 4,
    "wallets": 3,
    "inventory": 3,
    # the first two resize an adaptive product's and an adaptive event's shards (racing each
    # other), the last signs up for the event and cancels, the others buy the product
    "resizing": 4,
}
RESIZERS = 2  # of the resizing clients, the first ones: they resize instead of buying
# The queue's own settings (the library's defaults: H 0.5 s, L 1.5 s, poll 50 ms).
QUEUE_SETTINGS = QueueSettings()
IDEMPOTENCY_LOCK_MS = 4_000  # shorter than the deployed 30 s so crashed keyed requests resume
WALLET_LEASE_MS = 1_500  # short, so a paused charge outlives its lease within a run
EVENT_CAPACITY = 8
AGENT_SETTINGS = {"idempotency_lock_ms": IDEMPOTENCY_LOCK_MS, "wallet_lease_ms": WALLET_LEASE_MS}
WALLETS_HANDLER = catalog.spec("wallets").handler


@dataclass
class Result:
    seed: int
    seconds: float
    history: History
    nemesis: Nemesis
    report: checkers.Report
    notes: list[str] = field(default_factory=list)
    proxied: Counts = field(default_factory=Counts)  # the functions' DynamoDB requests

    @property
    def operations(self) -> int:
        return len(self.history.ops)

    @property
    def unknown(self) -> int:
        return sum(1 for op in self.history.ops if op.type == UNKNOWN)

    @property
    def faults(self) -> int:
        return len(self.nemesis.faults)

    def summary_line(self) -> str:
        return (
            f"chaos: {self.operations} operations, {self.faults} faults, {self.unknown} unknown, "
            f"{len(self.report.violations)} violations, seed {self.seed}"
        )

    def print(self, out: TextIO) -> None:
        ops = self.history.ops
        out.write(f"\nchaos run: seed {self.seed}, {self.seconds:.0f} s of clients\n\n")
        out.write(
            f"{'pattern':<15}{'ops':>7}{'ok':>7}{'fail':>7}{'unknown':>9}{'violations':>12}\n"
        )
        for pattern in CLIENTS:
            mine = [op for op in ops if op.pattern == pattern]
            bad = sum(1 for v in self.report.violations if v.pattern == pattern)
            out.write(
                f"{pattern:<15}{len(mine):>7}{sum(op.type == OK for op in mine):>7}"
                f"{sum(op.type == 'fail' for op in mine):>7}"
                f"{sum(op.type == UNKNOWN for op in mine):>9}{bad:>12}\n"
            )
        proxied = self.proxied
        out.write(
            f"\nfunctions' DynamoDB requests (proxy): {proxied.forwarded} forwarded, "
            f"{proxied.replied} answered by the nemesis, {proxied.dropped} dropped\n"
        )
        out.write(f"\nfaults injected ({self.faults}):\n")
        for kind, count in sorted(self.nemesis.counts().items()):
            out.write(f"  {kind:<22}{count:>7}\n")
        out.write(
            f"\nchecks run: {self.report.checks}, violations: {len(self.report.violations)}\n"
        )
        for note in self.notes + self.report.notes:
            out.write(f"note: {note}\n")
        for violation in self.report.violations[:20]:
            out.write(f"\nVIOLATION [{violation.pattern}] {violation.check}: {violation.message}\n")
            if violation.ops:
                out.write(self.history.around(violation.ops) + "\n")
                first = min(op.invoked for op in violation.ops) - self.history.start
                last = (
                    max(
                        (op.completed if op.completed != float("inf") else op.invoked + 30)
                        for op in violation.ops
                    )
                    - self.history.start
                )
                processes = {op.process for op in violation.ops}
                for fault in self.nemesis.faults:
                    own = fault.target.split(" ")[0] in processes
                    if own and first - 0.5 <= fault.at <= last + 0.5:
                        out.write(fault.describe() + "\n")
        out.write(self.summary_line() + "\n")


def run(
    seed: int,
    seconds: float,
    loaded_template: dict[str, Any] | None = None,
    *,
    assembly_dir: Path | None = None,
    rates: Rates | None = None,
    ttl_leases: bool = False,
    clients: dict[str, int] | None = None,
    log: Callable[[str], None] = lambda _: None,
    until: Callable[[History, Nemesis], bool] | None = None,
) -> Result:
    """Run every pattern's clients under the nemesis, then check the history.

    ``loaded_template`` and ``assembly_dir``: the synthesized stack and the cloud assembly that
    holds its assets (default: ``cdk.out``, synthesized if missing). The clients run for
    ``seconds``; with ``until``, they stop as soon as ``until(history, nemesis)`` holds (checked
    every 0.1 s), ``seconds`` being then only an upper bound: the short runs inside ``make test``
    stop on what happened, not on how fast this machine is today."""
    if loaded_template is None:
        loaded, assembly = _template(), cfn.TEMPLATE.parent
    else:
        loaded, assembly = loaded_template, assembly_dir or cfn.TEMPLATE.parent
    nemesis = Nemesis(seed, rates or Rates(), ttl_leases=ttl_leases)
    with DynamoDBLocal() as db:
        clean = db.client(config=_retry_config(read_timeout=120))
        cfn.create_tables(clean, loaded)
        with DynamoProxy(db.endpoint, faults=nemesis.decide) as proxy:
            local_environment = {
                **proxy.environment(db.environment()),
                # 10 units per pool: the chaos skus (30 units) are spread over 3 pools
                config.INVENTORY_POOL_UNITS_ENV: "10",
                # the checkers judge the history: no log line or EMF document per decision
                "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
                "POWERTOOLS_METRICS_DISABLED": "true",
            }
            log("chaos: starting every function from its asset (cdk.out) and the layer")
            with workers.running(
                loaded, assembly, local_environment, chaos=AGENT_SETTINGS
            ) as functions:
                result = _run(
                    db, loaded, nemesis, functions, seconds, clients or CLIENTS, log, until
                )
                result.proxied = proxy.counts
                return result


def _retry_config(read_timeout: float = 5) -> Any:
    from turnstile_ddb import retry

    return retry.client_config(read_timeout=read_timeout)


def _template() -> dict[str, Any]:
    if not cfn.TEMPLATE.exists():
        cfn.synthesize()
    return cfn.load()


def _run(
    db: DynamoDBLocal,
    loaded: dict[str, Any],
    nemesis: Nemesis,
    functions: workers.Workers,
    seconds: float,
    clients: dict[str, int],
    log: Callable[[str], None],
    until: Callable[[History, Nemesis], bool] | None = None,
) -> Result:
    seed = nemesis.seed
    clean = db.client(config=_retry_config(read_timeout=120))  # set-up, TTL, final reads
    # The lease and queue workloads call the library from their own threads: this client.
    faulty = db.client(config=_retry_config())
    nemesis.install(faulty)
    tables = cfn.table_names(loaded)
    physical = config.Tables(tables)

    def skewed_leases() -> lease.Leases:
        leases = lock_domain.leases(faulty, physical[config.LEASES])
        leases.clock = nemesis.clock
        return leases

    wrapped = {
        handler: deployed.Function(
            worker,
            nemesis,
            pause_seconds=WALLET_LEASE_MS / 1000 + 0.4 if handler == WALLETS_HANDLER else 0.0,
        )
        for handler, worker in functions.items()
    }
    provider = deployed.RemoteProvider(functions[WALLETS_HANDLER])
    bridge = Bridge(functions=wrapped)
    quiet = workloads.Caller(bridge, nemesis, faults=False)
    history = History()
    nemesis.start = history.start
    run_id = f"{seed}-{uuid.uuid4().hex[:6]}"
    setup = workloads.Setup(run_id)
    for n in range(2):
        event_id = f"chaos-{run_id}-e{n}"
        status, answer = quiet(
            "POST", "/events", {"eventId": event_id, "name": "x", "capacity": EVENT_CAPACITY}
        )
        assert status == 201, answer
        setup.events.append((event_id, EVENT_CAPACITY))
    setup.resources = [f"chaos-{run_id}-r{n}" for n in range(3)]
    setup.queued = [f"chaos-{run_id}-q{n}" for n in range(2)]
    setup.wallets = [f"chaos-{run_id}-w{n}" for n in range(2)]
    workloads.create_sku(setup, quiet)
    workloads.next_product(setup, quiet, -1, adaptive=True)
    event_id = f"chaos-{run_id}-ae0"
    status, answer = quiet(
        "POST",
        "/events",
        {"eventId": event_id, "name": "x", "capacity": EVENT_CAPACITY, "adaptive": True},
    )
    assert status == 201, answer
    setup.adaptive_events.append((event_id, EVENT_CAPACITY))
    # The resizing workload's resizer calls the library itself, on the faulty client.
    stock = Products(faulty, physical[config.PRODUCTS])
    seats = Events(faulty, physical[config.EVENTS])

    stop_pumps = threading.Event()
    pumps: list[tuple[pump.MappingSpec, pump.StreamPump]] = []
    threads: list[threading.Thread] = []
    streams = db.streams_client()
    for spec in pump.mapping_specs(loaded, names_of(loaded)):
        stream_pump = pump.StreamPump(
            dynamodb=clean,
            streams=streams,
            table=spec.table,
            handler=nemesis.stream_handler(spec.function_name, wrapped[spec.handler]),
            batch_size=spec.batch_size,
            retry_attempts=spec.retry_attempts,
            function_name=spec.function_name,
            filters=spec.filters,  # as the deployed event source mapping filters
            timeout_seconds=spec.timeout_seconds,
        )
        pumps.append((spec, stream_pump))
        thread = threading.Thread(target=stream_pump.run, args=(stop_pumps, 0.1), daemon=True)
        thread.start()
        threads.append(thread)

    def sweeper() -> None:
        rng = nemesis.rng("ttl")
        while not stop_pumps.wait(1.5):
            if nemesis.enabled:
                try:
                    nemesis.sweep_ttl(clean, tables, rng)
                except Exception as exc:  # noqa: BLE001 - best effort, like TTL itself
                    log(f"ttl sweep failed: {exc}")

    ttl_thread = threading.Thread(target=sweeper, daemon=True)
    ttl_thread.start()

    stop = threading.Event()
    workers = []
    everyone: list[workloads.Client] = []
    for pattern, count in clients.items():
        for n in range(count):
            client = workloads.Client(
                f"{pattern[:5]}{n}", history, nemesis, workloads.Caller(bridge, nemesis), stop
            )
            if pattern == "resizing" and n < RESIZERS:
                step = workloads.resizer(client, setup, stock, seats, first_turn=2 * n)
            elif pattern == "resizing" and n == count - 1:
                step = workloads.registrations(client, setup, adaptive=True)
            else:
                step = _step(
                    pattern, client, setup, quiet, skewed_leases(), physical[config.LEASES]
                )
            everyone.append(client)
            worker = threading.Thread(target=client.run, args=(step,), daemon=True)
            worker.start()
            workers.append(worker)
    log(f"chaos: {sum(clients.values())} clients running for {seconds:.0f} s (seed {seed})")
    started = time.monotonic()
    deadline = started + seconds
    while not stop.wait(0.1 if until is not None else max(0.0, deadline - time.monotonic())):
        if time.monotonic() >= deadline or (until is not None and until(history, nemesis)):
            break
    stop.set()
    ran = time.monotonic() - started
    for worker in workers:
        worker.join(timeout=120)
    notes = [f"{w.name} still running at the end" for w in workers if w.is_alive()]
    notes += [f"client {c.name} hit {c.errors} errors of its own" for c in everyone if c.errors]
    notes += [
        f"{function.worker.function.name}: {count} invocations failed with {kind} (an API "
        "function's answered 502, a stream consumer's batch was retried)"
        for function in wrapped.values()
        for kind, count in sorted(function.errors.items())
    ]
    for op in history.ops:
        if not op.done:  # the client failed mid-operation: the request may have been applied
            History.complete(op, UNKNOWN, None, "client error")
    nemesis.enabled = False
    stop_pumps.set()
    ttl_thread.join(timeout=30)
    for thread in threads:
        thread.join(timeout=30)
    log("chaos: clients stopped; draining the streams")
    dead: dict[str, list[dict[str, Any]]] = {}
    for spec, stream_pump in pumps:
        stream_pump.drain(timeout=300)
        dead[spec.table] = stream_pump.dead_letters
    report = _check(history, setup, clean, physical, provider, nemesis, dead, quiet, notes)
    return Result(seed, ran, history, nemesis, report, notes)


def disturbances(nemesis: Nemesis, history: History) -> list[checkers.Disturbance]:
    """The nemesis's fault log on the history's clock, with each clock skew's value."""
    found = []
    for fault in list(nemesis.faults):
        process, _, rest = fault.target.partition(" ")
        skew = 0.0
        if fault.kind == "clock_skew":
            skew = float(rest.rstrip("s"))
        found.append(checkers.Disturbance(history.start + fault.at, fault.kind, process, skew))
    return found


def names_of(loaded: dict[str, Any]) -> dict[str, str]:
    return {logical: logical for logical in cfn.resources(loaded, "AWS::DynamoDB::Table")}


def _step(
    pattern: str,
    client: workloads.Client,
    setup: workloads.Setup,
    quiet: workloads.Caller,
    fenced: lease.Leases,
    lease_table: str,
) -> Callable[[], None]:
    if pattern == "purchases":
        return workloads.purchases(client, setup, quiet)
    if pattern == "registrations":
        return workloads.registrations(client, setup)
    if pattern == "leases":
        return workloads.leases(client, setup, fenced, lease_table)
    if pattern == "queue":
        return workloads.queue(client, setup, LeaseQueue(fenced, QUEUE_SETTINGS), lease_table)
    if pattern == "wallets":
        return workloads.wallets(client, setup)
    if pattern == "resizing":
        return workloads.purchases(client, setup, quiet, adaptive=True)
    return workloads.inventory(client, setup, quiet)


def _query(client: Any, table: str, key: str, value: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    start: dict[str, Any] | None = None
    while True:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "#k = :v",
            "ExpressionAttributeNames": {"#k": key},
            "ExpressionAttributeValues": {":v": {"S": value}},
            "ConsistentRead": True,
        }
        if start:
            kwargs["ExclusiveStartKey"] = start
        page = client.query(**kwargs)
        items.extend(codec.decode_item(raw) or {} for raw in page.get("Items", []))
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def _get(client: Any, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
    response = client.get_item(TableName=table, Key=codec.encode_item(key), ConsistentRead=True)
    return codec.decode_item(response.get("Item"))


def _image_value(record: dict[str, Any], name: str) -> str | None:
    image = record.get("dynamodb", {}).get("NewImage") or {}
    value = image.get(name) or {}
    return value.get("S")


def _check(
    history: History,
    setup: workloads.Setup,
    client: Any,
    tables: config.Tables,
    provider: deployed.RemoteProvider,
    nemesis: Nemesis,
    dead: dict[str, list[dict[str, Any]]],
    quiet: workloads.Caller,
    notes: list[str],
) -> checkers.Report:
    report = checkers.no_bugs(history.ops)
    stocks = {}
    for product_id, _ in setup.products:
        item = _get(client, tables[config.PRODUCTS], {"productId": product_id})
        stocks[product_id] = int(item["stock"]) if item else None
    report.merge(checkers.purchases(history.of("purchases"), setup.products, stocks))

    events: dict[str, checkers.EventState] = {}
    for event_id, _ in setup.events:
        items = _query(client, tables[config.EVENTS], "eventId", event_id)
        header = next(item for item in items if item["sk"] == "EVENT")
        users = {item["userId"] for item in items if str(item["sk"]).startswith("REG#")}
        requests = {
            item["requestId"]: item["status"]
            for item in _query(client, tables[config.REGISTRATION_REQUESTS], "eventId", event_id)
        }
        events[event_id] = checkers.EventState(
            int(header["capacity"]), int(header["registered"]), users, requests
        )
    dead_requests = {
        request_id
        for record in dead.get(tables[config.REGISTRATION_REQUESTS], [])
        if (request_id := _image_value(record, "requestId"))
    }
    ttl_deleted = {
        key.split("/")[-1] for key in nemesis.deleted if key.startswith("registration_requests/")
    }
    report.merge(
        checkers.registrations(history.of("registrations"), events, dead_requests, ttl_deleted)
    )

    logs = {}
    for resource in setup.resources:
        item = _get(client, tables[config.LEASES], {"resource": f"chaos-data/{resource}"})
        logs[resource] = [int(f) for f in (item or {}).get("log", [])]
    report.merge(checkers.leases(history.of("leases"), logs))

    queue_logs = {}
    for resource in setup.queued:
        item = _get(client, tables[config.LEASES], {"resource": f"chaos-qdata/{resource}"})
        queue_logs[resource] = [int(f) for f in (item or {}).get("log", [])]
    bounds = checkers.QueueBounds(
        QUEUE_SETTINGS.heartbeat_ms / 1000,
        QUEUE_SETTINGS.expiry_ms / 1000,
        QUEUE_SETTINGS.poll_ms / 1000,
        idle_s=QUEUE_SETTINGS.idle_ms / 1000,
    )
    report.merge(
        checkers.queue(history.of("queue"), queue_logs, disturbances(nemesis, history), bounds)
    )

    wallets = {}
    for wallet_id in setup.wallets:
        item = _get(client, tables[config.WALLETS], {"walletId": wallet_id}) or {}
        wallets[wallet_id] = (int(item.get("balance", 0)), int(item.get("topUps", 0)))
    refunded = {call.charge_id for call in provider.calls("refund")}
    charges = [
        checkers.Charge(c.charge_id, c.wallet_id, c.amount, c.charge_id in refunded)
        for c in provider.calls("charge")
    ]
    report.merge(checkers.wallets(history.of("wallets"), wallets, charges))

    skus = {}
    summary_dead = bool(dead.get(tables[config.INVENTORY]))
    if summary_dead:
        notes.append("inventory summary records went to the dead letters: summary not compared")
    for sku, _ in setup.skus:
        header = _get(client, tables[config.INVENTORY], {"sku": sku, "sk": "sku"}) or {}
        items = [  # the units live in their pools' partitions, ``<sku>#<k>``
            item
            for pool in pool_names(sku, int(header.get("pools", 1)))
            for item in _query(client, tables[config.INVENTORY], "sku", pool)
        ]
        units = {
            str(item["sk"]).removeprefix("unit#"): str(item["status"])
            for item in items
            if str(item["sk"]).startswith("unit#")
        }
        holders = {  # the reservation each held or sold unit names, for the table check
            str(item["sk"]).removeprefix("unit#"): str(item.get("holder"))
            for item in items
            if str(item["sk"]).startswith("unit#") and item.get("status") in ("held", "sold")
        }
        summary = None
        if not summary_dead:
            status, answer = quiet("GET", f"/inventory/{sku}")
            if status == 200:
                summary = {k: int(answer[k]) for k in ("available", "reserved", "sold")}
        skus[sku] = checkers.SkuState(units, summary, holders)
    report.merge(checkers.inventory(history.of("inventory"), skus))

    adaptive = {}
    for product_id, _ in setup.adaptive:
        counter = Products(client, tables[config.PRODUCTS]).counter(product_id, 1)
        adaptive[product_id] = checkers.ShardedState(counter, _shard_rows(client, counter))
    for event_id, _ in setup.adaptive_events:
        counter = Events(client, tables[config.EVENTS]).shards_of(event_id, 1)
        members = {  # registrations live under keys of their own, ``<eventId>#r<h>``
            str(item["userId"])
            for item in _scan_prefix(client, counter.table, "eventId", f"{event_id}#")
            if str(item["sk"]).startswith("REG#")
        }
        rows = _shard_rows(client, counter)
        adaptive[event_id] = checkers.ShardedState(counter, rows, members)
    report.merge(
        checkers.resizing(history.of("resizing"), setup.adaptive, adaptive, setup.adaptive_events)
    )
    return report


def _shard_rows(client: Any, counter: sharded.ShardedCounter) -> dict[str, dict[str, Any]]:
    """Every item of ``counter``'s table keyed as one of its shards (``<base>#<k>`` and the
    counter's other key attributes, whatever ``k``: a shard a resize left behind is found too),
    by that key."""
    return {
        str(item[counter.key_attr]): item
        for item in _scan_prefix(client, counter.table, counter.key_attr, f"{counter.base}#")
        if all(item.get(name) == value for name, value in counter.extra_key)
    }


def _scan_prefix(client: Any, table: str, key: str, prefix: str) -> list[dict[str, Any]]:
    """Every item of ``table`` whose ``key`` starts with ``prefix`` (a scan: a resize may leave
    items at keys nobody would ask for)."""
    items: list[dict[str, Any]] = []
    start: dict[str, Any] | None = None
    while True:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "FilterExpression": "begins_with(#k, :prefix)",
            "ExpressionAttributeNames": {"#k": key},
            "ExpressionAttributeValues": {":prefix": {"S": prefix}},
            "ConsistentRead": True,
        }
        if start:
            kwargs["ExclusiveStartKey"] = start
        page = client.scan(**kwargs)
        items.extend(codec.decode_item(raw) or {} for raw in page.get("Items", []))
        start = page.get("LastEvaluatedKey")
        if not start:
            return items
