"""The nemesis: a seeded fault schedule, and the hooks that carry it out.

Every client thread (and every stream consumer thread) draws its faults from its own random stream,
``Random(f"{seed}/{thread}")``, one draw per DynamoDB call, per stream batch, per lease step. The
same seed therefore gives every thread the same sequence of decisions; which request a decision
lands on still depends on how the threads interleave, so a replay reproduces the schedule, not the
exact run. Every fault injected is logged with its time and target.

Faults, and where they act:

* **DynamoDB calls** (:meth:`Nemesis.decide`, the fault policy of ``local.dynamo_proxy`` in front
  of DynamoDB Local, which every function's worker calls; the worker's chaos agent tags each
  request with the client whose invocation sent it; :meth:`Nemesis.install` applies the same
  decisions to the in-process client of the lease and queue workloads): throttling bursts
  (answered without sending), a lost reply before the call reached DynamoDB (nothing applied) or
  after it was applied (sent for real, then the connection closed unanswered),
  ``TransactionConflict`` with ``CancellationReasons`` on a transaction, and a crash of the
  function between two of its calls (the agent raises a ``BaseException`` the handler's error
  mapping cannot catch; every later call of that invocation crashes too, as a dead process makes
  none; the invocation fails as a dead Lambda runtime's does).
* **Replies** to the client lost after the handler answered (:meth:`Nemesis.reply_lost`).
* **Streams** (:meth:`Nemesis.stream_handler` wraps a consumer): a batch redelivered after it
  succeeded, an old batch delivered again (duplicates), a batch failed part-way with a partial
  batch response, the consumer crashing mid-batch (the pump then bisects).
* **Clocks**: a client's clock skewed by up to a few seconds (:meth:`Nemesis.clock` for the
  in-process lease code; sent with each invocation to the worker, whose agent gives the leases the
  function builds that clock).
* **Pauses**: a lease holder stopped past its lease's expiry before its fenced write; a wallet
  charge stopped past the wallet's lease (decided here, carried out by the worker's agent).
* **TTL**: a sweeper deleting, at random, items that TTL is allowed to delete (decided
  registration requests, reservation records past their hold; lease items past expiry when
  ``ttl_leases`` is on, which simulates a lease idle for its whole retention).
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import requests
from botocore.awsrequest import AWSPreparedRequest, AWSResponse, HTTPHeaders
from botocore.exceptions import ReadTimeoutError

from local import dynamo_proxy
from local.sandbox.chaos_agent import CRASH_HEADER
from turnstile_ddb import codec


class Crash(BaseException):
    """The function instance died here: nothing after this point runs."""


@dataclass(frozen=True)
class Rates:
    """Probabilities per decision point."""

    throttle: float = 0.02  # per call: a burst of 1-8 throttles follows
    lost_before: float = 0.008
    lost_after: float = 0.008
    conflict: float = 0.05  # per TransactWriteItems
    crash: float = 0.006  # per call after the first of an invocation
    reply_lost: float = 0.01  # per client request
    stream: float = 0.15  # per stream batch, split over the four stream faults
    skew: float = 0.1  # per lease step: a new skew of up to +-max_skew
    max_skew: float = 3.0
    pause: float = 0.1  # per lease holder, before its fenced write / inside a wallet charge
    ttl: float = 0.3  # per eligible item per sweep


@dataclass(frozen=True)
class Fault:
    at: float  # seconds since the run started
    kind: str
    target: str

    def describe(self) -> str:
        return f"  {self.at:8.3f} fault {self.kind:<15} {self.target}"


@dataclass
class _Thread:
    name: str
    rng: random.Random
    calls: int = 0  # DynamoDB calls in the current invocation
    crashed: bool = False
    throttles: int = 0  # throttles still to answer (a burst)
    skew: float = 0.0


@dataclass
class Nemesis:
    seed: int
    rates: Rates = field(default_factory=Rates)
    ttl_leases: bool = False
    start: float = field(default_factory=time.monotonic)
    faults: list[Fault] = field(default_factory=list)
    enabled: bool = True
    deleted: set[str] = field(default_factory=set)  # keys TTL removed, "table/k1/k2"
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _states: dict[str, _Thread] = field(default_factory=dict)  # by name, for the proxy

    # -- bookkeeping ---------------------------------------------------------------------------

    def rng(self, name: str) -> random.Random:
        return random.Random(f"{self.seed}/{name}")

    def log(self, kind: str, target: str, at: float | None = None) -> None:
        """``at``: when it happened (``time.monotonic()``), if not now."""
        when = time.monotonic() if at is None else at
        with self._lock:
            self.faults.append(Fault(when - self.start, kind, target))

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(fault.kind for fault in self.faults)

    def _state(self) -> _Thread | None:
        state: _Thread | None = getattr(self._local, "state", None)
        return state if self.enabled else None

    def current(self) -> _Thread | None:
        """This thread's fault state (None: not a target, suspended, or the nemesis is off)."""
        return self._state()

    def _draw(self, state: _Thread, rate: float) -> bool:
        return rate > 0 and state.rng.random() < rate

    def draw_pause(self, state: _Thread) -> bool:
        """Whether ``state``'s next wallet charge pauses (the worker's agent carries it out)."""
        return self.enabled and self._draw(state, self.rates.pause)

    def _register(self, name: str) -> _Thread:
        state = _Thread(name, self.rng(name))
        with self._lock:
            self._states[name] = state
        self._local.state = state
        return state

    @contextlib.contextmanager
    def target(self, name: str) -> Iterator[None]:
        """Faults act on this thread (a client or a consumer) from now on."""
        self._register(name)
        try:
            yield
        finally:
            self._local.state = None

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """No faults in this thread meanwhile (set-up and reads the checkers rely on)."""
        state = getattr(self._local, "state", None)
        self._local.state = None
        try:
            yield
        finally:
            self._local.state = state

    @contextlib.contextmanager
    def invocation(self, what: str) -> Iterator[None]:
        """One handler invocation: a crash ends it, and the call count restarts."""
        state: _Thread | None = getattr(self._local, "state", None)
        if state is not None:
            state.calls, state.crashed = 0, False
        try:
            yield
        finally:
            if state is not None:
                state.crashed = False

    # -- DynamoDB -----------------------------------------------------------------------------

    def install(self, client: Any) -> None:
        """Faults on an in-process client (the lease and queue workloads call the library
        directly): the same decisions as the proxy's, answered inside botocore."""
        client.meta.events.register("before-send.dynamodb", self._before_send)

    def _before_send(self, request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse | None:
        state = self._state()
        if state is None:
            return None
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        raw = request.body
        body = json.loads(raw) if isinstance(raw, (str, bytes)) and raw else {}
        decision = self._decide(state, operation, body)
        if decision is None:
            return None
        if decision == dynamo_proxy.DROP_BEFORE:
            raise ReadTimeoutError(endpoint_url=request.url)
        if decision == dynamo_proxy.DROP_AFTER:
            requests.post(request.url, data=request.body, headers=dict(request.headers), timeout=30)
            raise ReadTimeoutError(endpoint_url=request.url)
        assert isinstance(decision, dynamo_proxy.Reply)
        if CRASH_HEADER in decision.headers:
            raise Crash(decision.headers[CRASH_HEADER])
        return _response(request, decision)

    def decide(
        self, target: str | None, operation: str, body: dict[str, Any]
    ) -> dynamo_proxy.Decision:
        """The proxy's fault policy: ``target`` names the client (or stream consumer) whose
        invocation sent the request (the worker's chaos agent tags it); untagged requests (set-up,
        the checkers' reads, threads a function starts itself) pass."""
        if target is None or not self.enabled:
            return None
        with self._lock:
            state = self._states.get(target)
        if state is None:
            return None
        return self._decide(state, operation, body)

    def _decide(
        self, state: _Thread, operation: str, body: dict[str, Any]
    ) -> dynamo_proxy.Decision:
        where = f"{state.name} {operation}"
        if state.crashed:
            return _crash(where)
        state.calls += 1
        if state.throttles > 0:
            state.throttles -= 1
            return dynamo_proxy.Reply.error("ProvisionedThroughputExceededException", "throttled")
        roll = state.rng.random()
        rates = self.rates
        edges = [
            ("throttle", rates.throttle),
            ("lost_before", rates.lost_before),
            ("lost_after", rates.lost_after),
            ("conflict", rates.conflict if operation == "TransactWriteItems" else 0.0),
            ("crash", rates.crash if state.calls > 1 else 0.0),
        ]
        kind = None
        for name, rate in edges:
            if roll < rate:
                kind = name
                break
            roll -= rate
        if kind is None:
            return None
        self.log(kind, where)
        if kind == "throttle":
            state.throttles = state.rng.randint(0, 7)
            return dynamo_proxy.Reply.error("ProvisionedThroughputExceededException", "throttled")
        if kind == "lost_before":
            return dynamo_proxy.DROP_BEFORE
        if kind == "lost_after":
            return dynamo_proxy.DROP_AFTER
        if kind == "conflict":
            count = len(body.get("TransactItems", []))
            victim = state.rng.randrange(max(1, count))
            reasons = [
                {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
                if i == victim
                else {"Code": "None"}
                for i in range(count)
            ]
            codes = ", ".join(r["Code"] for r in reasons)
            return dynamo_proxy.Reply.error(
                "TransactionCanceledException",
                f"Transaction cancelled, please refer cancellation reasons for specific reasons "
                f"[{codes}]",
                CancellationReasons=reasons,
            )
        state.crashed = True
        return _crash(where)

    # -- replies, clocks, pauses ---------------------------------------------------------------

    def reply_lost(self, what: str) -> bool:
        state = self._state()
        if state is not None and self._draw(state, self.rates.reply_lost):
            self.log("reply_lost", f"{state.name} {what}")
            return True
        return False

    def clock(self) -> float:
        """Epoch seconds by this thread's (possibly skewed) clock."""
        state: _Thread | None = getattr(self._local, "state", None)
        return time.time() + (state.skew if state is not None and self.enabled else 0.0)

    def maybe_skew(self, max_skew: float | None = None) -> None:
        """Now and then, skew this client's clock by up to ``max_skew`` (default: the rates')."""
        bound = self.rates.max_skew if max_skew is None else max_skew
        state = self._state()
        if state is not None and self._draw(state, self.rates.skew):
            state.skew = state.rng.uniform(-bound, bound)
            self.log("clock_skew", f"{state.name} {state.skew:+.2f}s")

    def maybe_pause(self, what: str, seconds: float) -> None:
        state = self._state()
        if state is not None and self._draw(state, self.rates.pause):
            self.log("pause", f"{state.name} {what} {seconds:.1f}s")
            time.sleep(seconds)

    # -- streams ---------------------------------------------------------------------------------

    def stream_handler(
        self, name: str, handler: Callable[[dict[str, Any], Any], Any]
    ) -> Callable[[dict[str, Any], Any], Any]:
        previous: list[dict[str, Any]] = []

        def faulty(event: dict[str, Any], context: Any) -> Any:
            if getattr(self._local, "state", None) is None:
                self._register(name)
            state = self._state()
            records = event["Records"]
            kind = None
            if state is not None and records and self._draw(state, self.rates.stream):
                kind = state.rng.choice(["redeliver", "duplicate", "batch_fail", "consumer_crash"])
            with self.invocation(name):
                try:
                    if kind == "duplicate" and previous:
                        self.log("stream_duplicate", f"{name} {len(previous)} old records")
                        handler({"Records": list(previous)}, context)
                    if kind in ("batch_fail", "consumer_crash"):
                        assert state is not None
                        cut = state.rng.randrange(len(records))
                        first = handler({"Records": records[:cut]}, context) if cut else None
                        self.log(f"stream_{kind}", f"{name} at {cut}")
                        if kind == "consumer_crash":
                            raise RuntimeError("injected consumer crash mid-batch")
                        # The prefix may have failed on its own: fail from its first failure on.
                        failures = {
                            f["itemIdentifier"] for f in (first or {}).get("batchItemFailures", [])
                        }
                        sequences = [r["dynamodb"]["SequenceNumber"] for r in records]
                        from_index = min(
                            [i for i, seq in enumerate(sequences[:cut]) if seq in failures] + [cut]
                        )
                        failed = sequences[from_index:]
                        return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}
                    result = handler(event, context)
                    if kind == "redeliver":
                        self.log("stream_redeliver", f"{name} {len(records)} records")
                        handler(event, context)
                except Crash as exc:
                    raise RuntimeError(f"consumer crashed at {exc}") from None
            previous[:] = records
            return result

        return faulty

    # -- TTL ---------------------------------------------------------------------------------

    def sweep_ttl(self, client: Any, tables: dict[str, str], rng: random.Random) -> None:
        """Delete some items TTL may delete (decided requests, lapsed reservation records...)."""
        now_ms = time.time() * 1000
        candidates: list[tuple[str, dict[str, Any]]] = []
        for item in _scan(client, tables["registration_requests"]):
            if item.get("status") not in (None, "PENDING"):
                candidates.append(("registration_requests", item))
        for item in _scan(client, tables["inventory"]):
            if "expiresAt" in item and "holdUntil" in item and item["holdUntil"] < now_ms:
                candidates.append(("inventory", item))
        if self.ttl_leases:
            for item in _scan(client, tables["leases"]):
                resource = str(item.get("resource", ""))
                if resource.startswith("chaos-") and int(item.get("expiresAt", 0)) < now_ms - 1000:
                    candidates.append(("leases", item))
        for table, item in candidates:
            if rng.random() >= self.rates.ttl:
                continue
            keys = _KEYS[table]
            key = {k: item[k] for k in keys}
            client.delete_item(TableName=tables[table], Key=codec.encode_item(key))
            self.deleted.add("/".join([table, *(str(v) for v in key.values())]))
            self.log("ttl_delete", f"{table} {'/'.join(str(v) for v in key.values())}")


_KEYS = {
    "registration_requests": ("eventId", "requestId"),
    "inventory": ("sku", "sk"),
    "leases": ("resource",),
}


def _scan(client: Any, table: str) -> Iterator[dict[str, Any]]:
    start: dict[str, Any] | None = None
    while True:
        kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
        if start:
            kwargs["ExclusiveStartKey"] = start
        page = client.scan(**kwargs)
        for raw in page.get("Items", []):
            item = codec.decode_item(raw)
            if item is not None:
                yield item
        start = page.get("LastEvaluatedKey")
        if not start:
            return


def _crash(where: str) -> dynamo_proxy.Reply:
    """The crash marker: the worker's chaos agent raises its Crash on it; any other client sees
    a 500 it may retry."""
    reply = dynamo_proxy.Reply.error("InternalServerError", "injected crash", status=500)
    return dynamo_proxy.Reply(reply.status, reply.body, {CRASH_HEADER: where})


def _response(request: AWSPreparedRequest, reply: dynamo_proxy.Reply) -> AWSResponse:
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    return AWSResponse(request.url, reply.status, headers, _Raw(json.dumps(reply.body).encode()))


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body
