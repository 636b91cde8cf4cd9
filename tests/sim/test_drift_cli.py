"""``python -m sim.drift`` (the drift workloads over many seeds, the mutant table's async column):
clean on the tree, and its exit status and last line say when a history is violated or the two
front doors drift apart."""

from __future__ import annotations

from typing import Any

import pytest

from sim import drift
from turnstile_ddb import _core
from turnstile_ddb.aio import versioned as aio_versioned


def test_every_drift_workload_is_clean_and_agrees_through_both_drivers(capsys):
    assert drift.main(["--seeds", "2"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(", ".join(drift.WORKLOADS) + " through sync and async: 0 violations, ")
    assert ", 0 drifts over 2 seeds" in last and len(drift.WORKLOADS) >= 6


def test_an_async_front_door_that_sends_one_request_more_is_a_drift(monkeypatch, capsys):
    # Given an async decrement that reads the item first (the sync one does not)
    real = aio_versioned.decrement

    async def drifted(client: Any, **arguments: Any) -> Any:
        await aio_versioned.read(client, arguments["table"], arguments["key"], arguments["backoff"])
        return await real(client, **arguments)

    monkeypatch.setattr(aio_versioned, "decrement", drifted)
    # Then the run fails, naming the drift, with no violation (each history is still correct)
    assert drift.main(["--seeds", "3", "--only", "stock"]) == 1
    out = capsys.readouterr().out
    assert "stock seed " in out and "histories differ" in out
    assert out.splitlines()[-1].startswith("stock through sync and async: 0 violations, ")


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_lost_restock_is_a_violation_through_either_driver(monkeypatch, capsys, driver):
    # Given both drivers dropping every restock (answered without being sent)
    def losing(run: Any) -> Any:
        def driven(client: Any, protocol: Any) -> Any:
            frame = getattr(protocol, "gi_frame", None)
            if frame is not None and frame.f_locals.get("delta", 0) > 0:
                protocol.close()
                return {"stock": 0, "version": 0}
            return run(client, protocol)

        return driven

    async def losing_async(client: Any, protocol: Any) -> Any:
        frame = getattr(protocol, "gi_frame", None)
        if frame is not None and frame.f_locals.get("delta", 0) > 0:
            protocol.close()
            return {"stock": 0, "version": 0}
        return await real_async(client, protocol)

    real_async = _core.run_async
    monkeypatch.setattr(_core, "run", losing(_core.run))
    monkeypatch.setattr(_core, "run_async", losing_async)
    # Then the chosen driver's run fails with the stock's conservation violated
    assert drift.main(["--seeds", "5", "--only", "stock", "--driver", driver]) == 1
    out = capsys.readouterr().out
    assert f"{driver}: stock conserved" in out
    assert " 0 violations" not in out.splitlines()[-1]
