"""Section ``adaptive``: an offered rate that ramps from a fifth of one key's limit to eight times
it and back, on counters created with one shard that size themselves.

Both runs go through the service's own domain code, as a request would: an adaptive product
(:meth:`service.domain.products.Products.purchase`, one unit each) and an adaptive event
(:meth:`service.domain.events.Events.register` and ``unregister``: sign-ups, and leaves once half
the capacity is taken, so places recycle). After every request the domain hands the counter to the
service's resizer (:class:`turnstile_ddb.adaptive.Resizer`, its lease on the leases table, its
policy told one key's write units), which grows or shrinks the shards from what it observed.

Everything runs under :mod:`local.capacity_model` (``TURNSTILE_CAPACITY_SCALE``, default
:data:`bench.hot.DEFAULT_SCALE`: 10 WCU/s per key). One key's limit is in requests per second: a
purchase writes its shard once (1 WCU), a sign-up or a leave is a transaction (2 WCU on its shard).
The ramp is :data:`RAMP` times that limit, each step :attr:`Pace.step_seconds` long, open loop
(:func:`bench.hot.offer`), then :attr:`Pace.tail_seconds` more at the last step's rate.

Per step (the JSON's ``steps``): ``offered`` (requests/s); ``achieved`` (sales, or sign-ups and
leaves, per second, answered after the step's first :attr:`Pace.settle_seconds`); ``direction``
("up" to the peak, "down" after); ``shards`` (at the step's end); ``grown`` (the shards reached
:data:`HEADROOM` times the offered rate in the step); ``throttles`` (the model's throttles in the
step, any caller's); ``5xx`` (client 5xx answered in the step once it was grown; all of the step's
if it never was). Per run: ``oversold`` (products: sales acknowledged beyond what left the
shards; events: members without a counted place, and places counted beyond the capacity),
``resizes``, ``resize_wcu`` (per resize, the write units of its transaction, 2 per item as AWS
charges a transactional write, plus one per item of each cancelled attempt on the resizer's own
client; the lease's two writes and the reads are left out), ``final_shards`` (after the tail) and
``totals``, the
table's own word at the end (``exact``: the counts agree, within the requests whose outcome is
unknown).

The shard count is sampled every :attr:`Pace.sample_seconds` from shard 0 (a consistent read on a
client outside the model, so sampling costs the counter nothing).
"""

from __future__ import annotations

import collections
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench import hot
from bench.harness import WRITE_OPERATIONS, Meter, write_units
from local.capacity_model import CapacityModel, scale_from_env
from service import config
from service.domain import events as events_domain
from service.domain.errors import DomainError
from service.domain.events import Events
from service.domain.products import Products
from turnstile_ddb import codec, lease, retry, sharded

RAMP = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.2)  # times one key's limit
HEADROOM = 1.5  # grown: shards x one key's limit >= this x the offered rate
WORKERS = 64
EVENT_CAPACITY = 400  # places; leaves start once half are taken
UNKNOWN = "503:unknown"  # the request's reply was lost: it may have landed
SUCCESS = ("ok", "left")


@dataclass(frozen=True)
class Pace:
    step_seconds: float = 30.0
    settle_seconds: float = 10.0
    tail_seconds: float = 60.0
    sample_seconds: float = 0.5


FULL = Pace()
QUICK = Pace(step_seconds=1.0, settle_seconds=0.25, tail_seconds=1.0, sample_seconds=0.25)


def schedule(limit: float, pace: Pace, ramp: tuple[float, ...] = RAMP) -> list[float]:
    """When each request is due (seconds from the start): every step's rate evenly, then the
    tail at the last step's."""
    due: list[float] = []
    for index, rate in enumerate([*(m * limit for m in ramp), ramp[-1] * limit]):
        start = index * pace.step_seconds
        length = pace.tail_seconds if index == len(ramp) else pace.step_seconds
        due.extend(start + i / rate for i in range(int(rate * length)))
    return due


class ThreadUnits:
    """The write units one client's cancelled transactions cost, per thread (one per item: the
    prepare phase), so that a resize's cancelled attempts are charged to the resize that made
    them. A committed transaction is charged from its items (:class:`Recorded`): DynamoDB Local
    answers 2 units for any transaction, whatever its size."""

    def __init__(self) -> None:
        self._local = threading.local()

    def attach(self, client: Any) -> Any:
        client.meta.events.register("provide-client-params.dynamodb", self._ask)
        client.meta.events.register("after-call.dynamodb", self._charge)
        return client

    def _ask(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in WRITE_OPERATIONS:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def _charge(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems" and "Error" in parsed:
            self._local.units = self.mine() + write_units(parsed)

    def mine(self) -> float:
        units: float = getattr(self._local, "units", 0.0)
        return units


@dataclass
class Recorded:
    """The service's resizer, remembering each resize it made and what it cost: its committed
    transaction as AWS charges one (2 WCU per item of at most 1 KB; a shard item is far smaller),
    plus its cancelled attempts (:class:`ThreadUnits`)."""

    resizer: Any
    units: ThreadUnits
    resizes: list[dict[str, Any]] = field(default_factory=list)
    failed_wcu: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def maybe_resize(self, counter: sharded.ShardedCounter, *, capacity: bool = False) -> Any:
        before = self.units.mine()
        resized = None
        try:
            resized = self.resizer.maybe_resize(counter, capacity=capacity)
        finally:
            spent = self.units.mine() - before
            with self._lock:
                if resized is not None and resized.before != resized.after:
                    wcu = spent + 2 * resized.items
                    self.resizes.append(
                        {"before": resized.before, "after": resized.after, "wcu": wcu}
                    )
                else:
                    self.failed_wcu += spent  # a resize that raised, or calls that decided nothing
        return resized


def service_resizer(client: Any, leases: lease.Leases, limit: float) -> tuple[Any, sharded.Hints]:
    """The resizer a function builds (``service.runtime``) and the hints its takes use (their
    load window is what it decides from), its policy told one key's write units per second (a
    purchase writes one; for an event's sign-ups, transactions, the policy halves it itself:
    ``ResizePolicy.for_capacities``)."""
    from turnstile_ddb import adaptive

    window = adaptive.LoadWindow()
    hints = sharded.Hints(load=window)
    policy = adaptive.ResizePolicy(one_key_limit=limit)
    return adaptive.Resizer(client, leases, policy, load=window, hints=hints), hints


@dataclass
class Workload:
    """One ramp: what a request does, how the counter is read, and the invariants' check."""

    name: str
    limit: float  # one key's limit, requests per second
    counter: sharded.ShardedCounter
    attempt: Callable[[int], tuple[str, int]]
    totals: Callable[[list[tuple[int, float, str, int]]], dict[str, Any]]


@dataclass
class Sampler:
    """The counter's shard count and the model's throttles, every ``every`` seconds from t0."""

    read: Callable[[], int]
    model: CapacityModel
    every: float
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self, t0: float) -> threading.Thread:
        def loop() -> None:
            tick = 0
            while True:
                delay = t0 + tick * self.every - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    return
                self.samples.append((tick * self.every, self.read(), self.model.stats.throttled))
                tick += 1

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread

    def stop(self, thread: threading.Thread) -> None:
        self._stop.set()
        thread.join()


def steps(
    results: list[tuple[int, float, str, int]],
    samples: list[tuple[float, int, int]],
    limit: float,
    pace: Pace,
    ramp: tuple[float, ...] = RAMP,
) -> list[dict[str, Any]]:
    """The per-step figures (see the module docstring) from the requests and the samples."""
    peak = ramp.index(max(ramp))
    out = []
    for index, multiple in enumerate(ramp):
        start, end = index * pace.step_seconds, (index + 1) * pace.step_seconds
        offered = multiple * limit
        within = [s for s in samples if start <= s[0] < end] or [samples[-1]]
        grown_at = next((at for at, n, _ in within if n * limit >= HEADROOM * offered), None)
        throttled = [t for at, _, t in samples if at <= end]
        before = [t for at, _, t in samples if at <= start]
        answered = [(at, outcome, units) for _, at, outcome, units in results if start <= at < end]
        settled = [u for at, o, u in answered if at >= start + pace.settle_seconds and o in SUCCESS]
        since = grown_at if grown_at is not None else start
        out.append(
            {
                "offered": round(offered, 2),
                "achieved": round(sum(settled) / (pace.step_seconds - pace.settle_seconds), 2),
                "direction": "up" if index <= peak else "down",
                "shards": within[-1][1],
                "grown": grown_at is not None,
                "throttles": (throttled[-1] if throttled else 0) - (before[-1] if before else 0),
                "5xx": sum(1 for at, o, _ in answered if o.startswith("5") and at >= since),
            }
        )
    return out


def ramp_run(
    workload: Workload,
    recorded: Recorded,
    model: CapacityModel,
    read: Callable[[], int],
    pace: Pace,
) -> dict[str, Any]:
    """The ramp on one workload: its run's JSON."""
    due = schedule(workload.limit, pace)
    sampler = Sampler(read, model, pace.sample_seconds)
    t0 = time.monotonic() + 0.5
    thread = sampler.run(t0)
    results = hot.offer(due, workload.attempt, WORKERS, t0=t0)
    end = len(RAMP) * pace.step_seconds + pace.tail_seconds
    while time.monotonic() < t0 + end:  # the tail's last sample
        time.sleep(pace.sample_seconds)
    sampler.stop(thread)
    final = read()
    totals = workload.totals(results)
    return {
        "name": workload.name,
        "one_key_limit": workload.limit,
        "steps": steps(results, sampler.samples, workload.limit, pace),
        "oversold": totals.pop("oversold"),
        "resizes": len(recorded.resizes),
        "resize_wcu": [round(r["wcu"], 1) for r in recorded.resizes],
        "final_shards": final,
        "totals": totals,
    }


def hottest(model: CapacityModel, base: str, most: int = 6) -> str:
    """The keys of ``base``'s items (shards, registrations) the model throttled most, and how
    often: where a run's throttles came from."""
    counted = [(n, key) for key, n in model.stats.throttled_by_key.items() if base in key]
    return ", ".join(f"{key.split('/')[2]} {n}" for n, key in sorted(counted, reverse=True)[:most])


def _unknown(results: list[tuple[int, float, str, int]]) -> int:
    return sum(1 for _, _, outcome, _ in results if outcome == UNKNOWN)


def _count(results: list[tuple[int, float, str, int]], outcome: str) -> int:
    return sum(units for _, _, o, units in results if o == outcome)


def shard_count(client: Any, counter: sharded.ShardedCounter) -> Callable[[], int]:
    """Reads the counter's stored shard count (shard 0's, the creation count when absent)."""
    attr = getattr(counter, "shards_attr", "shards")

    def read() -> int:
        found = client.get_item(
            TableName=counter.table, Key=counter.wire_key(0), ConsistentRead=True
        ).get("Item")
        item = codec.decode_item(found) or {}
        return int(item.get(attr, counter.shards))

    return read


@dataclass(frozen=True)
class Wiring:
    """What a workload's requests go through: the client under the model, a set-up client
    outside it, the tables, and the service's resizer with the hints its takes use."""

    client: Any
    setup: Any
    names: Mapping[str, str]
    resizer: Recorded
    hints: sharded.Hints


def product_workload(wiring: Wiring, limit: float, pace: Pace) -> Workload:
    setup, table = wiring.setup, wiring.names[config.PRODUCTS]
    product_id = f"adaptive-{uuid.uuid4().hex[:8]}"
    stock = 2 * len(schedule(limit, pace))  # never sells out
    Products(client=setup, table=table).create(product_id, "Ramp", stock, adaptive=True)
    products = Products(
        client=wiring.client, table=table, hints=wiring.hints, resizer=wiring.resizer
    )

    def attempt(_: int) -> tuple[str, int]:
        try:
            products.purchase(product_id, 1)
            return "ok", 1
        except retry.OutcomeUnknown:
            return UNKNOWN, 0
        except DomainError as exc:
            return exc.code, 0

    def totals(results: list[tuple[int, float, str, int]]) -> dict[str, Any]:
        final = Products(client=setup, table=table).get(product_id)["stock"]
        sold = _count(results, "ok")
        gone = stock - final
        return {
            "initial": stock,
            "acknowledged": sold,
            "final": final,
            "unknown": _unknown(results),
            "exact": 0 <= gone - sold <= _unknown(results),
            "oversold": max(0, sold - gone),
        }

    counter = products.counter(product_id, 1)
    return Workload("product (purchases)", limit, counter, attempt, totals)


def event_workload(wiring: Wiring, limit: float) -> Workload:
    setup, table = wiring.setup, wiring.names[config.EVENTS]
    event_id = f"adaptive-{uuid.uuid4().hex[:8]}"
    Events(client=setup, table=table).create(event_id, "Ramp", EVENT_CAPACITY, adaptive=True)
    events = Events(client=wiring.client, table=table, hints=wiring.hints, resizer=wiring.resizer)
    members: collections.deque[str] = collections.deque()
    lock = threading.Lock()

    def attempt(index: int) -> tuple[str, int]:
        with lock:
            leaving = len(members) >= EVENT_CAPACITY // 2
            user = members.popleft() if leaving else f"u{index}"
        try:
            if leaving:
                events.unregister(event_id, user)
                return "left", 1
            events.register(event_id, user)
        except retry.OutcomeUnknown:
            return UNKNOWN, 0
        except retry.RetriesExhausted:
            if leaving:  # nothing applied: still a member
                with lock:
                    members.append(user)
            raise
        except DomainError as exc:
            return exc.code, 0
        with lock:
            members.append(user)
        return "ok", 1

    def totals(results: list[tuple[int, float, str, int]]) -> dict[str, Any]:
        counted = Events(client=setup, table=table).get(event_id)["registered"]
        present = _members(setup, table, event_id)
        acknowledged = _count(results, "ok") - _count(results, "left")
        return {
            "capacity": EVENT_CAPACITY,
            "acknowledged": acknowledged,
            "counted": counted,
            "members": present,
            "unknown": _unknown(results),
            "exact": counted == present and abs(present - acknowledged) <= _unknown(results),
            "oversold": max(0, present - counted) + max(0, counted - EVENT_CAPACITY),
        }

    counter = events.shards_of(event_id, 1)
    return Workload("event (sign-ups and leaves)", limit, counter, attempt, totals)


def _members(client: Any, table: str, event_id: str) -> int:
    """Registration items of an adaptive event, over every key of its spread."""
    present = 0
    for bucket in range(events_domain.ADAPTIVE_SPREAD):
        pages = client.get_paginator("query").paginate(
            TableName=table,
            KeyConditionExpression="eventId = :e AND begins_with(sk, :reg)",
            ExpressionAttributeValues=codec.values(
                e=f"{event_id}#{events_domain.ADAPTIVE_PREFIX}{bucket}",
                reg=events_domain.REGISTRATION_PREFIX,
            ),
            ConsistentRead=True,
            Select="COUNT",
        )
        present += sum(page["Count"] for page in pages)
    return present


KINDS = ("product", "event")


def run(
    db: Any, names: Mapping[str, str], pace: Pace = FULL, kinds: tuple[str, ...] = KINDS
) -> dict[str, Any]:
    """Both ramps (``kinds`` chooses fewer, to iterate quickly), one after the other; the
    section's JSON document."""
    scale = scale_from_env() or hot.DEFAULT_SCALE
    model = CapacityModel(scale)
    setup = db.client(config=retry.client_config(read_timeout=30))
    runs = []
    # one WCU per purchase, a transaction's two per sign-up or leave, on the shard's key
    limits = {"product": model.wcu, "event": model.wcu / 2}
    for kind, limit in ((kind, limits[kind]) for kind in kinds):
        client = model.attach(Meter().attach(db.client(config=retry.client_config())))
        units = ThreadUnits()
        resize_client = model.attach(units.attach(db.client(config=retry.client_config())))
        leases = lease.Leases(client=resize_client, table=names[config.LEASES])
        # the policy is told a key's write units: it halves them for a capacity's transactions
        resizer, hints = service_resizer(resize_client, leases, model.wcu)
        recorded = Recorded(resizer, units)
        wiring = Wiring(client, setup, names, recorded, hints)
        if kind == "product":
            workload = product_workload(wiring, limit, pace)
        else:
            workload = event_workload(wiring, limit)
        time.sleep(min(1.5, pace.step_seconds))  # the creation's tokens come back
        print(f"  {workload.name}: {len(schedule(limit, pace))} requests", flush=True)
        runs.append(ramp_run(workload, recorded, model, shard_count(setup, workload.counter), pace))
        print(f"  most throttled keys: {hottest(model, workload.counter.base)}", flush=True)
    return {
        "runs": runs,
        "scale": scale,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
