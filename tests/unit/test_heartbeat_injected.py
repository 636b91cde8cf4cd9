"""A Heartbeat run on someone else's time: its naps and its loop handed to the caller (as the
simulator runs it, on virtual time), with no thread and no real wait."""

from __future__ import annotations

import threading

from turnstile_ddb import lease
from turnstile_ddb.lease_queue import Heartbeat


class _Leases:
    """Renews twice, then finds the lease taken over."""

    def __init__(self) -> None:
        self.renewed: list[tuple[object, int]] = []

    def renew(self, held, ttl_ms):
        if len(self.renewed) == 2:
            raise lease.LeaseLost("r", None)
        self.renewed.append((held, ttl_ms))
        return f"renewed-{len(self.renewed)}"


def test_the_naps_and_the_loop_are_the_callers():
    naps: list[float] = []
    joined: list[bool] = []
    loops = []
    threads = threading.active_count()

    def start(loop):
        loops.append(loop)
        return lambda: joined.append(True)

    leases = _Leases()
    beat = Heartbeat(
        leases,  # type: ignore[arg-type]
        "held",  # type: ignore[arg-type]
        period_ms=500,
        ttl_ms=1500,
        sleep=naps.append,
        start=start,
    )
    with beat:
        assert threading.active_count() == threads  # no thread of its own
        loops[0]()  # the caller runs the loop where it likes
    assert naps == [0.5, 0.5, 0.5]
    assert leases.renewed == [("held", 1500), ("renewed-1", 1500)]
    assert beat.lease == "renewed-2" and beat.renewals == 2 and beat.lost.is_set()
    assert joined == [True]


def test_a_stop_is_seen_after_the_nap_it_came_in():
    naps: list[float] = []
    leases = _Leases()
    beat = Heartbeat(
        leases,  # type: ignore[arg-type]
        "held",  # type: ignore[arg-type]
        period_ms=500,
        ttl_ms=1500,
        sleep=naps.append,
        start=lambda loop: loop,
    )
    with beat:
        pass  # the exit stops it, then runs the loop as its "join": one nap, no renewal
    assert naps == [0.5] and leases.renewed == [] and not beat.lost.is_set()
