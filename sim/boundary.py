"""A clock that seeks boundaries: readings at exactly the milliseconds items record.

Calls take 1 to 10 ms of virtual time and clients' clocks are skewed, so a client of the other
workloads almost never reads its clock at the very millisecond an item records as an end (a
hold's ``holdUntil``, a lease's ``expiresAt``, an idempotency record's ``lockedUntil``): the
boundary of every condition (``<`` against ``<=``) goes untested. A :class:`BoundaryClock` is the
clock a client's library objects read; it collects those times (:meth:`BoundaryClock.note`: what
the client's own writes recorded, through :class:`Noting`, and what it read from items) and can
make its next reading wait, on virtual time, until this client's clock shows exactly one of them:

* :meth:`BoundaryClock.arm`: a given millisecond;
* :meth:`BoundaryClock.seek`: the earliest time noted that is still ahead;
* ``seek_written``: the time the next write records (the hold a claim just wrote, say), so the
  library's next decision after that write is taken at exactly its end.

The wait is the scheduler's exact sleep (``Scheduler.sleep(exact=True)``): no other client starts
a step that could carry the clock past it. It is a pause placed just before the clock is read (the
pause fault places one before a call); when another client's step has already carried virtual
time past the millisecond, the reading is later, and the properties judge it the same way.
:attr:`BoundaryClock.readings` are the milliseconds read since the last :meth:`BoundaryClock.reset`
(the first of an operation's is the ``:now`` it sent), :attr:`BoundaryClock.landed` each armed
millisecond with the reading it gave (equal unless another client's step carried time past it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.scheduler import Task

# Request values and item attributes that record an end (epoch ms), in every table the library
# writes: a claim's ``:until`` (``holdUntil``), a lease's ``:expiresAt`` (``expiresAt``), an
# idempotency record's ``lockedUntil`` (its ``expiresAt`` is a TTL in epoch seconds: not one).
WRITTEN_VALUES = (":until", ":expiresAt")
WRITTEN_ATTRIBUTES = ("lockedUntil", "holdUntil")


@dataclass
class BoundaryClock:
    """A client's clock (epoch seconds) as its library objects read it (module docstring)."""

    task: Task
    at_ms: int | None = None
    seek_written: bool = False
    boundaries: set[int] = field(default_factory=set)
    readings: list[int] = field(default_factory=list)
    landed: list[tuple[int, int]] = field(default_factory=list)  # (armed ms, the reading)

    def __call__(self) -> float:
        armed, self.at_ms = self.at_ms, None
        if armed is not None:
            # half a millisecond in, so float rounding cannot move the reading
            ahead = (armed + 0.5) / 1000 - self.task.clock()
            if ahead > 0:
                self.task.scheduler.sleep(self.task, ahead, exact=True)
        now = self.task.clock()
        self.readings.append(int(now * 1000))
        if armed is not None:
            self.landed.append((armed, self.readings[-1]))
        return now

    def arm(self, at_ms: int) -> None:
        """The next reading waits until this client's clock shows exactly ``at_ms``."""
        self.at_ms = at_ms

    def note(self, at_ms: int, *, written: bool = False) -> None:
        """A time an item records; ``written`` by this client's write (``seek_written`` arms it)."""
        self.boundaries.add(at_ms)
        if written and self.seek_written:
            self.seek_written = False
            self.arm(at_ms)

    def note_item(self, item: Mapping[str, Any] | None) -> None:
        """The ends a (decoded) item records: ``expiresAt``, ``lockedUntil``, ``holdUntil``."""
        for name in ("expiresAt", *WRITTEN_ATTRIBUTES):
            if item and isinstance(item.get(name), int | float) and item[name] > 0:
                self.note(int(item[name]))

    def seek(self) -> int | None:
        """Arm the earliest noted time still ahead of this client's clock (None: none is)."""
        now = int(self.task.clock() * 1000)
        ahead = [at for at in self.boundaries if at > now]
        if not ahead:
            return None
        self.arm(min(ahead))
        return min(ahead)

    def reset(self) -> None:
        self.at_ms = None
        self.seek_written = False
        self.readings.clear()
        self.landed.clear()


class Noting:
    """A simulated client that tells ``clock`` the ends its successful writes recorded."""

    def __init__(self, client: Any, clock: BoundaryClock) -> None:
        self.client, self.clock = client, clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def _noted(self, answer: Any, *requests: Mapping[str, Any]) -> Any:
        for request in requests:
            values = request.get("ExpressionAttributeValues", {})
            item = request.get("Item", {})
            ends = [values[n] for n in WRITTEN_VALUES if n in values]
            ends += [item[n] for n in WRITTEN_ATTRIBUTES if n in item]
            for end in ends:
                if "N" in end:
                    self.clock.note(int(end["N"]), written=True)
        return answer

    def put_item(self, **request: Any) -> Any:
        return self._noted(self.client.put_item(**request), request)

    def update_item(self, **request: Any) -> Any:
        return self._noted(self.client.update_item(**request), request)

    def transact_write_items(self, **request: Any) -> Any:
        answer = self.client.transact_write_items(**request)
        elements = [e.get("Update") or e.get("Put") or {} for e in request["TransactItems"]]
        return self._noted(answer, *elements)


class Stalling:
    """A simulated client, except that when ``seconds`` is set its next write (a claim:
    ``UpdateItem`` or ``TransactWriteItems``) first waits that long on this client's clock, once:
    a process paused between its read and its write, so the write lands after the hold it
    records has ended."""

    def __init__(self, client: Any, task: Task) -> None:
        self.client, self.task = client, task
        self.seconds: float | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def _stall(self) -> None:
        if self.seconds is not None:
            seconds, self.seconds = self.seconds, None
            self.task.sleep(seconds)

    def update_item(self, **request: Any) -> Any:
        self._stall()
        return self.client.update_item(**request)

    def transact_write_items(self, **request: Any) -> Any:
        self._stall()
        return self.client.transact_write_items(**request)
