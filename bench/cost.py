"""What one request of each route costs: DynamoDB units, calls and CPU, against its floors.

``python -m bench --only cost``. Every route of the API (``service.api.routes.ROUTES``) is called
in this process through its function's own handler, as the local bridge calls it: an API Gateway
proxy event with the authorizer's claims, the function's environment from the synthesized template,
and the function's own DynamoDB client (``service.runtime``), which counts every call and the units
DynamoDB reported (``turnstile_ddb.consumption``). Two contention levels per route:

* ``low``: requests one after another from one thread, each on a target nobody else touches;
* ``seed``: the seed workload, 1000 requests from 100 users (a thread each) on one target of
  100 units (stock, seats, units), the same shape as the flash-sale benches.

Per row: ``rcu`` / ``wcu`` / ``calls``: what the function's client counted, per request;
``unreported``: calls per request whose answer carried no figure (a refused condition, a cancelled
transaction: AWS charges those but does not say how much); ``cpu_ms``: the handler's CPU time
per request (``time.thread_time`` around the handler call, on the thread that runs it);
``bare_cpu_ms``: the same DynamoDB calls, recorded from the handler and sent again from a plain
boto3 client with no hooks, on as many threads (no resolver, validation, metrics or tracing): the
floor for the function's overhead. The floors in units are the route's semantics, written below
per route with the reason (:data:`CASES`); ``why`` says why a row stays above 1.5x its floor.

Metrics are written as in Lambda (EMF, to a null stream here) so their cost is measured too.
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import botocore

from bench.harness import run_workload
from turnstile_ddb import metrics
from turnstile_ddb.consumption import PATTERN

LOW, SEED = "low", "seed"
SEED_REQUESTS, SEED_USERS, SEED_UNITS = 1000, 100, 100
LOW_REQUESTS = 200
UNITS_TARGET, CPU_TARGET = 1.5, 1.3
UNEXPLAINED = "above its floor, not explained yet"
COLUMNS = [
    "route",
    "contention",
    "rcu",
    "wcu",
    "floor_rcu",
    "floor_wcu",
    "calls",
    "unreported",
    "cpu_ms",
    "bare_cpu_ms",
    "cpu_over_bare",
    "outcomes",
    "why",
]

Event = dict[str, Any]
T = TypeVar("T")
Handler = Callable[[Event, Any], dict[str, Any]]


def claims_of(sub: str, *, admin: bool = False) -> dict[str, str]:
    """A caller as API Gateway's Cognito authorizer hands it on (every value a string)."""
    claims = {"sub": sub, "token_use": "id", "cognito:username": sub}
    if admin:
        claims["cognito:groups"] = "admins"
    return claims


ADMIN = claims_of("cost-admin", admin=True)


def user(index: int) -> dict[str, str]:
    return claims_of(f"cost-user-{index % SEED_USERS:03d}")


def proxy_event(
    route: str,
    params: dict[str, str] | None = None,
    body: Any = None,
    *,
    caller: dict[str, str] = ADMIN,
    headers: dict[str, str] | None = None,
) -> Event:
    """A REST proxy event for ``route`` ("POST /products/{productId}/purchases")."""
    method, resource = route.split(" ", 1)
    return {
        "resource": resource,
        "path": resource.format(**(params or {})),
        "httpMethod": method,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "pathParameters": params,
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
        "requestContext": {"requestId": uuid.uuid4().hex, "authorizer": {"claims": caller}},
    }


@dataclass
class Target:
    """What a case's requests act on, made through the API before the measured requests."""

    call: Callable[[Event], dict[str, Any]]
    run: str
    saved: dict[str, Any] = field(default_factory=dict)

    def must(self, event: Event, *statuses: int) -> dict[str, Any]:
        response = self.call(event)
        if response["statusCode"] not in statuses:
            raise RuntimeError(f"setup {event['httpMethod']} {event['path']}: {response}")
        return json.loads(response["body"]) if response.get("body") else {}


# A case prepares its target for ``n`` requests at a contention level and returns the event of
# request ``i``; requests at ``low`` each get a target of their own where they would collide.
Prepare = Callable[[Target, str, int], Callable[[int], Event]]


@dataclass(frozen=True)
class Case:
    route: str
    floor_rcu: float
    floor_wcu: float
    floor: str  # why the floor is what it is
    prepare: Prepare
    why: str = ""  # why the route stays above UNITS_TARGET x its floor at low contention


def _ids(target: Target, kind: str, contention: str, n: int) -> list[str]:
    """``n`` ids at ``low`` (one per request), one shared at ``seed``."""
    count = n if contention == LOW else 1
    return [f"cost-{target.run}-{kind}-{i}" for i in range(count)]


def _pick(ids: list[T], i: int) -> T:
    return ids[i % len(ids)]


def _products(target: Target, contention: str, n: int, stock: int | None = None) -> list[str]:
    ids = _ids(target, "product", contention, n)
    for product in ids:
        units = stock if stock is not None else (n if contention == LOW else SEED_UNITS)
        body = {"productId": product, "name": "cost", "stock": units}
        target.must(proxy_event("POST /products", body=body), 201)
    return ids


def create_product(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    def event(i: int) -> Event:
        body = {"productId": f"cost-{target.run}-new-{i}", "name": "cost", "stock": SEED_UNITS}
        return proxy_event("POST /products", body=body)

    return event


def read_product(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _products(target, contention, n)
    return lambda i: proxy_event(
        "GET /products/{productId}", {"productId": _pick(ids, i)}, caller=user(i)
    )


def patch_product(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _products(target, contention, n)
    return lambda i: proxy_event(
        "PATCH /products/{productId}",
        {"productId": _pick(ids, i)},
        {"name": f"renamed {i}"},
        headers={"If-Match": '"1"'},  # a new product's version: at seed one PATCH wins
    )


def restock(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _products(target, contention, 1)
    return lambda i: proxy_event(
        "POST /products/{productId}/restocks", {"productId": ids[0]}, {"units": 1}
    )


def purchase(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _products(target, contention, 1, stock=n if contention == LOW else SEED_UNITS)
    return lambda i: proxy_event(
        "POST /products/{productId}/purchases",
        {"productId": ids[0]},
        {"quantity": 1},
        caller=user(i),
    )


def _resources(target: Target, contention: str, n: int) -> list[str]:
    return _ids(target, "lock", contention, n)


def acquire(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _resources(target, contention, n)
    return lambda i: proxy_event(
        "POST /locks/{resource}", {"resource": _pick(ids, i)}, {"ttlSeconds": 60}, caller=user(i)
    )


def _held(target: Target, contention: str, n: int) -> list[tuple[str, int]]:
    held = []
    for resource in _resources(target, contention, n):
        answer = target.must(
            proxy_event(
                "POST /locks/{resource}",
                {"resource": resource},
                {"ttlSeconds": 600},
                caller=user(0),
            ),
            201,
        )
        held.append((resource, int(answer["fence"])))
    return held


def renew(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    held = _held(target, contention, n)

    def event(i: int) -> Event:
        resource, fence = _pick(held, i)
        body = {"fence": fence, "ttlSeconds": 600}
        return proxy_event("PUT /locks/{resource}", {"resource": resource}, body, caller=user(0))

    return event


def release(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    held = _held(target, contention, n)

    def event(i: int) -> Event:
        resource, fence = _pick(held, i)
        return proxy_event(
            "DELETE /locks/{resource}", {"resource": resource}, {"fence": fence}, caller=user(0)
        )

    return event


def _wallets(target: Target, contention: str, n: int) -> list[str]:
    return _ids(target, "wallet", contention, n)


def top_up(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _wallets(target, contention, n)
    return lambda i: proxy_event(
        "POST /wallets/{walletId}/top-ups",
        {"walletId": _pick(ids, i)},
        {"amount": 1},
        caller=user(0),  # a wallet is its first payer's: one owner tops it up
    )


def read_wallet(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _wallets(target, contention, n)
    for wallet in ids:
        route = "POST /wallets/{walletId}/top-ups"
        target.must(proxy_event(route, {"walletId": wallet}, {"amount": 1}, caller=user(0)), 201)
    return lambda i: proxy_event(
        "GET /wallets/{walletId}", {"walletId": _pick(ids, i)}, caller=user(0)
    )


CREATED_UNITS = 10  # a creation's size here: its cost grows with its units (see the floor)


def create_inventory(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    return lambda i: proxy_event(
        "POST /inventory", body={"sku": f"cost-{target.run}-sku-new-{i}", "units": CREATED_UNITS}
    )


def _skus(target: Target, contention: str, n: int, units: int) -> list[str]:
    ids = _ids(target, "sku", contention, n)
    for sku in ids:
        target.must(proxy_event("POST /inventory", body={"sku": sku, "units": units}), 201)
    return ids


def read_sku(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _skus(target, contention, 1, SEED_UNITS)
    return lambda i: proxy_event("GET /inventory/{sku}", {"sku": ids[0]}, caller=user(i))


def read_sku_exact(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _skus(target, contention, 1, SEED_UNITS)
    # the exact count is an administrator's (it reads every unit)
    return lambda i: proxy_event("GET /inventory/{sku}/exact", {"sku": ids[0]})


def reserve(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _skus(target, contention, 1, n if contention == LOW else SEED_UNITS)
    return lambda i: proxy_event(
        "POST /inventory/{sku}/reservations", {"sku": ids[0]}, {"quantity": 1}, caller=user(i)
    )


def _reservations(target: Target, contention: str, n: int) -> list[tuple[str, str]]:
    """At ``low`` n reservations of one unit; at ``seed`` one, which every request names."""
    count = n if contention == LOW else 1
    ids = _skus(target, contention, 1, max(count, 1))
    made = []
    for _ in range(count):
        answer = target.must(
            proxy_event(
                "POST /inventory/{sku}/reservations",
                {"sku": ids[0]},
                {"quantity": 1, "holdSeconds": 600},
                caller=user(0),
            ),
            201,
        )
        made.append((ids[0], answer["reservationId"]))
    return made


def confirm(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    made = _reservations(target, contention, n)

    def event(i: int) -> Event:
        sku, reservation = _pick(made, i)
        params = {"sku": sku, "reservationId": reservation}
        route = "POST /inventory/{sku}/reservations/{reservationId}/confirm"
        return proxy_event(route, params, caller=user(0))

    return event


def cancel(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    made = _reservations(target, contention, n)

    def event(i: int) -> Event:
        sku, reservation = _pick(made, i)
        params = {"sku": sku, "reservationId": reservation}
        route = "DELETE /inventory/{sku}/reservations/{reservationId}"
        return proxy_event(route, params, caller=user(0))

    return event


def create_event(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    return lambda i: proxy_event(
        "POST /events",
        body={"eventId": f"cost-{target.run}-event-new-{i}", "name": "cost", "capacity": 100},
    )


def _events(target: Target, contention: str, n: int, seats: int | None = None) -> list[str]:
    ids = _ids(target, "event", contention, 1)
    capacity = seats or (n if contention == LOW else SEED_UNITS)
    for event_id in ids:
        body = {"eventId": event_id, "name": "cost", "capacity": capacity}
        target.must(proxy_event("POST /events", body=body), 201)
    return ids


def read_event(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _events(target, contention, n)
    return lambda i: proxy_event("GET /events/{eventId}", {"eventId": ids[0]}, caller=user(i))


def register(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _events(target, contention, n)
    # low: n distinct people one after another; seed: 100 users, 10 tries each, 100 seats
    people = n if contention == LOW else SEED_USERS
    return lambda i: proxy_event(
        "POST /events/{eventId}/registrations",
        {"eventId": ids[0]},
        {"userId": f"cost-person-{i % people}"},
    )


def unregister(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _events(target, contention, n)
    people = n if contention == LOW else SEED_USERS
    for person in range(people):
        body = {"userId": f"cost-person-{person}"}
        route = "POST /events/{eventId}/registrations"
        target.must(proxy_event(route, {"eventId": ids[0]}, body), 201)
    return lambda i: proxy_event(
        "DELETE /events/{eventId}/registrations/{userId}",
        {"eventId": ids[0], "userId": f"cost-person-{i % people}"},
    )


def read_registrations(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _events(target, contention, n, seats=SEED_USERS)
    for i in range(SEED_USERS):
        body = {"userId": user(i)["sub"]}
        target.must(
            proxy_event("POST /events/{eventId}/registrations", {"eventId": ids[0]}, body), 201
        )
    return lambda i: proxy_event(
        "GET /users/{userId}/registrations", {"userId": user(i)["sub"]}, caller=user(i)
    )


def request_registration(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _events(target, contention, n)
    return lambda i: proxy_event(
        "POST /events/{eventId}/registration-requests", {"eventId": ids[0]}, {}, caller=user(i)
    )


def read_request(target: Target, contention: str, n: int) -> Callable[[int], Event]:
    ids = _events(target, contention, n)
    route = "POST /events/{eventId}/registration-requests"
    answer = target.must(proxy_event(route, {"eventId": ids[0]}, {}, caller=user(0)), 202)
    params = {"eventId": ids[0], "requestId": answer["requestId"]}
    route = "GET /events/{eventId}/registration-requests/{requestId}"
    return lambda i: proxy_event(route, params, caller=user(0))


ONE_WRITE = "one conditional write of one item"
CONSISTENT = (
    "a strongly consistent read (1 RCU), so that a GET right after a write sees it (its ETag or "
    "counts are current); an eventually consistent read would meet the floor"
)
ONE_READ = "one eventually consistent read of one item (0.5 RCU up to 4 KB)"
CASES: tuple[Case, ...] = (
    Case("POST /products", 0, 1, f"{ONE_WRITE}: put if the id is free", create_product),
    Case("GET /products/{productId}", 0.5, 0, ONE_READ, read_product, CONSISTENT),
    Case(
        "PATCH /products/{productId}",
        0,
        1,
        f"{ONE_WRITE}: the version in If-Match is the condition",
        patch_product,
        "a product this environment has not seen is read once for its shard count",
    ),
    Case("POST /products/{productId}/restocks", 0, 1, f"{ONE_WRITE}: an add", restock),
    Case(
        "POST /products/{productId}/purchases",
        0,
        1,
        f"an atomic purchase is {ONE_WRITE}: stock >= quantity",
        purchase,
    ),
    Case("POST /locks/{resource}", 0, 1, f"{ONE_WRITE}: free or expired", acquire),
    Case("PUT /locks/{resource}", 0, 1, f"{ONE_WRITE}: owner and fence match", renew),
    Case("DELETE /locks/{resource}", 0, 1, f"{ONE_WRITE}: owner and fence match", release),
    Case(
        "POST /wallets/{walletId}/top-ups",
        0,
        6,
        "a charge made once inside a lease: the lease taken (1) and given back (1), the credit "
        "and its charge record in one transaction (2 items x 2)",
        top_up,
        "two strongly consistent reads of the wallet: its owner is checked before anything is "
        "written (a refused caller writes not even the lease), and again under the lease, where "
        "the answer is final",
    ),
    Case("GET /wallets/{walletId}", 0.5, 0, ONE_READ, read_wallet, CONSISTENT),
    Case(
        "POST /inventory",
        0,
        CREATED_UNITS + 1,
        f"a put per unit ({CREATED_UNITS} here) and one for the sku's header; the function "
        "writes the header and a first chunk of units, the creation worker the rest (not "
        "counted in this row)",
        create_inventory,
        "two reads of the sku's header (GetItem) besides the writes, not examined further here",
    ),
    Case("GET /inventory/{sku}", 0.5, 0, f"{ONE_READ}: the sku's summary", read_sku),
    Case(
        "GET /inventory/{sku}/exact",
        0.5,
        0,
        "the units' states counted from one eventually consistent Query of small items",
        read_sku_exact,
        "it reads every unit of the sku (100 here): its cost grows with the units (the exact "
        "count is the administrator's check on the summary)",
    ),
    Case(
        "POST /inventory/{sku}/reservations",
        0.5,
        2,
        "one Query page of the claimable index finds a free unit (0.5); one conditional write "
        "holds it (1) and takes it out of the index (1)",
        reserve,
    ),
    Case(
        "POST /inventory/{sku}/reservations/{reservationId}/confirm",
        0.5,
        4,
        "the reservation read for its units (0.5), then its units (one here) and its record "
        "changed together in one transaction (2 items x 2)",
        confirm,
        "the reservation is read strongly consistently (1 RCU); an eventually consistent read "
        "would meet the floor",
    ),
    Case(
        "DELETE /inventory/{sku}/reservations/{reservationId}",
        0.5,
        4,
        "the reservation read for its units (0.5), then its units (one here) and its record "
        "changed together in one transaction (2 items x 2)",
        cancel,
        "the reservation is read strongly consistently (1 RCU), and each freed unit goes back "
        "into the claimable index (2 more units in the transaction)",
    ),
    Case("POST /events", 0, 1, f"{ONE_WRITE}: put if the id is free", create_event),
    Case("GET /events/{eventId}", 0.5, 0, ONE_READ, read_event, CONSISTENT),
    Case(
        "POST /events/{eventId}/registrations",
        0,
        4,
        "the seat counter and the member item in one transaction (2 items x 2)",
        register,
        "the member item is also written to the byUser index that GET "
        "/users/{userId}/registrations reads (2 more units in the transaction)",
    ),
    Case(
        "DELETE /events/{eventId}/registrations/{userId}",
        0,
        4,
        "the seat counter and the member item in one transaction (2 items x 2)",
        unregister,
        "the member item also leaves the byUser index (2 more units in the transaction), and "
        "a few requests read the member first (0.005 RCU a request)",
    ),
    Case(
        "GET /users/{userId}/registrations",
        0.5,
        0,
        "one eventually consistent Query of the user's few registrations",
        read_registrations,
    ),
    Case(
        "POST /events/{eventId}/registration-requests",
        0.5,
        1,
        f"the event read (it must exist: 404 otherwise), then {ONE_WRITE}: the PENDING request "
        "(the stream consumer decides it later)",
        request_registration,
        "the event is read strongly consistently (1 RCU) to answer 404 for an unknown event; "
        "an eventually consistent read would meet the floor",
    ),
    Case(
        "GET /events/{eventId}/registration-requests/{requestId}",
        0.5,
        0,
        ONE_READ,
        read_request,
        CONSISTENT,
    ),
)


class Recorder:
    """The DynamoDB calls each thread's current request made (operation and parameters, as the
    client sent them), for the bare handler to send again."""

    def __init__(self) -> None:
        self._local = threading.local()

    def attach(self, client: Any) -> None:
        client.meta.events.register(
            "before-parameter-build.dynamodb", self._record, unique_id="bench-cost-recorder"
        )

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        calls = getattr(self._local, "calls", None)
        if calls is not None:
            calls.append((botocore.xform_name(model.name), dict(params)))

    @contextlib.contextmanager
    def request(self) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        calls: list[tuple[str, dict[str, Any]]] = []
        self._local.calls = calls
        try:
            yield calls
        finally:
            self._local.calls = None


def _label(response: dict[str, Any]) -> str:
    status = response["statusCode"]
    if status < 400:
        return str(status)
    try:
        return f"{status} {json.loads(response['body']).get('error')}"
    except (ValueError, AttributeError, TypeError):
        return str(status)


@dataclass
class Measured:
    cpu: list[float] = field(default_factory=list)
    calls: list[list[tuple[str, dict[str, Any]]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def measure_case(
    case: Case,
    contention: str,
    handler: Handler,
    recorder: Recorder,
    bare: Any,
    *,
    low_requests: int = LOW_REQUESTS,
    seed_requests: int = SEED_REQUESTS,
    seed_users: int = SEED_USERS,
) -> dict[str, Any]:
    """One row: ``case``'s route at ``contention``, through ``handler``; then the bare replay."""
    n, workers = (low_requests, 1) if contention == LOW else (seed_requests, seed_users)
    target = Target(call=lambda event: handler(event, None), run=uuid.uuid4().hex[:6])
    event_of = case.prepare(target, contention, n)
    events = [event_of(i) for i in range(n)]
    measured = Measured()

    def attempt(i: int) -> str:
        with recorder.request() as calls:
            started = time.thread_time()
            response = handler(events[i], None)
            spent = time.thread_time() - started
        with measured.lock:
            measured.cpu.append(spent)
            measured.calls.append(calls)
        return _label(response)

    before = metrics.tally.snapshot()
    outcome = run_workload(n, workers, attempt)
    after = metrics.tally.snapshot()

    def counted(name: str) -> float:
        key = (PATTERN, name)
        return (after.get(key, 0.0) - before.get(key, 0.0)) / n

    bare_cpu = replay(bare, measured.calls, workers)
    cpu_ms = statistics.fmean(measured.cpu) * 1000
    bare_ms = statistics.fmean(bare_cpu) * 1000
    row = {
        "route": case.route,
        "contention": contention,
        "rcu": round(counted("ReadUnits"), 3),
        "wcu": round(counted("WriteUnits"), 3),
        "floor_rcu": case.floor_rcu,
        "floor_wcu": case.floor_wcu,
        "calls": round(counted("DynamoDBCall"), 3),
        "unreported": round(counted("UnitsUnreported"), 3),
        "cpu_ms": round(cpu_ms, 3),
        "bare_cpu_ms": round(bare_ms, 3),
        "cpu_over_bare": round(cpu_ms / bare_ms, 2) if bare_ms else None,
        "operations": operations(measured.calls, n),
        "requests": n,
        "users": workers,
        "outcomes": dict(Counter(outcome.outcomes)),
        "floor": case.floor,
        "why": "",
    }
    if contention == LOW and over_floor(row) > UNITS_TARGET:
        row["why"] = case.why or UNEXPLAINED
    return row


def operations(requests: list[list[tuple[str, dict[str, Any]]]], n: int) -> dict[str, float]:
    """DynamoDB operations per request, by name (where a row's units go)."""
    sent = Counter(operation for calls in requests for operation, _ in calls)
    return {operation: round(count / n, 3) for operation, count in sorted(sent.items())}


def over_floor(row: dict[str, Any]) -> float:
    """Units per request over the floor's (read and write units each; the worse of the two)."""
    ratios = [1.0]
    for used, floor in ((row["rcu"], row["floor_rcu"]), (row["wcu"], row["floor_wcu"])):
        if floor:
            ratios.append(used / floor)
        elif used:
            ratios.append(float("inf"))
    return max(ratios)


def replay(
    client: Any, requests: list[list[tuple[str, dict[str, Any]]]], workers: int
) -> list[float]:
    """CPU per request of sending each request's recorded calls again from ``client``, on
    ``workers`` threads. A call refused now (the write it repeats has landed) is still a call."""
    spent: list[float] = []
    lock = threading.Lock()

    def attempt(i: int) -> str:
        started = time.thread_time()
        for operation, params in requests[i]:
            with contextlib.suppress(botocore.exceptions.ClientError):
                getattr(client, operation)(**params)
        cpu = time.thread_time() - started
        with lock:
            spent.append(cpu)
        return "ok"

    run_workload(len(requests), workers, attempt)
    return spent


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The functions' log lines and EMF documents go to a null stream (they are still written)."""
    with contextlib.redirect_stdout(io.StringIO()) as sink:
        yield
    sink.close()


def handlers() -> dict[str, Handler]:
    """Each API function's handler, by the function's name (the catalogue's)."""
    import importlib

    from service import catalog

    return {
        spec.name: importlib.import_module(spec.module).handler for spec in catalog.API_FUNCTIONS
    }


def run(
    *,
    bare: Any,
    cases: tuple[Case, ...] = CASES,
    levels: tuple[str, ...] = (LOW, SEED),
    low_requests: int = LOW_REQUESTS,
    seed_requests: int = SEED_REQUESTS,
    seed_users: int = SEED_USERS,
) -> list[dict[str, Any]]:
    """Every case at every level, in the caller's environment (the functions' variables set)."""
    from service import runtime
    from service.api.routes import ROUTES

    by_route = {f"{r.method} {r.path}": r.function for r in ROUTES}
    served = handlers()
    recorder = Recorder()
    recorder.attach(runtime.dynamodb.get())
    rows = []
    with quiet():
        for case in cases:
            handler = served[by_route[case.route]]
            for level in levels:
                row = measure_case(
                    case,
                    level,
                    handler,
                    recorder,
                    bare,
                    low_requests=low_requests,
                    seed_requests=seed_requests,
                    seed_users=seed_users,
                )
                rows.append(row)
    return rows


def document(rows: list[dict[str, Any]], load: tuple[float, float, float]) -> dict[str, Any]:
    """cost.json: the rows, what was measured and where, and the machine's load at the start."""
    import os
    import platform

    return {
        "measured": (
            "Each API route called in one process through its function's handler (as the local "
            "bridge calls it) against DynamoDB Local; units as DynamoDB Local reported them on "
            "every call of the function's own client; CPU = thread CPU time around the handler; "
            "bare = the same calls sent again from a plain boto3 client. low: requests one after "
            f"another; seed: {SEED_REQUESTS} requests from {SEED_USERS} users on one target of "
            f"{SEED_UNITS} units."
        ),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": [round(value, 2) for value in load],
        },
        "targets": {"units_over_floor": UNITS_TARGET, "cpu_over_bare": CPU_TARGET},
        "routes": rows,
    }


PAGE = "docs/cost.md"
BEGIN = "<!-- generated from bench/results/cost.json by: python -m bench.cost -->"
END = "<!-- end of the generated part -->"
SHOWN = ["route", "contention", "rcu", "wcu", "floor_rcu", "floor_wcu", "calls"]
SHOWN += ["cpu_ms", "bare_cpu_ms", "cpu_over_bare"]


def docs_section(document: dict[str, Any]) -> str:
    """The per-route part of docs/cost.md, from cost.json: what was measured, where, under what
    load, the table, each floor's reason and why a row stays above its floor."""
    rows = document["routes"]
    load = ", ".join(f"{value:g}" for value in document["machine"]["load_average"])
    lines = [
        BEGIN,
        "",
        f"{document['measured']} Measured on {document['date']}, on a machine of "
        f"{document['machine']['cpus']} CPUs "
        f"(load average {load} at the start: 2 or less is a quiet machine), Python "
        f"{document['machine']['python']}. Units are per request; `cpu_ms` and `bare_cpu_ms` "
        "are milliseconds of CPU per request. DynamoDB Local charges as DynamoDB does per item "
        "(1 per conditional write, 0.5 per eventually consistent read, twice a transaction's "
        "items), but a refused write's units are not reported by either (AWS bills them).",
        "",
        "| " + " | ".join(SHOWN) + " |",
        "|" + "---|" * len(SHOWN),
    ]
    lines += ["| " + " | ".join(f"{row[c]}" for c in SHOWN) + " |" for row in rows]
    lines += ["", "Floors, per route:", ""]
    seen: dict[str, str] = {}
    for row in rows:
        seen.setdefault(row["route"], row["floor"])
    lines += [f"- `{route}`: {floor}." for route, floor in seen.items()]
    above = [row for row in rows if row["why"]]
    if above:
        lines += ["", "Above 1.5 times the floor at low contention, and why:", ""]
        lines += [f"- `{row['route']}`: {row['why']}." for row in above]
    lines += ["", END]
    return "\n".join(lines)


def write_docs(document: dict[str, Any], page: Any) -> None:
    """Put :func:`docs_section` into ``page`` (a Path), between its markers or at its end."""
    text = page.read_text()
    section = docs_section(document)
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        heading = "## Per route: units and CPU against their floors"
        text = text.rstrip("\n") + f"\n\n{heading}\n\n{section}\n"
    page.write_text(text)


if __name__ == "__main__":
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    write_docs(json.loads((root / "bench/results/cost.json").read_text()), root / PAGE)
