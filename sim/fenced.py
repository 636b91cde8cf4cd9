"""The fenced-update workload: ``turnstile_ddb.lease.fenced_update`` under leases.

Each client takes a lease on a resource (``Leases.acquire_wait``), works a little, and writes the
protected item with ``fenced_update`` carrying the lease's fence (the item remembers the last
fence it accepted, ``lastFence``, and appends each accepted fence to a log). Some writes are
followed by a second write under the *same* fence, as a caller does that did not combine its
changes into one write or that resends a write it believes failed: ``fenced_update`` promises
one accepted write per fence per item, so the second must be refused (``StaleFence``) whenever
the first landed. Some holders release before that second write, so it may also meet a newer
holder's fence.

Judged by :func:`sim.checks.fenced_updates`: the fences each item accepted strictly increase
(its log), every acknowledged write is in the log and every logged fence was written by a write
not refused, and no write is acknowledged under a fence that an earlier acknowledged write (one
answered before it was sent) already carried, or a lower one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import FAIL, OK, UNKNOWN
from sim import checks
from sim.ddb import create_table
from sim.scheduler import Crashed, Task
from sim.workloads import Recorder
from turnstile_ddb import codec, lease, retry

FENCED_LEASES_TABLE = "sim-fenced-leases"
FENCED_DATA_TABLE = "sim-fenced-data"
FENCED_TTL_MS = 2000
PATTERN = "fenced"


@dataclass
class Fenced:
    resources: list[str]
    operations: int = 3  # acquisitions per client
    again_share: float = 0.5  # of writes followed by a second write under the same fence
    work_seconds: float = 0.5  # the most a holder works before its write

    def setup(self, client: Any) -> None:
        create_table(client, FENCED_LEASES_TABLE, "resource")
        create_table(client, FENCED_DATA_TABLE, "id")

    def body(self, recorder: Recorder, client: Any) -> Any:
        def run(task: Task) -> None:
            leases = lease.Leases(
                client, FENCED_LEASES_TABLE, backoff=task.backoff(attempts=4), clock=task.clock
            )
            waits = task.backoff(attempts=50, base=0.05, cap=0.5)
            writes = task.backoff(attempts=4)
            for number in range(self.operations):
                resource = task.rng.choice(self.resources)
                owner = f"{task.name}.{number}"
                op = recorder.invoke(PATTERN, task.name, "acquire", resource=resource, owner=owner)
                try:
                    held = leases.acquire_wait(
                        resource, owner, FENCED_TTL_MS, wait_ms=3000, waits=waits
                    )
                except (lease.Held, retry.RetriesExhausted) as exc:
                    recorder.complete(op, FAIL, {"error": type(exc).__name__})
                    continue
                except retry.OutcomeUnknown:
                    recorder.complete(op, UNKNOWN)
                    continue
                except Crashed:
                    recorder.complete(op, UNKNOWN)
                    raise
                recorder.complete(op, OK, {"fence": held.fence, "expiresAt": held.expires_at_ms})
                task.sleep(task.rng.random() * self.work_seconds)
                again = task.rng.random() < self.again_share
                early = again and task.rng.random() < 0.5  # release before the second write
                self._write(recorder, task, client, writes, held, "write")
                if early:
                    self._release(leases, held)
                    task.sleep(task.rng.random() * 2 * self.work_seconds)
                if again:
                    self._write(recorder, task, client, writes, held, "write-again")
                if not early:
                    self._release(leases, held)

        return run

    @staticmethod
    def _release(leases: lease.Leases, held: lease.Lease) -> None:
        with contextlib.suppress(lease.LeaseLost, retry.RetriesExhausted, retry.OutcomeUnknown):
            leases.release(held)

    @staticmethod
    def _write(
        recorder: Recorder,
        task: Task,
        client: Any,
        backoff: retry.Backoff,
        held: lease.Lease,
        f: str,
    ) -> None:
        op = recorder.invoke(PATTERN, task.name, f, resource=held.resource, fence=held.fence)
        try:
            lease.fenced_update(
                client,
                table=FENCED_DATA_TABLE,
                key={"id": held.resource},
                fence=held.fence,
                changes={"by": held.owner},
                backoff=backoff,
                extra={
                    "set": ["#log = list_append(if_not_exists(#log, :empty), :f)"],
                    "names": {"#log": "log"},
                    "values": {":empty": {"L": []}, ":f": {"L": [{"N": str(held.fence)}]}},
                },
            )
        except (lease.StaleFence, retry.RetriesExhausted) as exc:
            recorder.complete(op, FAIL, {"error": type(exc).__name__})
        except (retry.OutcomeUnknown, Crashed) as exc:
            recorder.complete(op, UNKNOWN)
            if isinstance(exc, Crashed):
                raise
        else:
            recorder.complete(op, OK)

    def logs(self, client: Any) -> dict[str, list[int]]:
        """The fences each resource's protected item accepted, in order."""
        logs: dict[str, list[int]] = {}
        for resource in self.resources:
            item = client.get_item(
                TableName=FENCED_DATA_TABLE,
                Key=codec.encode_item({"id": resource}),
                ConsistentRead=True,
            ).get("Item")
            log = (codec.decode_item(item) or {}).get("log", [])
            logs[resource] = [int(fence) for fence in log]
        return logs

    def check(self, recorder: Recorder, stats: Any, real: Any) -> Report:
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        return checks.fenced_updates(ops, self.logs(real))

    def final(self, real: Any) -> dict[str, Any]:
        return {"logs": self.logs(real)}


def make(each: int) -> Fenced:
    """The registered kind's workload (sim.kinds): one protected item, ``each`` leases a client."""
    return Fenced(["f0"], operations=each)
