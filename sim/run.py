"""One simulated run per seed, and the summary over many seeds (``python -m sim``)."""

from __future__ import annotations

import contextlib
import json
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from chaos import checkers
from chaos.checkers import Report
from sim import checks
from sim.ddb import Faults, SimClient, Stats
from sim.kinds import KINDS
from sim.model import Model
from sim.scheduler import EPOCH, Scheduler
from sim.workloads import Leasing, Purchases, Queueing, Recorder, Reservations, Sharded

# Each client's clock is off the global one by at most this (lease.py assumes any two clients
# differ by less than its SAFETY_MARGIN_MS = 500 ms; two clients here differ by at most 400 ms).
SKEW_SECONDS = 0.2
# The lease queue's fairness assumes any two clocks differ by less than H/2 (chaos.checkers.queue
# excuses unfairness past H/4 each): its clients' skews stay inside, so fairness is judged.
QUEUE_SKEW_SECONDS = 0.1


@dataclass
class Config:
    purchase_clients: int = 4
    lease_clients: int = 3
    purchases_each: int = 12  # purchases per purchase client
    leases_each: int = 6  # acquisitions per lease client
    reservation_clients: int = 3
    reservations_each: int = 8  # reservations per reservation client
    sharded_clients: int = 3
    sharded_each: int = 10  # purchases and restocks per sharded-products client
    queue_clients: int = 3
    queue_each: int = 5  # acquisitions per lease-queue client
    faults: Faults = field(default_factory=Faults)
    fault_scale: float = 1.0  # every fault probability times this
    # The registered workloads' sizes (sim.kinds.KINDS): name -> (clients, operations each); a
    # kind left out runs no client.
    sizes_by_kind: dict[str, tuple[int, int]] = field(default_factory=lambda: default_sizes())

    def flags(self) -> str:
        """The command-line flags of this configuration (what ``python -m sim`` takes)."""
        scale = "" if self.fault_scale == 1.0 else f" --fault-scale {self.fault_scale:g}"
        if self.sizes() == Config().sizes():
            return scale
        kinds = "".join(
            f" --size {kind.name}={self.size_of(kind.name)[0]}:{self.size_of(kind.name)[1]}"
            for kind in KINDS
            if self.size_of(kind.name) != (kind.clients, kind.each)
        )
        return (
            f" --buyers {self.purchase_clients} --holders {self.lease_clients}"
            f" --purchases {self.purchases_each} --acquisitions {self.leases_each}"
            f" --reservers {self.reservation_clients} --reservations {self.reservations_each}"
            f" --sharded-buyers {self.sharded_clients} --sharded-ops {self.sharded_each}"
            f" --queuers {self.queue_clients} --queued {self.queue_each}"
            f"{kinds}{scale}"
        )

    def size_of(self, kind: str) -> tuple[int, int]:
        return self.sizes_by_kind.get(kind, (0, 0))

    def sizes(self) -> tuple[int, ...]:
        return (
            self.purchase_clients,
            self.lease_clients,
            self.purchases_each,
            self.leases_each,
            self.reservation_clients,
            self.reservations_each,
            self.sharded_clients,
            self.sharded_each,
            self.queue_clients,
            self.queue_each,
            *(n for kind in KINDS for n in self.size_of(kind.name)),
        )


def default_sizes() -> dict[str, tuple[int, int]]:
    return {kind.name: (kind.clients, kind.each) for kind in KINDS}


@dataclass
class Result:
    seed: int
    history: str
    report: Report
    calls: int
    faults: int
    simulated: float  # virtual seconds
    wall: float
    finished: bool
    config: Config

    @property
    def violations(self) -> int:
        return len(self.report.violations) + (0 if self.finished else 1)


@contextlib.contextmanager
def seeded_ids(seed: int) -> Iterator[None]:
    """uuid.uuid4 from the seed while a run lasts: the library and the service draw purchase ids
    and ClientRequestTokens from it, and they end up in the history."""
    rng = random.Random(f"uuid-{seed}")
    real = uuid.uuid4
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)
    try:
        yield
    finally:
        uuid.uuid4 = real


def run_seed(seed: int, config: Config | None = None, *, real: Any = None) -> Result:
    """Run one seed. ``real``: the DynamoDB to run it on, by default a fresh in-memory
    :class:`sim.model.Model`; a moto client (:func:`sim.ddb.moto_dynamodb`) also works. Its
    tables are created and deleted here, so a batch of seeds can share one."""
    config = config or Config()
    started = time.perf_counter()
    scheduler = Scheduler(seed)
    recorder = Recorder(scheduler)
    stats = Stats()
    faults = config.faults.scaled(config.fault_scale)
    extra_reports: list[Report] = []
    purchases = Purchases([("p0", 40), ("p1", 10)], operations=config.purchases_each)
    leasing = Leasing(["r0"], operations=config.leases_each)
    reserving = Reservations([("sku0", 12, 3), ("sku1", 4, 1)], operations=config.reservations_each)
    sharding = Sharded([("s0", 12, 4), ("s1", 6, 3)], operations=config.sharded_each)
    queueing = Queueing(["q0"], operations=config.queue_each)
    extras = [
        (kind, config.size_of(kind.name)[0], kind.make(config.size_of(kind.name)[1]))
        for kind in KINDS
        if config.size_of(kind.name)[0] > 0
    ]
    with contextlib.ExitStack() as stack:
        if real is None:
            real = Model()
        stack.enter_context(seeded_ids(seed))
        stack.callback(drop_tables, real)
        purchases.setup(real)
        leasing.setup(real)
        reserving.setup(real)
        sharding.setup(real)
        queueing.setup(real)
        for _, _, workload in extras:
            workload.setup(real)
        for i in range(config.purchase_clients):
            client = SimClient(real, scheduler, faults, stats)
            skew = round(scheduler.rng.uniform(-SKEW_SECONDS, SKEW_SECONDS), 6)
            scheduler.spawn(f"buyer{i}", purchases.body(recorder, client), skew=skew)
        for i in range(config.lease_clients):
            client = SimClient(real, scheduler, faults, stats)
            skew = round(scheduler.rng.uniform(-SKEW_SECONDS, SKEW_SECONDS), 6)
            scheduler.spawn(f"holder{i}", leasing.body(recorder, client), skew=skew)
        for i in range(config.reservation_clients):
            client = SimClient(real, scheduler, faults, stats)
            skew = round(scheduler.rng.uniform(-SKEW_SECONDS, SKEW_SECONDS), 6)
            scheduler.spawn(f"reserver{i}", reserving.body(recorder, client), skew=skew)
        for i in range(config.sharded_clients):
            client = SimClient(real, scheduler, faults, stats)
            skew = round(scheduler.rng.uniform(-SKEW_SECONDS, SKEW_SECONDS), 6)
            scheduler.spawn(f"sharder{i}", sharding.body(recorder, client), skew=skew)
        for i in range(config.queue_clients):
            client = SimClient(real, scheduler, faults, stats)
            skew = round(scheduler.rng.uniform(-QUEUE_SKEW_SECONDS, QUEUE_SKEW_SECONDS), 6)
            scheduler.spawn(f"queuer{i}", queueing.body(recorder, client), skew=skew)
        for kind, clients, workload in extras:
            for i in range(clients):
                client = SimClient(real, scheduler, faults, stats)
                skew = round(scheduler.rng.uniform(-kind.skew, kind.skew), 6)
                scheduler.spawn(f"{kind.name}{i}", workload.body(recorder, client), skew=skew)
        finished = scheduler.run()
        final = purchases.final(real)
        records = purchases.records(real, recorder.ops)
        logs = leasing.logs(real)
        skus = reserving.final(real)
        shards = sharding.final(real)
        queue_logs = queueing.logs(real)
        extra_final = {kind.name: workload.final(real) for kind, _, workload in extras}
        for _, _, workload in extras:
            report_extra = workload.check(recorder, stats, real)
            extra_reports.append(report_extra)
    report = Report()
    for task in scheduler.tasks:
        report.expect(
            task.error is None,
            "sim",
            "no unexpected exception",
            f"{task.name} raised {task.error!r}",
        )
    report.merge(checkers.purchases(recorder.ops, purchases.products, final))
    report.merge(checks.keyed_answers(recorder.ops, records))
    report.merge(checkers.leases([op for op in recorder.ops if op.pattern == "leases"], logs))
    report.merge(checks.overlapping_holds(recorder.holds))
    report.merge(checks.granted_as_asked(recorder.holds))
    report.merge(checks.granted_when_free(recorder.holds))
    report.merge(checks.no_write_after_expiry(recorder.ops))
    queued = [op for op in recorder.ops if op.pattern == "queue"]
    settings = queueing.settings
    bounds = checkers.QueueBounds(
        settings.heartbeat_ms / 1000,
        settings.expiry_ms / 1000,
        settings.poll_ms / 1000,
        idle_s=settings.idle_ms / 1000,
    )
    report.merge(checkers.queue(queued, queue_logs, stats.disturbances, bounds))
    sharded_ops = [op for op in recorder.ops if op.pattern == "sharded"]
    report.merge(checks.sharded_stock(sharded_ops, sharding.products, shards))
    report.merge(checkers.inventory([op for op in recorder.ops if op.pattern == "inventory"], skus))
    report.merge(checks.bounded_cost(reserving.costs))
    for extra in extra_reports:
        report.merge(extra)
    history = render(recorder, stats, final, {**logs, **queue_logs}, shards, extra_final)
    return Result(
        seed,
        history,
        report,
        stats.calls,
        stats.faults,
        scheduler.now - EPOCH,
        time.perf_counter() - started,
        finished,
        config,
    )


def drop_tables(client: Any) -> None:
    for table in client.list_tables()["TableNames"]:
        client.delete_table(TableName=table)


def render(
    recorder: Recorder,
    stats: Stats,
    final: dict[str, int | None],
    logs: dict[str, list[int]],
    shards: dict[str, list[int]],
    extra: dict[str, Any] | None = None,
) -> str:
    """The whole history as text: every DynamoDB call and every operation, in virtual time."""
    lines = ["# calls", *stats.trace, "# operations"]
    for op in recorder.ops:
        lines.append(
            json.dumps(
                [
                    op.index,
                    op.process,
                    op.f,
                    op.args,
                    round(op.invoked - EPOCH, 6),
                    None if op.completed == float("inf") else round(op.completed - EPOCH, 6),
                    op.type,
                    op.value,
                    op.attempts,
                ],
                sort_keys=True,
                default=str,
            )
        )
    lines.append(
        "# final "
        + json.dumps(
            {"stock": final, "logs": logs, "shards": shards, **(extra or {})},
            sort_keys=True,
            default=str,
        )
    )
    return "\n".join(lines) + "\n"


def repro(seed: int, config: Config | None = None) -> str:
    flags = config.flags() if config else ""
    if flags:
        return f".venv/bin/python -m sim --seed {seed}{flags} --show"
    return f"make sim SEED={seed}   # or: .venv/bin/python -m sim --seed {seed} --show"


def shrink(seed: int, config: Config, *, real: Any = None) -> tuple[Config, Result]:
    """The smallest configuration found (fewer clients, fewer operations each) on which ``seed``
    still fails, greedily: each step takes the first smaller candidate that still fails. The seed
    then interleaves a smaller world differently, so this finds *a* small failing run, not the
    same interleaving cut down."""
    best = run_seed(seed, config, real=real)
    if not best.violations:
        raise ValueError(f"seed {seed} does not fail on {config}")
    while True:
        for candidate in _smaller(config):
            result = run_seed(seed, candidate, real=real)
            if result.violations:
                config, best = candidate, result
                break
        else:
            return config, best


def _smaller(config: Config) -> list[Config]:
    candidates = []
    clients = (
        config.purchase_clients
        + config.lease_clients
        + config.reservation_clients
        + config.sharded_clients
        + config.queue_clients
        + sum(size[0] for size in config.sizes_by_kind.values())
    )
    if clients > 1:
        if config.purchase_clients:
            candidates.append(replace(config, purchase_clients=config.purchase_clients - 1))
        if config.lease_clients:
            candidates.append(replace(config, lease_clients=config.lease_clients - 1))
        if config.reservation_clients:
            candidates.append(replace(config, reservation_clients=config.reservation_clients - 1))
        if config.sharded_clients:
            candidates.append(replace(config, sharded_clients=config.sharded_clients - 1))
        if config.queue_clients:
            candidates.append(replace(config, queue_clients=config.queue_clients - 1))
        for name, (n, each) in config.sizes_by_kind.items():
            if n:
                candidates.append(_resized(config, name, (n - 1, each)))
    if config.purchases_each > 1 and config.purchase_clients:
        candidates.append(replace(config, purchases_each=config.purchases_each // 2))
    if config.leases_each > 1 and config.lease_clients:
        candidates.append(replace(config, leases_each=config.leases_each // 2))
    if config.reservations_each > 1 and config.reservation_clients:
        candidates.append(replace(config, reservations_each=config.reservations_each // 2))
    if config.sharded_each > 1 and config.sharded_clients:
        candidates.append(replace(config, sharded_each=config.sharded_each // 2))
    if config.queue_each > 1 and config.queue_clients:
        candidates.append(replace(config, queue_each=config.queue_each // 2))
    for name, (n, each) in config.sizes_by_kind.items():
        if n and each > 1:
            candidates.append(_resized(config, name, (n, each // 2)))
    return candidates


def _resized(config: Config, kind: str, size: tuple[int, int]) -> Config:
    return replace(config, sizes_by_kind={**config.sizes_by_kind, kind: size})


def describe(result: Result) -> str:
    lines = [f"seed {result.seed}: {result.violations} violation(s)"]
    if not result.finished:
        lines.append("  the run did not finish within its step budget (livelock?)")
    for violation in result.report.violations:
        lines.append(f"  [{violation.pattern}] {violation.check}: {violation.message}")
        for op in violation.ops[:4]:
            lines.append("    " + op.describe(EPOCH))
    lines.append("  repro: " + repro(result.seed, result.config))
    return "\n".join(lines)


def summary(results: list[Result], wall: float) -> str:
    calls = sum(r.calls for r in results)
    simulated = sum(r.simulated for r in results)
    return (
        f"sim: {len(results)} seeds, {calls} operations, {sum(r.faults for r in results)} faults, "
        f"{sum(r.violations for r in results)} violations, {calls / wall:.0f} ops/s, "
        f"{simulated / wall:.1f} sim-s/s"
    )
