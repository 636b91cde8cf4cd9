"""The lease queue's two drivers cannot drift: one seed of the lease workload with its acquisitions
through the FIFO queue (sim.leasing, ``queued``: tickets, naps, claims, leaves, lost answers
settled by a read) gives the same history through ``lease_queue.LeaseQueue`` and
``aio.lease_queue.LeaseQueue``, call for call and answer for answer."""

from __future__ import annotations

from typing import Any

import pytest

from sim import leasing
from tests.sim.test_drivers_agree import _PROBE, _probe_mutant
from turnstile_ddb import _queue_waiting, _queue_writes
from turnstile_ddb.aio import lease_queue as aio_lease_queue


@pytest.mark.parametrize("seed", range(20))
def test_a_queued_lease_seed_gives_one_history_through_either_driver(seed):
    # Given the lease workload queueing for its leases, when one seed runs through each driver
    by_sync, sync_report = leasing.run(seed, "sync", queued=True)
    by_async, async_report = leasing.run(seed, "async", queued=True)
    # Then the histories are the same, call for call, and both are clean
    assert by_async == by_sync
    assert sync_report.violations == [] and async_report.violations == []
    assert "transact_write_items ok" in by_sync


def test_the_queued_workload_queues():
    # The queue is what runs: some waiter gives up (a leave writes a tombstone, the item's
    # ``left``) on some seed, and no seed runs the plain acquire_wait's backoff instead
    histories = [leasing.run(seed, "sync", queued=True)[0] for seed in range(4)]
    assert any("WaitTimedOut" in history for history in histories)
    assert any("'left'" in history for history in histories)


def test_a_queue_front_door_that_drifts_is_caught(monkeypatch):
    # Given an async queue whose acquisition looks at the lease item first (one call more)
    real = aio_lease_queue.LeaseQueue.acquire

    async def drifted(self: Any, resource: str, owner: str, **options: Any) -> Any:
        key = self.leases.wire_key(resource)
        await self.leases.client.get_item(TableName=self.leases.table, Key=key)
        return await real(self, resource, owner, **options)

    monkeypatch.setattr(aio_lease_queue.LeaseQueue, "acquire", drifted)
    # Then some seed's histories differ
    assert any(
        leasing.run(seed, "sync", queued=True)[0] != leasing.run(seed, "async", queued=True)[0]
        for seed in range(3)
    )


def test_the_queued_checks_catch_two_holders_at_once(monkeypatch):
    # Given a queue that takes a held lease (its claim's condition forgets the holder)
    def greedy(queue: Any, wait: Any, request: Any) -> Any:
        condition = "#head = :ticket OR #head <> :ticket"
        values = {":ticket": {"N": str(wait.ticket)}}
        return _queue_writes._take(queue, wait, request, condition, values)

    monkeypatch.setattr(_queue_waiting, "_claim", greedy)
    # Then a check fails on some seed
    reports = [leasing.run(seed, "sync", queued=True)[1] for seed in range(5)]
    assert any(report.violations for report in reports)


# The mutant the queued workload kills (the acquisition write's fence, which the queue's claims
# and grabs make too): through both drivers, at the same seed. The queue's own mutant (16, the
# pass-over of a head that beat) survives the simulator through either driver; its tests kill it.
QUEUED_PROBE = _PROBE.replace("from sim import stock", "from sim import leasing").replace(
    "stock.run(seed, driver)", "leasing.run(seed, driver, queued=True)"
)


@pytest.mark.parametrize("number", ["11"])
def test_a_lease_mutant_is_killed_through_both_queue_drivers(number, tmp_path):
    first = _probe_mutant(number, tmp_path, QUEUED_PROBE)
    assert set(first) == {"sync", "async"}, first
    assert first["sync"] == first["async"]
