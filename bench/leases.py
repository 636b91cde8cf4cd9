"""Lease workload: ``workers`` threads x ``rounds`` rounds over ``resources`` resources, each round
a waiting acquire, a fenced read-modify-write of the resource's protected item, and a release;
and a dead-holder scenario: holders that die without releasing, others waiting.

    python -m bench.leases [--workers 50] [--rounds 20] [--resources 5] [--strategy queue]

starts its own DynamoDB Local, creates the lease table from the synthesized template (synthesizing
first when ``cdk.out/`` is missing) and prints the numbers. :func:`rows` is the entry point for the
benchmark harness (one row per strategy); :func:`lease_workload` also returns every round's
record, which the integration tests check for invariants.

Strategies: ``retry`` is :meth:`turnstile_ddb.lease.Leases.acquire_wait` (poll with jittered
backoff);
``queue`` is :class:`turnstile_ddb.lease_queue.LeaseQueue` (FIFO tickets, heartbeats), with its
defaults or with other settings (the DynamoDB lock client's: lease 20 s, heartbeat 5 s).

Protected items live in the same table as the leases, under their own keys
(``bench/<run>/data/<n>``), so the workload needs nothing but a lease table. Each one counts
accepted writes by read-then-write (no atomic ADD: only mutual exclusion keeps it right) and keeps
the list of fences it accepted, in order.

Figures (see docs/patterns/leases.md): ``calls_per_acquisition`` is every DynamoDB API call the
lock made, divided by the acquisitions: counted by a botocore ``before-call`` hook on the one
client every thread shares, so each attempt of a retried call counts, a ``TransactWriteItems``
counts once, and nothing is left out: tickets, claims and refused claims (the queue's looks),
beats, pass-overs, tombstones, reads that settle a lost answer, the retry loop's acquire
attempts, every holder heartbeat (the renewals of the :class:`turnstile_ddb.lease_queue.Heartbeat`
thread) and the release. The only calls not in it are the protected read and fenced write each
round makes (the workload's own, the same for every strategy, counted on the same hook while the
worker thread marks them); ``total_calls_per_acquisition`` adds them.
``fairness_jain`` is Jain's index over how many acquisitions each worker had made when half of all
acquisitions were done (1.0: everyone equally far). An order violation is an acquisition served
while an earlier waiter of the same resource still waited (earlier: by ticket in the queue, by
first attempt in the retry loop). A fence violation is a fence handed out twice, or a protected
item accepting a fence not above the previous one. Takeover: from a holder's death (its last
heartbeat, no release) to the next acquisition of its resource.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from bench.harness import percentile
from turnstile_ddb import codec, lease, retry, versioned
from turnstile_ddb.lease_queue import LeaseQueue, QueueSettings

RETRY = "retry"
QUEUE = "queue"
LOCK_CLIENT = QueueSettings(heartbeat_ms=5_000, expiry_ms=20_000)  # its lease and heartbeat
RETRY_DEAD_TTL_MS = 20_000  # the retry loop's lease in the dead-holder scenario (lock client's)


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
    ticket: int | None = None  # the queue ticket it was served on
    lost: bool = False  # taken over before its release (a heartbeat came later than L)


@dataclass
class Outcome:
    rounds: list[Round]
    wall_seconds: float
    dynamodb_calls: int
    lock_keys: list[str]
    data_keys: list[str]
    protected: dict[str, dict[str, Any]] = field(default_factory=dict)  # data key -> final item
    lock_calls: int = 0
    write_latencies_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        waits_ms = sorted((r.acquired - r.asked) * 1000 for r in self.rounds)
        acquisitions = len(self.rounds)
        return {
            "acquisitions": acquisitions,
            "wall_seconds": round(self.wall_seconds, 3),
            "acquisitions_per_second": round(acquisitions / self.wall_seconds, 1),
            "time_to_acquire_p50_ms": round(percentile(waits_ms, 0.50), 1),
            "time_to_acquire_p99_ms": round(percentile(waits_ms, 0.99), 1),
            "failed_attempts": sum(max(0, r.attempts - 1) for r in self.rounds),
            "rejected_writes": sum(not r.accepted for r in self.rounds),
            "lost_leases": sum(r.lost for r in self.rounds),
            "dynamodb_calls": self.dynamodb_calls,
            "calls_per_acquisition": round(self.lock_calls / max(1, acquisitions), 2),
            "total_calls_per_acquisition": round(self.dynamodb_calls / max(1, acquisitions), 2),
            "fairness_jain": round(jain(self.rounds), 3),
            "order_violations": order_violations(self.rounds),
            "fence_violations": fence_violations(self.rounds, self.protected),
            "write_p99_ms": round(percentile(self.write_latencies_ms, 0.99), 1),
        }


def jain(rounds: list[Round]) -> float:
    """Jain's index over per-worker acquisitions made by the time half of all were made."""
    if not rounds:
        return 1.0
    ordered = sorted(rounds, key=lambda r: r.acquired)
    cut = ordered[len(ordered) // 2 - 1].acquired if len(ordered) > 1 else ordered[0].acquired
    workers = {r.worker for r in rounds}
    counts = [sum(1 for r in rounds if r.worker == w and r.acquired <= cut) for w in workers]
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else 1.0


def order_violations(rounds: list[Round]) -> int:
    """Acquisitions served while an earlier waiter of the same resource still waited."""
    by_resource: dict[str, list[Round]] = defaultdict(list)
    for r in rounds:
        by_resource[r.resource].append(r)
    violations = 0
    for mine in by_resource.values():
        queued = all(r.ticket is not None for r in mine)
        for b in mine:
            for a in mine:
                if a is b or a.fence < b.fence:
                    continue
                if queued:
                    earlier = a.ticket is not None and b.ticket is not None and a.ticket < b.ticket
                else:  # retry loop: a asked first and was still asking when b was served
                    earlier = a.asked < b.asked and a.acquired > b.acquired
                if earlier:
                    violations += 1
                    break
    return violations


def fence_violations(rounds: list[Round], protected: dict[str, dict[str, Any]]) -> int:
    """Fences handed out twice on one resource, plus protected items' non-increasing steps."""
    seen: dict[str, set[int]] = defaultdict(set)
    violations = 0
    for r in rounds:
        if r.fence in seen[r.resource]:
            violations += 1
        seen[r.resource].add(r.fence)
    for item in protected.values():
        fences = [int(f) for f in item.get("fences", [])]
        violations += sum(1 for x, y in itertools.pairwise(fences) if y <= x)
    return violations


class CallCounter:
    """Counts every DynamoDB API call a client makes (botocore ``before-call`` hook), apart the
    ones made inside :meth:`protected` (the workload's own reads and writes), and times writes."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.count = 0
        self.lock_calls = 0
        self.write_latencies_ms: list[float] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._id = f"bench-count-{uuid.uuid4().hex}"

    def _hook(self, model: Any = None, **_: Any) -> None:
        self._local.started = time.perf_counter()
        with self._lock:
            self.count += 1
            if not getattr(self._local, "protected", False):
                self.lock_calls += 1

    def _done(self, model: Any = None, **_: Any) -> None:
        started = getattr(self._local, "started", None)
        if started is not None and getattr(model, "name", "") in ("UpdateItem", "PutItem"):
            with self._lock:
                self.write_latencies_ms.append((time.perf_counter() - started) * 1000)

    def protected(self) -> _Protected:
        return _Protected(self._local)

    def __enter__(self) -> CallCounter:
        events = self.client.meta.events
        events.register("before-call.dynamodb", self._hook, unique_id=self._id)
        events.register("after-call.dynamodb", self._done, unique_id=self._id + "-done")
        return self

    def __exit__(self, *_: object) -> None:
        events = self.client.meta.events
        events.unregister("before-call.dynamodb", unique_id=self._id)
        events.unregister("after-call.dynamodb", unique_id=self._id + "-done")


class _Protected:
    def __init__(self, local: threading.local) -> None:
        self.local = local

    def __enter__(self) -> None:
        self.local.protected = True

    def __exit__(self, *_: object) -> None:
        self.local.protected = False


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
    strategy: str = RETRY,
    settings: QueueSettings | None = None,
) -> Outcome:
    """Run the workload and return every round's record (raises the first worker error).

    ``retry``: a lease of ``ttl_ms``, waited for with backoff ``wait_base``..``wait_cap``.
    ``queue``: a queued wait with ``settings`` (lease L, renewed every H by a heartbeat thread).
    """
    run = uuid.uuid4().hex[:8]
    lock_keys = [f"bench/{run}/lock/{n}" for n in range(resources)]
    data_keys = [f"bench/{run}/data/{n}" for n in range(resources)]
    backoff = retry.Backoff(attempts=8, base=0.02, cap=0.5)
    waits = retry.Backoff(base=wait_base, cap=wait_cap)
    leases = lease.Leases(client=client, table=table, backoff=backoff)
    queue = LeaseQueue(leases, settings or QueueSettings())
    start = threading.Barrier(workers)
    records: list[Round] = []
    errors: list[BaseException] = []
    guard = threading.Lock()
    counter = CallCounter(client)
    unanswered = [0]

    def work(worker: int) -> None:
        mine: list[Round] = []
        try:
            start.wait()
            for number in range(rounds):
                which = (worker + number) % resources
                owner = f"w{worker}/r{number}"
                asked = time.perf_counter()
                while True:  # a lost answer on an overloaded machine: ask again
                    try:
                        if strategy == QUEUE:
                            held = queue.acquire(lock_keys[which], owner, wait_ms=wait_ms)
                        else:
                            held = leases.acquire_wait(
                                lock_keys[which], owner, ttl_ms, wait_ms=wait_ms, waits=waits
                            )
                        break
                    except (retry.OutcomeUnknown, retry.RetriesExhausted):
                        with guard:
                            unanswered[0] += 1
                acquired = time.perf_counter()
                if strategy == QUEUE:
                    with queue.heartbeat(held) as beat, counter.protected():
                        accepted = _protected_write(client, table, data_keys[which], held, backoff)
                    held = beat.lease
                else:
                    with counter.protected():
                        accepted = _protected_write(client, table, data_keys[which], held, backoff)
                releasing = time.perf_counter()
                try:
                    leases.release(held)
                    lost = False
                except lease.LeaseLost:  # its heartbeat came too late: a successor took over
                    lost = True
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
                        held.ticket,
                        lost,
                    )
                )
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            with guard:
                errors.append(exc)
            start.abort()
        with guard:
            records.extend(mine)

    threads = [threading.Thread(target=work, args=(n,), name=f"lease-{n}") for n in range(workers)]
    with counter:
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
    if errors:
        raise errors[0]
    outcome = Outcome(
        records,
        wall,
        counter.count,
        lock_keys,
        data_keys,
        lock_calls=counter.lock_calls,
        write_latencies_ms=counter.write_latencies_ms,
    )
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
    strategy: str = RETRY,
    settings: QueueSettings | None = None,
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
        strategy=strategy,
        settings=settings,
    ).summary()


def dead_holders(
    client: Any,
    table: str,
    *,
    strategy: str = RETRY,
    settings: QueueSettings | None = None,
    resources: int = 10,
    waiters: int = 3,
    seed: int = 7,
    retry_ttl_ms: int = RETRY_DEAD_TTL_MS,
) -> list[float]:
    """Takeover times (ms): on each of ``resources`` resources at once, a holder acquires, (queue:
    heartbeats for a random 0-2 H), then dies without releasing while ``waiters`` others wait.
    Takeover = the first waiter's acquisition - the holder's death. Returns one time per resource.
    """
    run = uuid.uuid4().hex[:8]
    settings = settings or QueueSettings()
    backoff = retry.Backoff(attempts=8, base=0.02, cap=0.5)
    waits = retry.Backoff(base=0.02, cap=1.0)
    leases = lease.Leases(client=client, table=table, backoff=backoff)
    queue = LeaseQueue(leases, settings)
    rng = random.Random(seed)
    takeovers: list[float] = []
    guard = threading.Lock()

    def scenario(n: int, lives_ms: float) -> None:
        resource = f"bench/{run}/dead/{n}"
        if strategy == QUEUE:
            held = queue.acquire(resource, "doomed", wait_ms=5_000)
            with queue.heartbeat(held):
                time.sleep(lives_ms / 1000)
        else:
            leases.acquire(resource, "doomed", retry_ttl_ms)
        died = time.perf_counter()  # no release, no more heartbeats
        served: list[float] = []

        def wait(w: int) -> None:
            owner = f"waiter-{w}"
            if strategy == QUEUE:
                got = queue.acquire(resource, owner, wait_ms=120_000)
            else:
                got = leases.acquire_wait(
                    resource, owner, retry_ttl_ms, wait_ms=120_000, waits=waits
                )
            with guard:
                served.append(time.perf_counter())
            with contextlib.suppress(lease.LeaseLost):
                leases.release(got)

        threads = [threading.Thread(target=wait, args=(w,)) for w in range(waiters)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with guard:
            takeovers.append((min(served) - died) * 1000)

    threads = [
        threading.Thread(target=scenario, args=(n, rng.uniform(0, 2 * settings.heartbeat_ms)))
        for n in range(resources)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return takeovers


STRATEGIES: list[tuple[str, str, QueueSettings | None]] = [
    ("retry loop (acquire_wait)", RETRY, None),
    ("queue (H 0.5 s, L 1.5 s)", QUEUE, QueueSettings()),
    ("queue, lock client defaults (H 5 s, L 20 s)", QUEUE, LOCK_CLIENT),
]


def rows(
    client: Any,
    table: str,
    *,
    workers: int = 50,
    rounds: int = 20,
    resources: int = 5,
    dead_resources: int = 10,
    strategies: list[tuple[str, str, QueueSettings | None]] | None = None,
    retry_ttl_ms: int = RETRY_DEAD_TTL_MS,
) -> list[dict[str, Any]]:
    """One row per strategy: the contended workload, then the dead-holder scenario."""
    table_rows = []
    for name, strategy, settings in strategies or STRATEGIES:
        summary = run_lease_workload(
            client,
            table,
            workers=workers,
            rounds=rounds,
            resources=resources,
            strategy=strategy,
            settings=settings,
        )
        takeovers = dead_holders(
            client,
            table,
            strategy=strategy,
            settings=settings,
            resources=dead_resources,
            retry_ttl_ms=retry_ttl_ms,
        )
        bound = None
        if settings is not None:
            bound = settings.expiry_ms + settings.heartbeat_ms + settings.poll_ms
        table_rows.append(
            {
                "strategy": name,
                "calls_per_acquisition": summary["calls_per_acquisition"],
                "total_calls_per_acquisition": summary["total_calls_per_acquisition"],
                "acquire_p50_ms": summary["time_to_acquire_p50_ms"],
                "acquire_p99_ms": summary["time_to_acquire_p99_ms"],
                "fairness_jain": summary["fairness_jain"],
                "order_violations": summary["order_violations"],
                "fence_violations": summary["fence_violations"],
                "takeover_p50_ms": round(percentile(takeovers, 0.50), 1),
                "takeover_p99_ms": round(percentile(takeovers, 0.99), 1),
                "takeover_bound_ms": bound if bound is not None else retry_ttl_ms,
                "write_p99_ms": summary["write_p99_ms"],
                "wall_seconds": summary["wall_seconds"],
                "acquisitions": summary["acquisitions"],
                "rejected_writes": summary["rejected_writes"],
                "lost_leases": summary["lost_leases"],
            }
        )
    return table_rows


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
    parser.add_argument("--strategy", choices=[RETRY, QUEUE], default=RETRY)
    parser.add_argument("--heartbeat-ms", type=int, default=QueueSettings.heartbeat_ms)
    parser.add_argument("--expiry-ms", type=int, default=QueueSettings.expiry_ms)
    parser.add_argument("--poll-ms", type=int, default=QueueSettings.poll_ms)
    parser.add_argument("--dead", type=int, default=0, help="also: dead holders on N resources")
    args = parser.parse_args(argv)
    settings = QueueSettings(
        heartbeat_ms=args.heartbeat_ms, expiry_ms=args.expiry_ms, poll_ms=args.poll_ms
    )
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
            strategy=args.strategy,
            settings=settings,
        )
        if args.dead:
            takeovers = dead_holders(
                client, table, strategy=args.strategy, settings=settings, resources=args.dead
            )
            result["takeover_p50_ms"] = round(percentile(takeovers, 0.5), 1)
            result["takeover_p99_ms"] = round(percentile(takeovers, 0.99), 1)
    print(
        f"lease workload ({args.strategy}): {args.workers} workers x {args.rounds} rounds "
        f"over {args.resources} resources"
    )
    width = max(len(name) for name in result)
    for name, value in result.items():
        print(f"  {name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
