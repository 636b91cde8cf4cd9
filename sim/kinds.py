"""Workloads added by registration: one :class:`Kind` per kind of simulated client.

The five first workloads (purchases, leases, reservations, sharded products, the lease queue) are
wired into :func:`sim.run.run_seed` by hand; every later one registers here instead, so that adding
a workload touches its own module and one line of :data:`KINDS`. A registered workload is an object
with four methods:

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
from sim import fenced, signup
from sim.reservation_edges import ReservationEdges
from sim.streams import Streams

# Each client's clock is off the global one by at most this many seconds (see sim.run).
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
]
