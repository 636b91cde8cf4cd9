"""One simulated run per seed, and the summary over many seeds (``python -m sim``)."""

from __future__ import annotations

import contextlib
import json
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from chaos.checkers import Report
from sim.ddb import Faults, SimClient, Stats
from sim.first import FirstFive, Group
from sim.kinds import KINDS, Kind, Workload
from sim.model import Model
from sim.scheduler import EPOCH, Scheduler
from sim.workloads import Recorder


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


@dataclass
class Registered:
    """A registered kind's workload and its clients, run as :class:`sim.first.FirstFive` is: its
    final shown under the kind's name in the history's last line."""

    kind: Kind
    clients: int
    workload: Workload

    @property
    def groups(self) -> list[Group]:
        return [Group(self.kind.name, self.clients, self.kind.skew, self.workload)]

    def setup(self, real: Any) -> None:
        self.workload.setup(real)

    def final(self, real: Any) -> dict[str, Any]:
        return {self.kind.name: self.workload.final(real)}

    def check(self, recorder: Recorder, stats: Stats, real: Any) -> Report:
        return self.workload.check(recorder, stats, real)


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
    # The five first workloads (sim.first), then each registered kind that has clients: set up,
    # spawned, shown and checked in this order.
    parts: list[FirstFive | Registered] = [FirstFive(config)]
    for kind in KINDS:
        clients, each = config.size_of(kind.name)
        if clients > 0:
            parts.append(Registered(kind, clients, kind.make(each)))
    groups = [group for part in parts for group in part.groups]
    with contextlib.ExitStack() as stack:
        if real is None:
            real = Model()
        stack.enter_context(seeded_ids(seed))
        stack.callback(drop_tables, real)
        for part in parts:
            part.setup(real)
        for group in groups:
            for i in range(group.clients):
                client = SimClient(real, scheduler, faults, stats)
                skew = round(scheduler.rng.uniform(-group.skew, group.skew), 6)
                body = group.workload.body(recorder, client)
                scheduler.spawn(f"{group.name}{i}", body, skew=skew)
        finished = scheduler.run()
        shown = {key: value for part in parts for key, value in part.final(real).items()}
        reports = [part.check(recorder, stats, real) for part in parts]
    report = Report()
    for task in scheduler.tasks:
        report.expect(
            task.error is None,
            "sim",
            "no unexpected exception",
            f"{task.name} raised {task.error!r}",
        )
    for part_report in reports:
        report.merge(part_report)
    history = render(recorder, stats, shown)
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
    final: dict[str, Any],
) -> str:
    """The whole history as text: every DynamoDB call and every operation, in virtual time, then
    ``final``, what the workloads show of their tables at the end."""
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
    lines.append("# final " + json.dumps(final, sort_keys=True, default=str))
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


def run_alone(
    seed: int,
    workload: Any,
    name: str,
    check: Callable[[Recorder, Stats, Model], Report],
    *,
    clients: int = 4,
    faults: Faults | None = None,
) -> tuple[str, Report]:
    """One seed of one driver-parameterised workload on its own (the drift workloads: stock,
    places, leasing, reserving): ``clients`` of its bodies under the seeded scheduler, with
    ``faults`` (the default ones if None), checked by ``check``, plus "no unexpected exception"
    and "finished"; returns the rendered history and the report."""
    scheduler = Scheduler(seed)
    recorder = Recorder(scheduler)
    stats = Stats()
    real = Model()
    with seeded_ids(seed):
        workload.setup(real)
        for i in range(clients):
            client = SimClient(real, scheduler, faults or Faults(), stats)
            skew = round(scheduler.rng.uniform(-0.2, 0.2), 6)
            scheduler.spawn(f"{name}{i}", workload.body(recorder, client), skew=skew)
        finished = scheduler.run()
    report = check(recorder, stats, real)
    for task in scheduler.tasks:
        report.expect(
            task.error is None, "sim", "no unexpected exception", f"{task.name}: {task.error!r}"
        )
    report.expect(finished, "sim", "finished", "stopped at max_steps")
    return render(recorder, stats, workload.final(real)), report
