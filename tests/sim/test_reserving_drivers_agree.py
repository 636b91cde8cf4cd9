"""The two drivers cannot drift on reservations: one simulator seed of the reserving workload
(sim.reserving: reservations over four small pools, confirms and releases, faults on) gives the
same history, call for call, through the synchronous driver and the asyncio one, for each of the
two protocols (the synchronous front door's, reading pool by pool, and the asyncio front door's,
reading the other pools ahead in one Gather)."""

from __future__ import annotations

from typing import Any

import pytest

from sim import reserving
from tests.sim.test_drivers_agree import _probe_mutant
from turnstile_ddb.aio import claims as aio_claims

SEEDS = range(30)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_reserving_seed_gives_one_history_through_either_driver(seed):
    by_sync, sync_report = reserving.run(seed, "sync")
    in_order, in_order_report = reserving.run(seed, "async-in-order")
    by_async, async_report = reserving.run(seed, "async")
    ahead, ahead_report = reserving.run(seed, "sync-ahead")
    assert in_order == by_sync
    assert by_async == ahead
    for report in (sync_report, in_order_report, async_report, ahead_report):
        assert report.violations == []
    assert '"reserve"' in by_sync and '"ok"' in by_sync


def test_the_asyncio_front_door_reads_ahead_where_the_sync_one_reads_pool_by_pool():
    # Given the histories of the same seeds through the two front doors
    differing = [
        seed
        for seed in range(10)
        if reserving.run(seed, "sync")[0] != reserving.run(seed, "async")[0]
    ]
    # Then they differ where a first pool was short (the other pools read in one Gather)
    assert differing


def test_an_async_reservation_that_drifts_is_caught(monkeypatch):
    # Given an asyncio reserve that reads the pools last to first (the protocol: in order)
    real = aio_claims.reserve

    async def drifted(client: Any, units: Any, *, pools: Any, **kwargs: Any) -> Any:
        return await real(client, units, pools=list(reversed(pools)), **kwargs)

    monkeypatch.setattr(aio_claims, "reserve", drifted)
    # Then some seed's histories differ between the front door and its sync-driven twin
    differing = [
        seed
        for seed in range(5)
        if reserving.run(seed, "async")[0] != reserving.run(seed, "sync-ahead")[0]
    ]
    assert differing


# The reservation's mutants the reserving workload kills: each through both front doors, and each
# protocol at the same seed through both drivers (the async column of the mutant table). The
# others (06, 26, 28) are boundaries of the hold's end that need the simulator's boundary clock.
CLAIMS_MUTANTS = ("04", "05")
_PROBE = """
import json
from sim import reserving
from tests.sim.test_drivers_agree import _probe_mutant
first = {}
for driver in reserving.DRIVERS:
    for seed in range(40):
        history, report = reserving.run(seed, driver)
        if report.violations:
            first[driver] = [seed, sorted({v.check for v in report.violations})]
            break
print(json.dumps(first))
"""


@pytest.mark.parametrize("number", CLAIMS_MUTANTS)
def test_a_claims_mutant_is_killed_through_both_drivers(number, tmp_path):
    first = _probe_mutant(number, tmp_path, _PROBE)
    assert set(first) == set(reserving.DRIVERS), first
    assert first["sync"] == first["async-in-order"]
    assert first["async"] == first["sync-ahead"]
