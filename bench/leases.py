"""Lease workload: ``workers`` threads x ``rounds`` rounds over ``resources`` resources, each round
a waiting acquire, a fenced read-modify-write of the resource's protected item, and a release.

    python -m bench.leases [--workers 50] [--rounds 20] [--resources 5]

starts its own DynamoDB Local, creates the lease table from the synthesized template (synthesizing
first when ``cdk.out/`` is missing) and prints the numbers. :func:`run_lease_workload` is the entry
point for the benchmark harness; :func:`lease_workload` also returns every round's record, which
the integration tests check for invariants.

Protected items live in the same table as the leases, under their own keys
(``bench/<run>/data/<n>``), so the workload needs nothing but a lease table. Each one counts
accepted writes by read-then-write (no atomic ADD: only mutual exclusion keeps it right) and keeps
the list of fences it accepted, in order.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bench.harness import percentile
from turnstile import codec, lease, retry, versioned


@dataclass(frozen=True)
class Round:
    """One acquisition as the worker saw it. Times are ``time.perf_counter()`` of this process."""

    worker: int
    resource: str
    owner: str
    fence: int
    attempts: int
    asked: float  # before the first acquire call
    acquired: float  # after the acquire returned
    releasing: float  # before the release call
    accepted: bool  # the fenced write went through
    previous: dict[str, Any] | None  # the lease item as this acquisition found it (ALL_OLD)


@dataclass
class Outcome:
    rounds: list[Round]
    wall_seconds: float
    dynamodb_calls: int
    lock_keys: list[str]
    data_keys: list[str]
    protected: dict[str, dict[str, Any]] = field(default_factory=dict)  # data key -> final item

    def summary(self) -> dict[str, Any]:
        waits_ms = sorted((r.acquired - r.asked) * 1000 for r in self.rounds)
        acquisitions = len(self.rounds)
        return {
            "acquisitions": acquisitions,
            "wall_seconds": round(self.wall_seconds, 3),
            "acquisitions_per_second": round(acquisitions / self.wall_seconds, 1),
            "time_to_acquire_p50_ms": round(percentile(waits_ms, 0.50), 1),
            "time_to_acquire_p99_ms": round(percentile(waits_ms, 0.99), 1),
            "failed_attempts": sum(r.attempts - 1 for r in self.rounds),
            "rejected_writes": sum(not r.accepted for r in self.rounds),
            "dynamodb_calls": self.dynamodb_calls,
            "calls_per_acquisition": round(self.dynamodb_calls / max(1, acquisitions), 2),
        }


class CallCounter:
    """Counts every DynamoDB API call a client makes (botocore ``before-call`` hook)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.count = 0
        self._lock = threading.Lock()
        self._id = f"bench-count-{uuid.uuid4().hex}"

    def _hook(self, **_: Any) -> None:
        with self._lock:
            self.count += 1

    def __enter__(self) -> CallCounter:
        self.client.meta.events.register("before-call.dynamodb", self._hook, unique_id=self._id)
        return self

    def __exit__(self, *_: object) -> None:
        self.client.meta.events.unregister("before-call.dynamodb", unique_id=self._id)


def _protected_write(
    client: Any, table: str, key: str, held: lease.Lease, backoff: retry.Backoff
) -> bool:
    """Read the counter, then write count + 1 fenced by ``held`` (False: the fence was stale)."""
    item = versioned.read(client, table, {"resource": key}, backoff) or {}
    try:
        lease.fenced_update(
            client,
            table=table,
            key={"resource": key},
            fence=held.fence,
            changes={"count": int(item.get("count", 0)) + 1},
            backoff=backoff,
            extra={
                "set": ["#fences = list_append(if_not_exists(#fences, :none), :mine)"],
                "names": {"#fences": "fences"},
                "values": codec.values(none=[], mine=[held.fence]),
            },
        )
    except lease.StaleFence:
        return False
    return True


def lease_workload(
    client: Any,
    table: str,
    *,
    workers: int = 50,
    rounds: int = 20,
    resources: int = 5,
    ttl_ms: int = 30_000,
    wait_ms: int = 300_000,
    wait_base: float = 0.02,
    wait_cap: float = 1.0,
) -> Outcome:
    """Run the workload and return every round's record (raises the first worker error)."""
    run = uuid.uuid4().hex[:8]
    lock_keys = [f"bench/{run}/lock/{n}" for n in range(resources)]
    data_keys = [f"bench/{run}/data/{n}" for n in range(resources)]
    backoff = retry.Backoff(attempts=8, base=0.02, cap=0.5)
    waits = retry.Backoff(base=wait_base, cap=wait_cap)
    leases = lease.Leases(client=client, table=table, backoff=backoff)
    start = threading.Barrier(workers)
    records: list[Round] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def work(worker: int) -> None:
        mine: list[Round] = []
        try:
            start.wait()
            for number in range(rounds):
                which = (worker + number) % resources
                owner = f"w{worker}/r{number}"
                asked = time.perf_counter()
                held = leases.acquire_wait(
                    lock_keys[which], owner, ttl_ms, wait_ms=wait_ms, waits=waits
                )
                acquired = time.perf_counter()
                accepted = _protected_write(client, table, data_keys[which], held, backoff)
                releasing = time.perf_counter()
                leases.release(held)
                mine.append(
                    Round(
                        worker,
                        lock_keys[which],
                        owner,
                        held.fence,
                        held.attempts,
                        asked,
                        acquired,
                        releasing,
                        accepted,
                        held.previous,
                    )
                )
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            with guard:
                errors.append(exc)
            start.abort()
        with guard:
            records.extend(mine)

    threads = [threading.Thread(target=work, args=(n,), name=f"lease-{n}") for n in range(workers)]
    with CallCounter(client) as counter:
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
        calls = counter.count
    if errors:
        raise errors[0]
    outcome = Outcome(records, wall, calls, lock_keys, data_keys)
    for key in data_keys:
        outcome.protected[key] = versioned.read(client, table, {"resource": key}, backoff) or {}
    return outcome


def run_lease_workload(
    client: Any,
    table: str,
    *,
    workers: int = 50,
    rounds: int = 20,
    resources: int = 5,
    wait_base: float = 0.02,
    wait_cap: float = 1.0,
) -> dict[str, Any]:
    """The contended lease workload's numbers (see :meth:`Outcome.summary`)."""
    return lease_workload(
        client,
        table,
        workers=workers,
        rounds=rounds,
        resources=resources,
        wait_base=wait_base,
        wait_cap=wait_cap,
    ).summary()


def main(argv: list[str] | None = None) -> int:
    from local import template
    from local.dynamodb_local import DynamoDBLocal
    from service import config

    parser = argparse.ArgumentParser(description="lease workload against DynamoDB Local")
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--resources", type=int, default=5)
    parser.add_argument("--wait-base", type=float, default=0.02, help="waiting backoff base, s")
    parser.add_argument("--wait-cap", type=float, default=1.0, help="waiting backoff cap, s")
    args = parser.parse_args(argv)
    if not template.TEMPLATE.exists():
        template.synthesize()
    loaded = template.load()
    with DynamoDBLocal() as db:
        client = db.client(config=retry.client_config())
        names = template.create_tables(client, loaded)
        environment = template.merged_environment(template.function_environments(loaded, names))
        table = environment[config.table_env(config.LEASES)]
        result = run_lease_workload(
            client,
            table,
            workers=args.workers,
            rounds=args.rounds,
            resources=args.resources,
            wait_base=args.wait_base,
            wait_cap=args.wait_cap,
        )
    print(
        f"lease workload: {args.workers} workers x {args.rounds} rounds "
        f"over {args.resources} resources, waits {args.wait_base}-{args.wait_cap} s"
    )
    width = max(len(name) for name in result)
    for name, value in result.items():
        print(f"  {name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
