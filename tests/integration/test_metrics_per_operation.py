"""Each primitive operation, run once on DynamoDB Local with nothing else going on, emits exactly
the metrics it should, each as many times as it should: a figure counted twice (by the library
and again by the domain above it) or not at all fails here.

Figures are counted as emitted (one per ``metrics.count`` of 1, one per ``metrics.timing``), from
a sink added around the operation alone. Clocks are injected: nothing waits on real time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from service.domain.errors import AlreadyConfirmed, Expired, Locked
from service.domain.locks import Locks
from tests.helpers import Clock, inventory_on
from turnstile_ddb import lease, metrics, retry
from turnstile_ddb.lease_queue import LeaseQueue, QueueSettings, WaitTimedOut

pytestmark = pytest.mark.integration

Emitted = Counter[tuple[str, str]]


@contextmanager
def emitted() -> Iterator[Emitted]:
    """The figures emitted inside the block, per (pattern, name): counts summed, timings one
    each."""
    seen: Emitted = Counter()

    def sink(figure: metrics.Figure) -> None:
        seen[(figure.pattern, figure.name)] += (
            int(figure.value) if figure.unit == metrics.COUNT else 1
        )

    metrics.add_sink(sink)
    try:
        yield seen
    finally:
        metrics.remove_sink(sink)


def once(operation: Callable[[], Any]) -> Emitted:
    with emitted() as seen:
        operation()
    return seen


def refused(error: type[BaseException], operation: Callable[[], Any]) -> Emitted:
    with emitted() as seen, pytest.raises(error):
        operation()
    return seen


# -- inventory (pattern claims; the domain's own: inventory) ---------------------------------


def test_inventory_operations_count_each_figure_once(ddb, tables, unique):
    clock = Clock()
    service = inventory_on(ddb, tables, clock, guess=False)
    assert once(lambda: service.create(unique, 3)) == {}
    first: dict[str, Any] = {}
    assert once(lambda: first.update(service.reserve(unique, 1, hold_seconds=30))) == {}
    second = service.reserve(unique, 1, hold_seconds=30)
    assert once(lambda: service.confirm(unique, first["reservationId"])) == {}
    assert once(lambda: service.confirm(unique, first["reservationId"])) == {}  # a repeat
    # a release after the confirm is refused from the lead unit it reads: no claim write, no figure
    release_sold = lambda: service.release(unique, first["reservationId"])  # noqa: E731
    assert refused(AlreadyConfirmed, release_sold) == {}
    assert once(lambda: service.release(unique, second["reservationId"])) == {}
    lapsing = service.reserve(unique, 1, hold_seconds=30)
    clock.now += 31
    assert refused(Expired, lambda: service.confirm(unique, lapsing["reservationId"])) == {
        ("claims", "ConfirmLost"): 1
    }


# -- leases (pattern lease) ------------------------------------------------------------------


def leases(ddb: Any, tables: Any, clock: Clock) -> lease.Leases:
    return lease.Leases(
        client=ddb, table=tables["leases"], backoff=retry.Backoff(attempts=8), clock=clock
    )


def test_lease_operations_count_each_figure_once(ddb, tables, unique):
    clock = Clock()
    plain = leases(ddb, tables, clock)
    resource = f"counted-{unique}"
    held: list[lease.Lease] = []
    assert once(lambda: held.append(plain.acquire(resource, "a", 5_000))) == {
        ("lease", "LeaseAttempt"): 1
    }
    assert refused(lease.Held, lambda: plain.acquire(resource, "b", 5_000)) == {
        ("lease", "LeaseAttempt"): 1,
        ("lease", "LeaseBusy"): 1,
    }
    assert once(lambda: held.append(plain.renew(held[0], 5_000))) == {}
    assert once(lambda: plain.release(held[1])) == {}
    assert once(lambda: plain.release(held[1])) == {("lease", "LeaseReleaseRepeated"): 1}
    assert refused(lease.LeaseLost, lambda: plain.renew(held[1], 5_000)) == {
        ("lease", "LeaseLost"): 1
    }


def test_queue_operations_count_each_figure_once(ddb, tables, unique):
    clock = Clock()
    plain = leases(ddb, tables, clock)
    settings = QueueSettings(heartbeat_ms=100, expiry_ms=300, poll_ms=20, margin_ms=100)
    queue = LeaseQueue(plain, settings, sleep=clock.sleep, monotonic=clock)
    resource = f"queued-{unique}"
    served: list[lease.Lease] = []
    # a free lease: a ticket, one claim, the wait
    assert once(lambda: served.append(queue.acquire(resource, "a", wait_ms=1_000))) == {
        ("lease", "LeaseQueued"): 1,
        ("lease", "LeaseAttempt"): 1,
        ("lease", "LeaseWait"): 1,
    }
    # a waiter that gives up behind a live holder: it counts its ticket, its give-up, its wait
    # and each refused claim (as LeaseAttempt and LeaseBusy alike)
    with emitted() as seen, pytest.raises(WaitTimedOut):
        queue.acquire(resource, "b", wait_ms=150)
    claims_made = seen[("lease", "LeaseAttempt")]
    assert claims_made >= 1
    assert seen == {
        ("lease", "LeaseQueued"): 1,
        ("lease", "LeaseAttempt"): claims_made,
        ("lease", "LeaseBusy"): claims_made,
        ("lease", "LeaseWaitGaveUp"): 1,
        ("lease", "LeaseWait"): 1,
    }
    # the holder releases; a plain acquisition clears the queue nobody waits in, at once
    plain.release(served[0])
    assert once(lambda: plain.acquire(resource, "c", 5_000)) == {
        ("lease", "LeaseAttempt"): 1,
        ("lease", "LeaseBusy"): 1,
        ("lease", "LeaseQueueCleared"): 1,
    }


def test_a_lock_refused_over_http_counts_the_library_figures_alone(ddb, tables, unique):
    clock = Clock()
    locks = Locks(leases(ddb, tables, clock))
    resource = f"http-{unique}"
    locks.acquire(resource, "a", 5)
    assert refused(Locked, lambda: locks.acquire(resource, "b", 5)) == {
        ("lease", "LeaseAttempt"): 1,
        ("lease", "LeaseBusy"): 1,
    }
