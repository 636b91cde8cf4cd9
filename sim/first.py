"""The five first workloads (purchases, leases, reservations, sharded products, the lease queue),
run by :func:`sim.run.run_seed` through the same loops as the registered ones (:mod:`sim.kinds`).

They are one object, :class:`FirstFive`, with a registered workload's ``setup``, ``final`` and
``check`` and its clients in :attr:`FirstFive.groups`, because they predate registration and keep
habits of their own that every seed's history and report depend on:

* their sizes are :class:`sim.run.Config`'s own fields (``purchase_clients``,
  ``purchases_each``, ...; ``python -m sim --buyers``, ``--purchases``, ...);
* they are set up, and their tables shown in the history's last line (its ``stock``, ``logs``
  and ``shards``), even when they have no client;
* their checks run first, in an order of their own (purchases, leases, the lease queue,
  sharded products, reservations), and the hold checks judge the leases' and the queue's holds
  together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from chaos import checkers
from chaos.checkers import Report
from sim import checks
from sim.kinds import SKEW_SECONDS
from sim.workloads import Leasing, Purchases, Queueing, Recorder, Reservations, Sharded

if TYPE_CHECKING:
    from sim.run import Config

# The lease queue's fairness assumes any two clocks differ by less than H/2 (chaos.checkers.queue
# excuses unfairness past H/4 each): its clients' skews stay inside, so fairness is judged.
QUEUE_SKEW_SECONDS = 0.1


class Group(NamedTuple):
    """Clients of one kind: ``name0``, ``name1``, ... each running ``workload.body``, each with
    its clock off the global one by a skew drawn within ``skew`` seconds either way."""

    name: str
    clients: int
    skew: float
    workload: Any


class FirstFive:
    """The five first workloads, sized by ``config``'s fields."""

    def __init__(self, config: Config) -> None:
        self.purchases = Purchases([("p0", 40), ("p1", 10)], operations=config.purchases_each)
        self.leasing = Leasing(["r0"], operations=config.leases_each)
        self.reserving = Reservations(
            [("sku0", 12, 3), ("sku1", 4, 1)], operations=config.reservations_each
        )
        self.sharding = Sharded([("s0", 12, 4), ("s1", 6, 3)], operations=config.sharded_each)
        self.queueing = Queueing(["q0"], operations=config.queue_each)
        self.groups = [
            Group("buyer", config.purchase_clients, SKEW_SECONDS, self.purchases),
            Group("holder", config.lease_clients, SKEW_SECONDS, self.leasing),
            Group("reserver", config.reservation_clients, SKEW_SECONDS, self.reserving),
            Group("sharder", config.sharded_clients, SKEW_SECONDS, self.sharding),
            Group("queuer", config.queue_clients, QUEUE_SKEW_SECONDS, self.queueing),
        ]

    def setup(self, real: Any) -> None:
        for group in self.groups:
            group.workload.setup(real)

    def final(self, real: Any) -> dict[str, Any]:
        """Their part of the history's last line (its top-level keys)."""
        return {
            "stock": self.purchases.final(real),
            "logs": {**self.leasing.logs(real), **self.queueing.logs(real)},
            "shards": self.sharding.final(real),
        }

    def check(self, recorder: Recorder, stats: Any, real: Any) -> Report:
        ops = recorder.ops
        report = Report()
        report.merge(checkers.purchases(ops, self.purchases.products, self.purchases.final(real)))
        report.merge(checks.keyed_answers(ops, self.purchases.records(real, ops)))
        leases = [op for op in ops if op.pattern == "leases"]
        report.merge(checkers.leases(leases, self.leasing.logs(real)))
        report.merge(checks.overlapping_holds(recorder.holds))
        report.merge(checks.granted_as_asked(recorder.holds))
        report.merge(checks.granted_when_free(recorder.holds))
        report.merge(checks.no_write_after_expiry(ops))
        queued = [op for op in ops if op.pattern == "queue"]
        settings = self.queueing.settings
        bounds = checkers.QueueBounds(
            settings.heartbeat_ms / 1000,
            settings.expiry_ms / 1000,
            settings.poll_ms / 1000,
            idle_s=settings.idle_ms / 1000,
        )
        report.merge(checkers.queue(queued, self.queueing.logs(real), stats.disturbances, bounds))
        sharded_ops = [op for op in ops if op.pattern == "sharded"]
        shards = self.sharding.final(real)
        report.merge(checks.sharded_stock(sharded_ops, self.sharding.products, shards))
        inventory = [op for op in ops if op.pattern == "inventory"]
        report.merge(checkers.inventory(inventory, self.reserving.final(real)))
        report.merge(checks.bounded_cost(self.reserving.costs))
        return report
