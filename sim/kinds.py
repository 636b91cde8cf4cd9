"""Workloads added by registration: one :class:`Kind` per kind of simulated client.

Every workload after the five first ones registers here, so that adding a workload touches its
own module and one line of :data:`KINDS`; :func:`sim.run.run_seed` sets up, runs, shows and checks
them through the same loops as the five first (purchases, leases, reservations, sharded products,
the lease queue: :class:`sim.first.FirstFive`, sized by the run's ``Config`` fields and kept in
their own order; they come first). A registered workload is an object with four methods:

* ``setup(real)``: create its tables and items on the DynamoDB ``real``;
* ``body(recorder, client)``: what one simulated client runs, a callable taking its
  :class:`sim.scheduler.Task` (its clock, sleeps, backoffs and random numbers);
* ``check(recorder, stats, real) -> chaos.checkers.Report``: judge the history and the tables
  once every client has finished;
* ``final(real) -> dict``: what the history's last line shows of its tables (JSON-able).

Its size comes from the run's :class:`sim.run.Config` (``sizes[kind.name] = (clients, each)``),
and ``python -m sim --size NAME=CLIENTS:EACH`` changes it; shrinking lowers both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from chaos.checkers import Report
from sim import adversary, fenced, resizing, signup
from sim.reservation_edges import ReservationEdges
from sim.streams import Streams

# Each client's clock is off the global one by at most this many seconds (lease.py assumes any two
# clients differ by less than its SAFETY_MARGIN_MS = 500 ms; two clients here differ by at most
# 400 ms). The lease queue's clients stay closer (sim.first.QUEUE_SKEW_SECONDS).
SKEW_SECONDS = 0.2


class Workload(Protocol):
    def setup(self, real: Any) -> None: ...

    def body(self, recorder: Any, client: Any) -> Any: ...

    def check(self, recorder: Any, stats: Any, real: Any) -> Report: ...

    def final(self, real: Any) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Kind:
    """One kind of client: ``name`` names its clients (``name0``, ``name1``, ...) and its size in
    ``Config.sizes``; ``make(each)`` builds the workload for ``each`` operations per client."""

    name: str
    make: Callable[[int], Workload]
    clients: int
    each: int
    skew: float = SKEW_SECONDS


KINDS: list[Kind] = [
    Kind("fenced", fenced.make, 2, 3),
    Kind("signup", lambda each: signup.Signup(operations=each), clients=4, each=8),
    Kind("edges", lambda each: ReservationEdges(episodes=each), clients=2, each=4),
    Kind("streams", Streams, clients=2, each=4),
    Kind("adversary", lambda each: adversary.Adversary(episodes=each), clients=2, each=4),
    Kind("resizing", lambda each: resizing.Resizing(operations=each), clients=4, each=10),
]
