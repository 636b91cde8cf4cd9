"""``local.workers.WorkerPool``: a function's concurrent requests each get a process of their own,
as Lambda scales a function, up to a cap. Its members here are fakes (no process is started): the
pool's bookkeeping is what is under test; ``tests/e2e`` and ``make soak`` run it for real."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from local import workers

FUNCTION = workers.FunctionDef(
    logical_id="Fn",
    handler="service.handlers.products.handler",
    asset=Path("/nonexistent"),
    environment={},
    timeout_seconds=3,
    memory_mb=128,
    role="Role",
)


@dataclass
class FakeProcess:
    pid: int
    alive: bool = True

    def poll(self) -> int | None:
        return None if self.alive else 1


@dataclass
class Member(workers.Worker):
    """A pool member that counts its own concurrent requests instead of running a function."""

    active: int = 0
    most: int = 0
    served: int = 0
    gate: threading.Barrier | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spawn(self) -> Member:
        self.process = FakeProcess(1000 + next(PIDS))  # type: ignore[assignment]
        return self

    def ready(self) -> Member:
        return self

    def invoke_answer(
        self, event: Any, request_id: str | None = None, chaos: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            if self.gate is not None:
                self.gate.wait()
            return {"result": {"pid": self.process.pid if self.process else None, **event}}
        finally:
            with self.lock:
                self.active -= 1
                self.served += 1

    def stop(self) -> None:
        if self.process is not None:
            self.process.alive = False  # type: ignore[attr-defined]


PIDS = iter(range(10**6))


@dataclass
class Pool(workers.WorkerPool):
    gate: threading.Barrier | None = None

    def _new(self) -> workers.Worker:
        return Member(FUNCTION, [], {}, None, gate=self.gate)


def members(pool: workers.WorkerPool) -> list[Member]:
    return [m for m in pool.members if isinstance(m, Member)]


def test_concurrent_requests_each_get_a_process_of_their_own() -> None:
    # Given a pool of three, and three requests that only finish once all three are in progress
    gate = threading.Barrier(3, timeout=30)  # a pool that serialized them would break it
    pool = Pool(FUNCTION, [], {}, None, size=3, gate=gate).spawn().ready()
    # When they arrive together
    with ThreadPoolExecutor(3) as threads:
        answers = list(threads.map(lambda i: pool({"n": i}), range(3)))
    # Then three processes served one request each, none two at a time
    assert sorted(a["n"] for a in answers) == [0, 1, 2]
    assert len({a["pid"] for a in answers}) == 3
    assert [m.most for m in members(pool)] == [1, 1, 1]
    assert len(pool.pids()) == 3


def test_beyond_the_cap_a_request_waits_for_a_free_process() -> None:
    # Given a pool of two
    pool = Pool(FUNCTION, [], {}, None, size=2).spawn().ready()
    # When twenty requests arrive from eight threads
    with ThreadPoolExecutor(8) as threads:
        answers = list(threads.map(lambda i: pool({"n": i}), range(20)))
    # Then all are served, by two processes at most, each one request at a time
    assert len(answers) == 20
    assert len(pool.members) <= 2
    assert sum(m.served for m in members(pool)) == 20
    assert all(m.most == 1 for m in members(pool))


def test_one_request_after_another_reuses_the_warm_process() -> None:
    pool = Pool(FUNCTION, [], {}, None, size=4).spawn().ready()
    pids = {pool({"n": i})["pid"] for i in range(5)}
    assert len(pids) == 1
    assert len(pool.members) == 1


def test_a_process_that_died_is_replaced_on_the_next_request() -> None:
    # Given a pool whose only process has died since its last request
    pool = Pool(FUNCTION, [], {}, None, size=2).spawn().ready()
    first = pool({})["pid"]
    members(pool)[0].stop()
    assert pool.pids() == []
    # When the next request comes
    second = pool({})["pid"]
    # Then a new process serves it, and the dead one is no longer a member
    assert second != first
    assert pool.pids() == [second]
    assert len(pool.members) == 1


@dataclass
class Broken(Pool):
    """A pool whose every process after the first fails its init."""

    def _new(self) -> workers.Worker:
        if self.members:
            raise workers.InitError("Fn failed to start")
        return Member(FUNCTION, [], {}, None)


def test_a_request_waiting_for_a_process_that_fails_to_start_gets_the_init_error() -> None:
    # Given a pool of two whose first process is busy with a request that waits for another
    gate = threading.Barrier(2, timeout=30)
    pool = Broken(FUNCTION, [], {}, None, size=2).spawn().ready()
    first = members(pool)[0]
    first.gate = gate
    with ThreadPoolExecutor(1) as thread:
        busy = thread.submit(pool, {})
        # When the second request needs a new process, whose init fails
        with pytest.raises(workers.InitError, match="failed to start"):
            pool({})
        gate.wait()  # then the first one may finish
        assert busy.result()["pid"] == first.process.pid  # type: ignore[union-attr]


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="worker mode"):
        workers.start({"Resources": {}}, Path("/nonexistent"), {}, mode="threads", layers=[])
