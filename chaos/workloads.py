"""The clients: one kind per pattern, many of each, all at once, through the real handlers.

Requests are API Gateway REST proxy events handed to each function (routed as the local HTTP
bridge routes them); the runner gives the bridge the functions' as-deployed workers
(``chaos.deployed``), so the code under test is exactly what Lambda runs. Every operation is
recorded in the history before it is sent and completed with its outcome: 2xx ok, 4xx fail
(definite: nothing applied), 5xx, a crash or a lost reply unknown. A keyed operation is retried
under its ``Idempotency-Key`` until it gets a definite answer (or gives up, staying unknown).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.history import FAIL, OK, UNKNOWN, History, Op
from chaos.nemesis import Crash, Nemesis
from local.bridge import Bridge, LocalContext
from service.domain.events import Events
from service.domain.products import Products
from turnstile_ddb import errors, lease, retry, sharded
from turnstile_ddb.lease_queue import Heartbeat, LeaseQueue, WaitTimedOut

log = logging.getLogger("chaos")

OPERATOR = {"sub": "chaos-operator", "token_use": "id", "cognito:groups": "admins"}

Answer = tuple[int | None, Any]  # (status, body); status None: no reply (crash, lost)


class Caller:
    """Calls a route's handler with a proxy event, as API Gateway would."""

    def __init__(self, bridge: Bridge, nemesis: Nemesis, *, faults: bool = True) -> None:
        self.bridge = bridge
        self.nemesis = nemesis
        self.faults = faults  # False: set-up calls, never faulted even from a client's thread

    def __call__(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        found = self.bridge.match(method, path)
        if found is None:
            raise LookupError(f"no route for {method} {path}")
        target, params = found
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        request_id = str(uuid.uuid4())
        event = {
            "resource": target.path,
            "path": path,
            "httpMethod": method,
            "headers": all_headers,
            "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
            "queryStringParameters": None,
            "multiValueQueryStringParameters": None,
            "pathParameters": params or None,
            "stageVariables": None,
            "requestContext": {
                "requestId": request_id,
                "stage": "chaos",
                "resourcePath": target.path,
                "httpMethod": method,
                "path": path,
                "requestTimeEpoch": int(time.time() * 1000),
                "identity": {"sourceIp": "127.0.0.1"},
                # API Gateway's authorizer verified this token: the workloads are one
                # administrator acting on behalf of many users and lease owners (docs/identity.md).
                "authorizer": {"claims": OPERATOR},
            },
            "body": json.dumps(body) if body is not None else None,
            "isBase64Encoded": False,
        }
        context = LocalContext(target.spec.name, target.spec.timeout_seconds, request_id)
        if not self.faults:
            with self.nemesis.suspended():
                result = target.handler(event, context)
        else:
            with self.nemesis.invocation(path):
                try:
                    result = target.handler(event, context)
                except Crash:
                    return None, "crashed"
            if self.nemesis.reply_lost(f"{method} {path}"):
                return None, "reply lost"
        text = result.get("body")
        return int(result["statusCode"]), json.loads(text) if text else None


def outcome(status: int | None) -> str:
    if status is None or status >= 500:
        return UNKNOWN
    return OK if status < 400 else FAIL


@dataclass
class Client:
    """One concurrent client: a thread with its own random stream."""

    name: str
    history: History
    nemesis: Nemesis
    call: Caller
    stop: threading.Event
    keyed_patience: float = 25.0

    def __post_init__(self) -> None:
        self.rng = self.nemesis.rng(f"client/{self.name}")
        self.count = 0
        self.errors = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{self.name}-{prefix}{self.count}-{self.rng.randrange(10**6)}"

    def request(
        self,
        op: Op,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        key: str | None = None,
    ) -> Op:
        """Send; with a key, resend under it while the answer is unknown or still in progress."""
        headers = {"Idempotency-Key": key} if key else None
        deadline = time.monotonic() + self.keyed_patience
        while True:
            status, answer = self.call(method, path, body, headers)
            op.attempts.append((status, answer))
            kind = outcome(status)
            in_progress = (
                status == 409
                and isinstance(answer, dict)
                and answer.get("error") == "IDEMPOTENCY_IN_PROGRESS"
            )
            if key is None or not (kind == UNKNOWN or in_progress):
                return self.history.complete(op, UNKNOWN if in_progress else kind, status, answer)
            if time.monotonic() > deadline:
                return self.history.complete(op, UNKNOWN, status, answer)
            time.sleep(self.rng.uniform(0.2, 1.0))

    def run(self, body: Callable[[], None]) -> None:
        with self.nemesis.target(self.name):
            while not self.stop.is_set():
                try:
                    body()
                except Exception:  # a client bug must not end the run silently
                    log.exception("chaos client %s failed; it carries on", self.name)
                    self.errors += 1
                    time.sleep(0.5)


# -- shared fixtures each workload works on -----------------------------------------------------


@dataclass
class Setup:
    """What the runner created before the clients start, and what the checkers need to know."""

    run_id: str
    products: list[tuple[str, int]] = field(default_factory=list)  # (productId, initial stock)
    events: list[tuple[str, int]] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    queued: list[str] = field(default_factory=list)  # resources the queue clients wait for
    wallets: list[str] = field(default_factory=list)
    skus: list[tuple[str, int]] = field(default_factory=list)
    # adaptive products (productId, initial stock): their stock in shards that get resized
    adaptive: list[tuple[str, int]] = field(default_factory=list)
    # adaptive events (eventId, capacity): their seats in a sharded capacity that gets resized
    adaptive_events: list[tuple[str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


PRODUCT_STOCK = 40
ADAPTIVE_STOCK = 60
SKU_UNITS = 30


def next_product(setup: Setup, call: Caller, seen: int, *, adaptive: bool = False) -> int:
    """Index of the product to buy now (of ``setup.adaptive`` when ``adaptive``, else of
    ``setup.products``); a sold-out product ``seen`` moves everyone to a new one."""
    products = setup.adaptive if adaptive else setup.products
    with setup.lock:
        if seen == len(products) - 1:
            product_id = f"chaos-{setup.run_id}-{'a' if adaptive else 'p'}{len(products)}"
            stock = ADAPTIVE_STOCK if adaptive else PRODUCT_STOCK
            body: dict[str, Any] = {"productId": product_id, "name": "x", "stock": stock}
            if adaptive:
                body["adaptive"] = True  # one shard at first; the service may resize it too
            status, answer = call("POST", "/products", body)
            assert status == 201, answer
            products.append((product_id, stock))
        return len(products) - 1


def create_sku(setup: Setup, call: Caller) -> None:
    """A new sku; waits until every unit exists (creation may finish in the background)."""
    sku = f"chaos-{setup.run_id}-s{len(setup.skus)}"
    status, answer = call("POST", "/inventory", {"sku": sku, "units": SKU_UNITS})
    assert status in (201, 202), answer
    deadline = time.monotonic() + 60
    while True:
        status, answer = call("GET", f"/inventory/{sku}/exact")
        if (
            status == 200
            and answer.get("units") == SKU_UNITS
            and answer.get("status") not in ("CREATING", "PENDING")
        ):
            counted = answer["available"] + answer["reserved"] + answer["sold"]
            if counted == SKU_UNITS:
                break
        if time.monotonic() > deadline:
            raise TimeoutError(f"sku {sku} was not complete after 60 s: {answer}")
        time.sleep(0.2)
    setup.skus.append((sku, SKU_UNITS))


# -- the workloads ---------------------------------------------------------------------------------


def purchases(
    client: Client, setup: Setup, clean: Caller, *, adaptive: bool = False
) -> Callable[[], None]:
    """Purchases through the functions, of the newest product (with ``adaptive``, of the newest
    adaptive product, recorded under the ``resizing`` pattern); a sold-out product moves the
    clients on to a new one."""
    products = setup.adaptive if adaptive else setup.products
    pattern = "resizing" if adaptive else "purchases"
    current = [next_product(setup, clean, -1, adaptive=adaptive)]

    def step() -> None:
        index = max(current[0], len(products) - 1)
        product_id = products[index][0]
        quantity = client.rng.randint(1, 3)
        strategy = client.rng.choice(["atomic", "versioned"])
        key = client.fresh("k") if client.rng.random() < 0.5 else None
        op = client.history.invoke(
            pattern,
            client.name,
            "purchase",
            product=product_id,
            quantity=quantity,
            strategy=strategy,
            key=key,
        )
        client.request(
            op,
            "POST",
            f"/products/{product_id}/purchases",
            {"quantity": quantity, "strategy": strategy},
            key,
        )
        # (a sharded sale's remainingStock is what the shards it took from hold, not the total)
        sold_out = (op.type == FAIL and (op.value or {}).get("available") == 0) or (
            op.type == OK and (op.value or {}).get("remainingStock") == 0 and not adaptive
        )
        if sold_out:
            current[0] = next_product(setup, clean, index, adaptive=adaptive)
        else:
            current[0] = index

    return step


# The shard counts the resizer asks for in turn, from one at creation: grows and shrinks alternate.
RESIZE_TO = (3, 1, 6, 2, 5, 1, 4, 2)


def resizer(
    client: Client, setup: Setup, stock: Products, seats: Events, *, first_turn: int = 0
) -> Callable[[], None]:
    """Resizes the newest adaptive product's stock and the adaptive event's seats in turn
    (:func:`turnstile_ddb.sharded.resize`, the event's with ``capacity=True``), each to the next
    count of :data:`RESIZE_TO` (from turn ``first_turn``, two turns a count: two resizers one
    count apart ask at once for counts on either side of the current one, a grow and a shrink
    from the same layout), racing the other resizers, the purchases, sign-ups
    and cancellations and the service's own resizer. It calls the library directly, on the
    counters the service's domain builds (``stock``, ``seats``), through their client, which
    takes the nemesis's faults. A resize that gives up (every attempt lost to other writes or
    throttled: nothing written) is a ``fail``."""
    turns = itertools.count(first_turn)

    def step() -> None:
        turn = next(turns)
        # one shard, as created: a resize learns the current count from the shards
        if turn % 2 == 0 or not setup.adaptive_events:
            base, capacity = setup.adaptive[-1][0], False
            counter, dynamodb = stock.counter(base, 1), stock.client
        else:
            base, capacity = setup.adaptive_events[-1][0], True
            counter, dynamodb = seats.shards_of(base, 1), seats.client
        shards = RESIZE_TO[turn // 2 % len(RESIZE_TO)]
        op = client.history.invoke(
            "resizing", client.name, "resize", counter=base, capacity=capacity, shards=shards
        )
        with client.nemesis.invocation("resizing resize"):
            try:
                done = sharded.resize(dynamodb, counter, shards, capacity=capacity)
                client.history.complete(op, OK, None, dataclasses.asdict(done))
            except retry.RetriesExhausted as exc:
                client.history.complete(op, FAIL, None, {"error": type(exc).__name__})
            except NO_ANSWER:
                client.history.complete(op, UNKNOWN, None, "no answer")
        time.sleep(client.rng.uniform(0.1, 0.4))

    return step


USERS = 24


def registrations(client: Client, setup: Setup, *, adaptive: bool = False) -> Callable[[], None]:
    """Sign-ups, cancellations and asynchronous registration requests through the functions;
    with ``adaptive``, sign-ups and cancellations only, at the adaptive events, recorded under the
    ``resizing`` pattern."""
    events = setup.adaptive_events if adaptive else setup.events
    pattern = "resizing" if adaptive else "registrations"
    joins, cancels = (0.55, 1.0) if adaptive else (0.4, 0.65)  # the rest: requests

    def step() -> None:
        event_id = client.rng.choice(events)[0]
        user = f"u{client.rng.randrange(USERS)}"
        roll = client.rng.random()
        if roll < joins:
            key = client.fresh("k") if client.rng.random() < 0.5 else None
            op = client.history.invoke(
                pattern, client.name, "register", event=event_id, user=user, key=key
            )
            client.request(op, "POST", f"/events/{event_id}/registrations", {"userId": user}, key)
        elif roll < cancels:
            op = client.history.invoke(pattern, client.name, "cancel", event=event_id, user=user)
            client.request(op, "DELETE", f"/events/{event_id}/registrations/{user}")
        else:
            op = client.history.invoke(pattern, client.name, "request", event=event_id, user=user)
            client.request(
                op, "POST", f"/events/{event_id}/registration-requests", {"userId": user}
            )
        time.sleep(client.rng.uniform(0, 0.05))

    return step


def leases(
    client: Client, setup: Setup, fenced: lease.Leases, data_table: str
) -> Callable[[], None]:
    def step() -> None:
        resource = client.rng.choice(setup.resources)
        owner = client.fresh("o")
        ttl = client.rng.choice([0.5, 1.0, 1.5])
        client.nemesis.maybe_skew()
        body: dict[str, Any] = {"owner": owner, "ttlSeconds": ttl}
        if client.rng.random() < 0.3:
            body["waitMs"] = client.rng.choice([200, 800, 2000])  # queued over HTTP
        op = client.history.invoke("leases", client.name, "acquire", resource=resource, owner=owner)
        client.request(op, "POST", f"/locks/{resource}", body)
        if op.type != OK:
            time.sleep(client.rng.uniform(0.05, 0.3))
            return
        fence = int(op.value["fence"])
        client.nemesis.maybe_pause(f"{resource} fence {fence}", ttl + 0.4)
        held = lease.Lease(resource, owner, fence, expires_at_ms=0, acquired_at=0)
        fenced_append(client, "leases", fenced, held, data_table, f"chaos-data/{resource}")
        if client.rng.random() < 0.7:
            op = client.history.invoke(
                "leases", client.name, "release", resource=resource, owner=owner, fence=fence
            )
            client.request(op, "DELETE", f"/locks/{resource}", {"owner": owner, "fence": fence})

    return step


def fenced_append(
    client: Client, pattern: str, leases: lease.Leases, held: lease.Lease, table: str, key: str
) -> None:
    """Append ``held``'s fence to the protected item ``key`` through :meth:`Leases.transact` (the
    guard refuses a stale fence), recorded as a ``write`` op of ``pattern``."""
    write = client.history.invoke(
        pattern, client.name, "write", resource=held.resource, owner=held.owner, fence=held.fence
    )
    item = {
        "Update": {
            "TableName": table,
            "Key": {"resource": {"S": key}},
            "UpdateExpression": "SET #log = list_append(if_not_exists(#log, :empty), :f)",
            "ExpressionAttributeNames": {"#log": "log"},
            "ExpressionAttributeValues": {
                ":empty": {"L": []},
                ":f": {"L": [{"N": str(held.fence)}]},
            },
        }
    }
    with client.nemesis.invocation(f"{pattern} fenced write"):
        try:
            leases.transact(held, [item])
            client.history.complete(write, OK, 200, {"fence": held.fence})
        except lease.LeaseLost as exc:
            client.history.complete(write, FAIL, 409, {"current": exc.current})
        except NO_ANSWER:
            client.history.complete(write, UNKNOWN, None, "no answer")


# Whatever leaves a call without a definite answer: the nemesis's crash, an outcome in doubt, a
# spent retry budget, or an AWS error the pattern did not read (turnstile_ddb.errors.Aws*).
NO_ANSWER = (
    Crash,
    retry.OutcomeUnknown,
    retry.RetriesExhausted,
    errors.AwsRefused,
    errors.AwsRetryable,
)


class Killed(BaseException):
    """A queue client's process died here (a waiter mid-wait): nothing after this runs."""


QUEUE_ROLES = (
    ("normal", 0.62),
    ("plain", 0.14),  # a plain acquisition: one attempt, it must not jump a live waiter
    ("waiter-killed", 0.06),
    ("waiter-paused", 0.06),
    ("holder-killed", 0.06),
    ("holder-paused", 0.06),
)
# How long a queued acquisition waits (ms): long enough that most are served even behind a dead
# waiter, which holds the queue up for I (6 s by default), as the HTTP API allows (up to 20 s).
QUEUE_WAITS_MS = (3_000, 9_000, 15_000)


def queue(client: Client, setup: Setup, waiting: LeaseQueue, data_table: str) -> Callable[[], None]:
    """FIFO waiting through the library (:mod:`turnstile_ddb.lease_queue`) on the faulty client with
    a skewed clock: waiters that die mid-wait or stall past L, holders that die without release
    or whose heartbeat pauses past L before their fenced write; and plain acquisitions (one
    attempt, :meth:`turnstile_ddb.lease.Leases.acquire`) arriving among the waiters. The history
    records every ticket each acquisition took (more than one: it was passed over and queued
    again) and when it took its first (``ticketedAt``, on the history's clock: its arrival in the
    queue), so the checker can tell a later arrival served before a live waiter."""
    tickets: list[int] = []
    ticketed: list[float] = []
    settings = waiting.settings

    def took(resource: str, owner: str, ticket: int) -> None:
        tickets.append(ticket)
        if not ticketed:
            ticketed.append(time.monotonic())  # when it first queued: its arrival

    def dies(seconds: float) -> None:
        raise Killed("waiter killed mid-wait")

    stalled = [False]

    def stalls(seconds: float) -> None:
        if not stalled[0]:
            stalled[0] = True
            pause = 2 * settings.expiry_ms / 1000
            client.nemesis.log("pause", f"{client.name} waiter {pause:.1f}s")
            time.sleep(pause)
        time.sleep(seconds)

    kinds = {
        "normal": LeaseQueue(waiting.leases, settings, on_ticket=took),
        "waiter-killed": LeaseQueue(waiting.leases, settings, sleep=dies, on_ticket=took),
        "waiter-paused": LeaseQueue(waiting.leases, settings, sleep=stalls, on_ticket=took),
    }

    def role() -> str:
        roll = client.rng.random()
        for name, share in QUEUE_ROLES:
            if roll < share:
                return name
            roll -= share
        return "normal"

    def step() -> None:
        resource = client.rng.choice(setup.queued)
        owner = client.fresh("q")
        kind = role()
        # Skews within the queue's fairness assumption (two clocks differ by less than H/2), so
        # its fairness properties are checked, not excused; the leases workload keeps skews of
        # seconds, and safety (fences) never depends on clocks.
        client.nemesis.maybe_skew(settings.heartbeat_ms / 4000)
        tickets.clear()
        ticketed.clear()
        stalled[0] = False
        op = client.history.invoke(
            "queue", client.name, "acquire", resource=resource, owner=owner, role=kind
        )
        waiter = kinds.get(kind, kinds["normal"])
        try:
            with client.nemesis.invocation("queue acquire"):
                if kind == "plain":
                    held = waiting.leases.acquire(resource, owner, settings.expiry_ms)
                else:
                    wait_ms = client.rng.choice(QUEUE_WAITS_MS)
                    held = waiter.acquire(resource, owner, wait_ms=wait_ms)
        except WaitTimedOut as exc:
            client.history.complete(op, FAIL, 409, {"tickets": list(tickets), "at": exc.position})
            return
        except lease.Held as exc:  # a plain acquisition refused: held, or someone queued
            client.history.complete(op, FAIL, 409, {"waiting": exc.waiting})
            time.sleep(client.rng.uniform(0, 0.1))
            return
        except Killed:
            client.nemesis.log("kill", f"{client.name} waiter {resource}")
            client.history.complete(op, FAIL, None, {"tickets": list(tickets), "killed": True})
            time.sleep(settings.expiry_ms / 1000)  # a new process takes a while to come back
            return
        except NO_ANSWER:
            client.history.complete(op, UNKNOWN, None, {"tickets": list(tickets)})
            return
        served: dict[str, Any] = {
            "fence": held.fence,
            "ticket": held.ticket,
            "tickets": list(tickets),
        }
        if ticketed:
            served["ticketedAt"] = ticketed[0]
        client.history.complete(op, OK, 201, served)
        if kind == "holder-killed":
            kill = client.history.invoke(
                "queue", client.name, "kill", resource=resource, owner=owner, fence=held.fence
            )
            client.nemesis.log("kill", f"{client.name} holder {resource} fence {held.fence}")
            client.history.complete(kill, OK, None, {"expiresAt": held.expires_at_ms})
            time.sleep(settings.expiry_ms / 1000)
            return
        beat = Heartbeat(
            waiting.leases, held, period_ms=settings.heartbeat_ms, ttl_ms=settings.expiry_ms
        )
        with beat:
            time.sleep(client.rng.uniform(0, 0.1))
        if kind == "holder-paused":
            pause = settings.expiry_ms / 1000 + settings.heartbeat_ms / 1000 + 0.3
            client.nemesis.log("pause", f"{client.name} heartbeat {resource} {pause:.1f}s")
            time.sleep(pause)
        fenced_append(
            client, "queue", waiting.leases, beat.lease, data_table, f"chaos-qdata/{resource}"
        )
        with (
            client.nemesis.invocation("queue release"),
            contextlib.suppress(
                Crash,
                lease.LeaseLost,
                retry.OutcomeUnknown,
                retry.RetriesExhausted,
                errors.AwsRefused,
                errors.AwsRetryable,
            ),
        ):
            waiting.leases.release(beat.lease)

    return step


def wallets(client: Client, setup: Setup) -> Callable[[], None]:
    def step() -> None:
        wallet = client.rng.choice(setup.wallets)
        amount = client.rng.randint(1, 50)
        key = client.fresh("k") if client.rng.random() < 0.5 else None
        client.nemesis.maybe_skew()
        op = client.history.invoke(
            "wallets", client.name, "top-up", wallet=wallet, amount=amount, key=key
        )
        client.request(op, "POST", f"/wallets/{wallet}/top-ups", {"amount": amount}, key)
        time.sleep(client.rng.uniform(0, 0.1))

    return step


def inventory(client: Client, setup: Setup, clean: Caller) -> Callable[[], None]:
    refusals = [0]

    def step() -> None:
        sku = setup.skus[-1][0]
        quantity = client.rng.randint(1, 3)
        hold = client.rng.choice([0.5, 1.0, 2.0])
        op = client.history.invoke(
            "inventory", client.name, "reserve", sku=sku, quantity=quantity, hold=hold
        )
        client.request(
            op,
            "POST",
            f"/inventory/{sku}/reservations",
            {"quantity": quantity, "holdSeconds": hold},
        )
        if op.type != OK:
            if op.type == FAIL and (op.value or {}).get("error") == "OUT_OF_STOCK":
                refusals[0] += 1
                if refusals[0] >= 5:
                    refusals[0] = 0
                    with setup.lock:
                        if setup.skus[-1][0] == sku:
                            create_sku(setup, clean)
            time.sleep(client.rng.uniform(0.05, 0.2))
            return
        refusals[0] = 0
        reservation = op.value["reservationId"]
        roll = client.rng.random()
        if roll < 0.25:
            return  # let it lapse
        time.sleep(client.rng.uniform(0, hold * 1.2))
        if roll < 0.75:
            confirm = client.history.invoke(
                "inventory", client.name, "confirm", sku=sku, reservation=reservation
            )
            client.request(confirm, "POST", f"/inventory/{sku}/reservations/{reservation}/confirm")
        else:
            cancel = client.history.invoke(
                "inventory", client.name, "cancel", sku=sku, reservation=reservation
            )
            client.request(cancel, "DELETE", f"/inventory/{sku}/reservations/{reservation}")

    return step
