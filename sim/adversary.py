"""Adversarial clients: callers acting on what they do not hold, and first owners finishing late.

Every other workload's clients act only on leases and records they hold, so a condition that
forgot who holds (a renewal that checks the fence but not the owner, a completion that checks the
status but not the token) is never put to the test. Each client of this workload (registered kind
``adversary``) runs *episodes*, alternately of two kinds, each on a resource or key of its own:

* **lease**: the client takes a lease (``Leases.acquire``, one try), works a little and releases
  it (or lets it run out; half the releases come with its clock reading exactly the lease's
  ``expiresAt``, the last millisecond a release is accepted); meanwhile an intruder (a simulated
  client of its own, with its own skewed clock, started with ``Scheduler.start``) reads the lease
  item and, under an owner name of its own, presents the holder's fence: ``renew``, ``release``
  and a fenced transaction (``Leases.transact``), one to three of them, each either at a random
  moment or with its clock reading exactly the holder's ``expiresAt``
  (:meth:`sim.boundary.BoundaryClock.seek`). The protocol gives such a caller nothing: every one
  must be refused.
* **late finisher**: the client begins an idempotency key (``IdempotencyStore.begin``, a short
  lock) and then stalls past its ``lockedUntil``; a successor (started like the intruder) reads the
  record, begins the same request with its clock reading exactly ``lockedUntil`` (the lock is still
  live at that millisecond: the protocol needs ``lockedUntil < :now``), then once more a few
  milliseconds later, which takes the abandoned claim over, and completes it at once or a little
  later. The first owner wakes after the takeover and completes with its own, superseded, claim:
  it must be refused.

Judged by :func:`sim.checks.intruders_refused` (no intruder's call acknowledged),
:func:`sim.checks.live_releases` (a holder's release sent while its lease was live, up to its
``expiresAt`` included, is not refused),
:func:`sim.checks.takeovers_after_lock` (a takeover acknowledged only with a ``:now`` strictly past
the lock it replaced) and :func:`sim.checks.late_completions` (no completion acknowledged for a
claim whose key another caller had taken over, its takeover acknowledged before the completion
was sent). About 6 calls an episode, 45 a seed (two clients of four episodes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import FAIL, OK, UNKNOWN, Op
from sim import checks
from sim.boundary import BoundaryClock, Noting
from sim.ddb import create_table
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import codec, idempotency, lease, retry

LEASES_TABLE = "sim-adversary-leases"
DATA_TABLE = "sim-adversary-data"
RECORDS_TABLE = "sim-adversary-records"
PATTERN = "adversary"
TTL_MS = 1000  # the holders' leases
LOCK_MS = 300  # the first owners' idempotency locks
INTRUDER_SKEW_SECONDS = 0.2  # an intruder's or successor's clock is off the global one by this
INTRUSIONS = ("renew", "release", "transact")


class _Actor:
    """One simulated client's library objects, all reading its :class:`BoundaryClock`, and its
    calls recorded in the history (``pattern`` ``adversary``)."""

    def __init__(self, recorder: Recorder, task: Task, client: Any) -> None:
        self.recorder, self.task, self.client = recorder, task, client
        self.clock = BoundaryClock(task)
        noting: Any = Noting(client, self.clock)  # a stand-in for the boto3 client
        backoff = task.backoff(attempts=4, base=0.005, cap=0.1)
        self.leases = lease.Leases(noting, LEASES_TABLE, backoff=backoff, clock=self.clock)
        self.store = idempotency.IdempotencyStore(
            noting, RECORDS_TABLE, backoff=backoff, lock_ms=LOCK_MS, clock=self.clock
        )

    def do(self, f: str, call: Callable[[], Any], *, seek: bool = False, **args: Any) -> Op:
        """Record ``f``: outcome OK (the call's value) or FAIL (a refusal or a throttle, the
        error's name; a completion answered False), UNKNOWN on a lost outcome; ``now``: the
        first clock reading the library took; ``seek``: that reading waits for the earliest end
        noted ahead."""
        op = self.recorder.invoke(PATTERN, self.task.name, f, **args)
        self.clock.reset()
        if seek:
            op.args["seek"] = self.clock.seek()
        try:
            value = call()
        except (lease.LeaseLost, lease.Held, idempotency.StillRunning, idempotency.KeyReused) as e:
            self.recorder.complete(op, FAIL, {"error": type(e).__name__})
        except retry.RetriesExhausted as exc:
            self.recorder.complete(op, FAIL, {"error": type(exc).__name__})
        except retry.OutcomeUnknown:
            self.recorder.complete(op, UNKNOWN)
        except Crashed:
            self.recorder.complete(op, UNKNOWN)
            raise
        else:
            # a completion answered False: the claim was no longer this caller's
            self.recorder.complete(op, FAIL if value is False else OK, value)
        finally:
            if self.clock.readings:
                op.args["now"] = self.clock.readings[0]
            self.clock.reset()
        return op

    def read(self, table: str, key: dict[str, str]) -> dict[str, Any]:
        """The item as it is (a consistent read, not recorded); its ends noted. Empty when the
        item is missing or the read failed."""
        try:
            answer = retry.call(
                lambda: self.client.get_item(
                    TableName=table, Key=codec.encode_item(key), ConsistentRead=True
                ),
                backoff=self.task.backoff(attempts=4, base=0.005, cap=0.1),
                idempotent=True,
                pattern=PATTERN,
            )
        except (retry.RetriesExhausted, retry.OutcomeUnknown):
            return {}
        item = codec.decode_item(answer.get("Item")) or {}
        self.clock.note_item(item)
        return item

    def start(self, name: str, body: Callable[[_Actor], None]) -> Task:
        """Another simulated client sharing this one's connection, with a clock of its own."""
        skew = round(self.task.rng.uniform(-INTRUDER_SKEW_SECONDS, INTRUDER_SKEW_SECONDS), 6)
        recorder, client = self.recorder, self.client
        return recorder.scheduler.start(
            f"{self.task.name}:{name}", lambda task: body(_Actor(recorder, task, client)), skew=skew
        )

    # -- episodes -------------------------------------------------------------------------------

    def lease(self, resource: str) -> None:
        """Hold a lease while an intruder presents its fence under another owner."""
        owner = f"{self.task.name}/{resource}"
        held = self.do(
            "acquire",
            lambda: _granted(self.leases.acquire(resource, owner, TTL_MS)),
            resource=resource,
        )
        if held.type != OK:
            return
        intruder = self.start("intruder", lambda other: other.intrude(resource))
        end = held.value["expiresAt"]
        at_end = self.task.rng.random() < 0.5  # release with the clock reading exactly ``end``
        self.task.sleep(self.task.rng.uniform(0.0, (0.9 if at_end else 1.2) * TTL_MS / 1000))
        if at_end or self.task.rng.random() < 0.7:
            granted = lease.Lease(resource, owner, held.value["fence"], end)
            self.do(
                "release",
                lambda: self.leases.release(granted),
                seek=at_end,
                holder=True,
                resource=resource,
                expiresAt=end,
            )
        self.recorder.scheduler.join(intruder)

    def intrude(self, resource: str) -> None:
        """Read the lease item; present its fence under this client's own owner name."""
        for _ in range(self.task.rng.randint(1, 3)):
            self.task.sleep(self.task.rng.uniform(0.0, 0.4))
            item = self.read(LEASES_TABLE, {"resource": resource})
            if "fence" not in item:
                return
            self.present(resource, int(item["fence"]), str(item.get("owner")))

    def present(self, resource: str, fence: int, owner: str) -> None:
        """One intrusion: ``owner``'s ``fence`` presented under this client's own name, with
        its clock at a random moment or reading exactly the end it noted last."""
        stolen = lease.Lease(resource, self.task.name, fence, TTL_MS)
        f = self.task.rng.choice(INTRUSIONS)
        seek = self.task.rng.random() < 0.5
        args = {"resource": resource, "fence": fence, "owner": owner}
        put = {"Put": {"TableName": DATA_TABLE, "Item": codec.encode_item(args)}}
        calls: dict[str, Callable[[], Any]] = {
            "renew": lambda: _granted(self.leases.renew(stolen, TTL_MS)),
            "release": lambda: self.leases.release(stolen),
            "transact": lambda: self.leases.transact(stolen, [put]),
        }
        self.do(f, calls[f], seek=seek, **args)

    def late_finisher(self, key: str) -> None:
        """Begin ``key``, stall past the lock while a successor takes the claim over, then
        complete with the superseded claim."""
        mine: list[idempotency.InProgress] = []
        begun = self.do("begin", lambda: _claimed(self.store.begin(key, key), mine), key=key)
        if begun.type != OK or not mine:
            return
        successor = self.start("successor", lambda other: other.take_over(key))
        ended = mine[0].locked_until / 1000
        self.task.sleep(max(0.0, ended - self.task.clock()) + self.task.rng.uniform(0.05, 0.3))
        self.do("complete", lambda: self.store.complete(mine[0], "late"), key=key, first=True)
        self.recorder.scheduler.join(successor)

    def take_over(self, key: str) -> None:
        """Begin the same request at exactly the record's ``lockedUntil``, then just after it;
        complete the claim at once or a little later."""
        self.task.sleep(self.task.rng.uniform(0.0, LOCK_MS / 1000 / 2))
        if "lockedUntil" not in self.read(RECORDS_TABLE, {"id": key}):
            return
        claimed: list[idempotency.InProgress] = []
        for seek in (True, False):
            taken = self.do(
                "begin", lambda: _claimed(self.store.begin(key, key), claimed), seek=seek, key=key
            )
            if taken.type != FAIL or taken.value.get("error") != "StillRunning":
                break
            self.task.sleep(self.task.rng.uniform(0.001, 0.02))
        if claimed:
            self.task.sleep(self.task.rng.choice((0.0, self.task.rng.uniform(0.1, 0.6))))
            self.do("complete", lambda: self.store.complete(claimed[0], "second"), key=key)


def _granted(held: lease.Lease) -> dict[str, int]:
    return {"fence": held.fence, "expiresAt": held.expires_at_ms}


def _claimed(
    answer: idempotency.InProgress | idempotency.Replay, claims: list[idempotency.InProgress]
) -> dict[str, Any]:
    """A begin's answer as the history shows it; an :class:`InProgress` kept in ``claims``."""
    if isinstance(answer, idempotency.Replay):
        return {"replay": answer.answer}
    claims.append(answer)
    return {"token": answer.token, "lockedUntil": answer.locked_until}


@dataclass
class Adversary:
    episodes: int = 4  # per client, alternately lease and late-finisher episodes

    def setup(self, real: Any) -> None:
        create_table(real, LEASES_TABLE, "resource")
        create_table(real, DATA_TABLE, "resource")
        create_table(real, RECORDS_TABLE, "id")

    def body(self, recorder: Recorder, client: Any) -> Any:
        def run(task: Task) -> None:
            actor = _Actor(recorder, task, client)
            first = task.rng.randrange(2)
            for n in range(self.episodes):
                name = f"{task.name}x{n}"
                if (first + n) % 2 == 0:
                    actor.lease(name)
                else:
                    actor.late_finisher(name)

        return run

    def check(self, recorder: Recorder, stats: Any, real: Any) -> Report:
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        report = checks.intruders_refused(ops)
        report.merge(checks.live_releases(ops))
        report.merge(checks.takeovers_after_lock(ops))
        report.merge(checks.late_completions(ops))
        return report

    def final(self, real: Any) -> dict[str, Any]:
        return {}
