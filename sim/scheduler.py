"""A seeded scheduler: logical clients as threads, exactly one running at a time, virtual time.

Hand-written because the library's code is ordinary blocking Python (``client.update_item``,
``backoff.sleep``): running it unchanged as many clients needs real threads, but a thread
scheduler decides nothing deterministically. Here each client thread runs only while it holds the
baton; it hands it back at every scheduling point (each DynamoDB call, each sleep), and the
scheduler, with its own ``random.Random(seed)``, picks which ready client runs next. Sleeps do not
wait: they set a wake-up time on a virtual clock, and when no client is ready the clock jumps to
the earliest wake-up. So the seed alone decides the interleaving, and a 20-second lease costs no
wall time.

The library's clocks and sleeps are injected per client (:meth:`Task.clock`, :meth:`Task.sleep`,
:meth:`Task.backoff`); a client's clock may run ``skew`` seconds off the global one.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from turnstile_ddb import retry

# Virtual time starts here (epoch seconds), so epoch-millisecond attributes look ordinary.
EPOCH = 1_700_000_000.0
# The most virtual time one step of a client (one call: sim.ddb takes 1 to 10 ms) advances.
LONGEST_STEP = 0.010


class Abort(BaseException):
    """Raised inside a client thread when the scheduler stops a run that did not finish (a
    BaseException, so the library's ``except Exception`` does not swallow it)."""


class Crashed(BaseException):
    """The client's process died: raised at the call where it crashed and at every call it
    attempts afterwards (its ``finally`` blocks still run as Python, but they cannot reach the
    database, as a dead process's would not). A BaseException, so ``except Exception`` in the
    library does not swallow it; the workload records the op in flight as unknown and stops."""


@dataclass
class Task:
    name: str
    scheduler: Scheduler
    body: Callable[[Task], None]
    skew: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    wake: float = 0.0
    exact: bool = False  # sleeping until exactly ``wake`` (Scheduler.sleep(exact=True))
    done: bool = False
    crashed: bool = False
    waiting: Task | None = None  # joined on this task: runs again once it is done
    error: BaseException | None = None
    go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    thread: threading.Thread | None = None

    def clock(self) -> float:
        """This client's clock: epoch seconds, virtual, off by ``skew``."""
        return self.scheduler.now + self.skew

    def sleep(self, seconds: float) -> None:
        self.scheduler.sleep(self, seconds)

    def backoff(self, **settings: Any) -> retry.Backoff:
        """A :class:`turnstile_ddb.retry.Backoff` whose sleep, jitter and clock are this
        client's virtual ones (its defaults are time.sleep, random.random, time.monotonic)."""
        return retry.Backoff(sleep=self.sleep, rand=self.rng.random, clock=self.clock, **settings)


class Scheduler:
    def __init__(self, seed: int, *, max_steps: int = 200_000) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = EPOCH
        self.tasks: list[Task] = []
        self.current: Task | None = None
        self.steps = 0
        self.max_steps = max_steps
        self.aborted = False
        self._back = threading.Semaphore(0)

    def spawn(self, name: str, body: Callable[[Task], None], *, skew: float = 0.0) -> Task:
        task = Task(name, self, body, skew=skew, rng=random.Random(self.rng.getrandbits(64)))
        self.tasks.append(task)
        return task

    # -- called from the running client's thread ---------------------------------------------

    def start(self, name: str, body: Callable[[Task], None], *, skew: float = 0.0) -> Task:
        """Spawn a client while the run is under way (a heartbeat the running client starts):
        it is ready at once and runs when the scheduler picks it."""
        self._running()
        task = self.spawn(name, body, skew=skew)
        task.wake = self.now
        self._start(task)
        return task

    def join(self, other: Task) -> None:
        """The running client waits, on virtual time, until ``other`` has ended."""
        task = self._running()
        while not other.done:
            task.wake = self.now
            task.waiting = other
            try:
                self._switch(task)
            finally:
                task.waiting = None

    def nap(self, seconds: float) -> None:
        """The running client sleeps ``seconds`` of virtual time."""
        self.sleep(self._running(), seconds)

    def point(self) -> Task:
        """A scheduling point: the running client offers the baton; it resumes when picked."""
        task = self._running()
        task.wake = self.now
        self._switch(task)
        return task

    def sleep(self, task: Task, seconds: float, *, exact: bool = False) -> None:
        """``task`` sleeps ``seconds`` of virtual time. ``exact``: it wakes at exactly that
        instant: no other client starts a step that could carry the clock past it (they wait
        the few milliseconds until it has run), so a client can act on an exact millisecond."""
        task.wake = self.now + max(0.0, seconds)
        task.exact = exact
        self._switch(task)

    def advance(self, seconds: float) -> None:
        """Virtual time passes while the running client waits on a call."""
        self.now += seconds

    def _running(self) -> Task:
        if self.current is None or threading.current_thread() is not self.current.thread:
            raise RuntimeError("a scheduling point outside a simulated client")
        return self.current

    def _switch(self, task: Task) -> None:
        if self.aborted:
            raise Abort
        self._hand_on()
        task.go.acquire()
        if self.aborted:
            raise Abort

    # -- the loop ----------------------------------------------------------------------------

    def _start(self, task: Task) -> None:
        def main() -> None:
            task.go.acquire()
            try:
                if not self.aborted:
                    task.body(task)
            except (Abort, Crashed):
                pass
            except BaseException as exc:  # noqa: BLE001 - reported as the run's finding
                task.error = exc
            finally:
                task.done = True
                self._hand_on()

        task.thread = threading.Thread(target=main, name=f"sim-{task.name}", daemon=True)
        task.thread.start()

    def run(self) -> bool:
        """Run every client to its end; False when stopped at ``max_steps`` (a livelock)."""
        for task in self.tasks:
            task.wake = self.now
            self._start(task)
        self._hand_on()
        self._back.acquire()  # released by the last client to end
        self.current = None
        return not self.aborted

    def _hand_on(self) -> None:
        """Pick the next client and let it run; called by the one giving up the baton (or by
        :meth:`run`, to start), so a step costs one thread hand-off, not two through a scheduler
        thread, and none when the same client is picked again. Only the baton's holder calls it."""
        task = self._pick()
        self.current = task
        (self._back if task is None else task.go).release()

    def _pick(self) -> Task | None:
        """The client to run next, the virtual clock moved to its turn; None when all have ended."""
        while True:
            live = [task for task in self.tasks if not task.done]
            if not live:
                return None
            if self.steps >= self.max_steps and not self.aborted:
                self.aborted = True
            ready = [task for task in live if task.waiting is None or task.waiting.done]
            exact = [task for task in ready if task.exact and not self.aborted]
            first = min(exact, key=lambda t: t.wake) if exact else None
            if first is not None and first.wake - self.now < LONGEST_STEP:
                # its instant is within one step: nobody else starts one before it has run
                self.now = max(self.now, first.wake)
                first.exact = False
                task = first
            else:
                due = [task for task in ready if task.wake <= self.now or self.aborted]
                if not due:
                    self.now = min(task.wake for task in ready)
                    continue
                task = due[self.rng.randrange(len(due))]
            self.steps += 1
            return task
