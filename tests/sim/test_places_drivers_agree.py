"""The two drivers cannot drift on capacity and slots: one simulator seed of the places workload
(sim.places: joins, leaves, bookings and releases, faults on) run through the synchronous front
doors and through turnstile_ddb.aio gives the same history, call for call."""

from __future__ import annotations

from typing import Any

import pytest

from sim import places
from turnstile_ddb.aio import slots as aio_slots

SEEDS = range(30)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_places_seed_gives_one_history_through_either_driver(seed):
    by_sync, sync_report = places.run(seed, "sync")
    by_async, async_report = places.run(seed, "async")
    assert by_async == by_sync
    assert sync_report.violations == [] and async_report.violations == []
    assert " ok\n" in by_sync and "join" in by_sync and "book_any" in by_sync


def test_an_async_booking_that_drifts_is_caught(monkeypatch):
    # Given an async book_any that tries the candidates last to first (the sync one: in order)
    real = aio_slots.book_any

    async def drifted(client: Any, table: str, keys: Any, holder: str, **kwargs: Any) -> Any:
        return await real(client, table, list(reversed(keys)), holder, **kwargs)

    monkeypatch.setattr(aio_slots, "book_any", drifted)
    # Then some seed's histories differ
    differing = [
        seed for seed in range(5) if places.run(seed, "sync")[0] != places.run(seed, "async")[0]
    ]
    assert differing
