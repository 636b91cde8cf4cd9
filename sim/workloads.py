"""Workloads: what each simulated client does, through the real library and service code.

Each records :class:`chaos.history.Op` entries stamped with *virtual* time, so chaos's checkers
can judge them (see :mod:`sim.checks`).

* **purchases**: ``service.domain.products.Products.purchase`` with the ``atomic`` (conditional
  decrement) and ``versioned`` (read, decide, version-checked write) strategies, and keyed: an
  ``Idempotency-Key`` claimed in ``turnstile_ddb.idempotency`` and committed with the versioned
  write in one transaction, retried under its key as a client would; some reuse an earlier key
  for another request, as a buggy client would (refused: 422).
* **leases**: ``turnstile_ddb.lease.Leases.acquire_wait``, then a fenced transaction
  (``Leases.transact``) appending the fence to a protected item, then ``release``; some
  contenders try again at exactly the holder's stored expiry, some holders overstay their lease
  before the fenced transaction (see :class:`Leasing`).
* **reservations**: ``service.domain.inventory.Inventory`` (the service's real code over
  ``turnstile_ddb.claims``): reserve 1 to 3 units of a small sku spread over pools with a short
  hold, then confirm, cancel, or let the hold lapse.
* **sharded products**: ``Products.purchase`` on products whose stock is split over shards
  (``turnstile_ddb.sharded.take``), with restocks (``sharded.add``) racing with the takes.
* **the lease queue**: ``LeaseQueue.acquire`` with bounded waits, holders renewing under a
  ``Heartbeat`` run as a simulated client of its own, plain ``Leases.acquire`` arrivals, crashes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.checkers import SkuState
from chaos.history import FAIL, OK, UNKNOWN, Op
from service import config
from service.domain.errors import AlreadyConfirmed, Conflict, Expired, NotFound, OutOfStock
from service.domain.inventory import Inventory, unit_id
from service.domain.products import Products
from sim.ddb import create_table
from sim.scheduler import Crashed, Scheduler, Task
from turnstile_ddb import claims, codec, errors, idempotency, lease, lease_queue, retry, sharded

PRODUCTS_TABLE = "sim-products"
IDEMPOTENCY_TABLE = "sim-idempotency"
LEASES_TABLE = "sim-leases"
DATA_TABLE = "sim-data"
LEASE_TTL_MS = 2000
# The documented bounds of one reservation (docs/patterns/inventory.md), written here rather than
# read from the code under test, so that code which loosens them is caught (a test pins them).
RESERVE_ROUNDS = 12  # service.config.INVENTORY_RESERVE_ROUNDS
PAGES_PER_POOL = 4  # turnstile_ddb.claims.PAGES_PER_POOL
INVENTORY_TABLE = "sim-inventory"
INVENTORY_SUMMARY_TABLE = "sim-inventory-summary"
_STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


@dataclass
class Hold:
    """What a lease holder believed: from its acquisition's reply until it released or its own
    clock passed ``expiresAt`` minus the safety margin (all in global virtual seconds)."""

    resource: str
    owner: str
    fence: int
    start: float
    end: float
    op: Op
    # What was asked and granted, on the holder's own clock (epoch ms): the lease asked for
    # ``asked_ms`` at ``asked_at_ms`` (when the acquisition began) and was answered at
    # ``answered_at_ms`` with ``expires_at_ms``.
    asked_ms: int = 0
    asked_at_ms: int = 0
    answered_at_ms: int = 0
    expires_at_ms: int = 0
    # The grant's own ``now`` (the acquirer's clock, epoch ms: the ``:now`` its condition was
    # judged with) and the lease it replaced, as the database showed it (:func:`_previous`).
    granted_at_ms: int = 0
    previous: dict[str, Any] | None = None


@dataclass
class Recorder:
    """The history, in virtual time (chaos.history.History stamps wall-clock time)."""

    scheduler: Scheduler
    ops: list[Op] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def invoke(self, pattern: str, process: str, f: str, **args: Any) -> Op:
        now = self.scheduler.now
        op = Op(next(self._ids), pattern, process, f, args, now, int(now * 1000))
        self.ops.append(op)
        return op

    def complete(self, op: Op, outcome: str, value: Any = None) -> None:
        now = self.scheduler.now
        op.type, op.value = outcome, value
        op.completed = float("inf") if outcome == UNKNOWN else now
        op.completed_ms = int(now * 1000)

    def outcome(
        self, op: Op, exc: BaseException | None, shown: Any, refused: tuple[type[Exception], ...]
    ) -> None:
        """Complete ``op`` as the drift workloads do: OK with ``shown`` (what its answer shows),
        FAIL on one of ``refused`` (the error's name), UNKNOWN on a lost outcome or a crash;
        any other exception is raised again (the run reports it)."""
        if exc is None:
            self.complete(op, OK, shown)
        elif isinstance(exc, refused):
            self.complete(op, FAIL, {"error": type(exc).__name__})
        elif isinstance(exc, errors.OutcomeUnknown | Crashed):
            self.complete(op, UNKNOWN)
        else:
            raise exc


class Blocking:
    """A synchronous object's methods, awaitable: each call runs (and blocks) when awaited, so
    a drift workload written once as a coroutine drives the synchronous front door too."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self.target, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


async def settled(
    recorder: Recorder,
    op: Op,
    call: Awaitable[Any],
    complete: Callable[[Recorder, Op, BaseException | None, Any], None],
) -> Any:
    """Await ``call`` and ``complete`` ``op`` with its answer or exception; the answer, or None
    when it raised (a crash propagates: the client stops there)."""
    try:
        answer = await call
    except BaseException as exc:
        complete(recorder, op, exc, None)
        if isinstance(exc, Crashed):
            raise
        return None
    complete(recorder, op, None, answer)
    return answer


@dataclass
class Purchases:
    products: list[tuple[str, int]]
    operations: int = 12  # per client
    keyed_attempts: int = 6  # tries of one keyed purchase before it gives up (see _keyed)
    # Of the keyed purchases, the share that reuse one of the client's earlier keys for another
    # request (another product or quantity), as a buggy client would: 422 IDEMPOTENCY_KEY_REUSED.
    reuse: float = 0.25

    def setup(self, client: Any) -> None:
        create_table(client, PRODUCTS_TABLE, "productId")
        create_table(client, IDEMPOTENCY_TABLE, "id")
        for product_id, stock in self.products:
            item = {"productId": product_id, "name": product_id, "stock": stock, "version": 1}
            client.put_item(TableName=PRODUCTS_TABLE, Item=codec.encode_item(item))

    def body(self, recorder: Recorder, client: Any) -> Any:
        def run(task: Task) -> None:
            store = idempotency.IdempotencyStore(
                client,
                IDEMPOTENCY_TABLE,
                backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
                lock_ms=2000,
                clock=task.clock,
            )
            shop = Products(
                client,
                PRODUCTS_TABLE,
                idempotency=store,
                backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
                conflicts=task.backoff(attempts=6, base=0.005, cap=0.1, budget=1.0),
            )
            # this client's keys, each with the requests sent under it
            sent: dict[str, set[tuple[str, int]]] = {}
            for number in range(self.operations):
                product_id = task.rng.choice(self.products)[0]
                quantity = task.rng.randint(1, 3)
                strategy = task.rng.choice(("atomic", "versioned", "keyed"))
                keyed: dict[str, Any] = {}
                if strategy == "keyed":
                    keyed["key"] = f"{task.name}-{number}"
                    reusable = self._reusable(sent)
                    if reusable and task.rng.random() < self.reuse:
                        keyed["key"] = task.rng.choice(reusable)
                        product_id, quantity = self._another(task, sent[keyed["key"]])
                    sent.setdefault(keyed["key"], set()).add((product_id, quantity))
                op = recorder.invoke(
                    "purchases",
                    task.name,
                    "purchase",
                    product=product_id,
                    quantity=quantity,
                    strategy=strategy,
                    **keyed,
                )
                try:
                    if strategy == "keyed":
                        outcome, value = self._keyed(task, shop, store, op, keyed["key"])
                    else:
                        outcome, value = _purchase(shop, product_id, quantity, strategy, None)
                except Crashed:
                    recorder.complete(op, UNKNOWN)
                    raise
                recorder.complete(op, outcome, value)
                task.sleep(task.rng.random() * 0.05)

        return run

    def _reusable(self, sent: dict[str, set[tuple[str, int]]]) -> list[str]:
        """The keys that some request has not been sent under yet (a key every request went
        under has none left to reuse it for), in a fixed order."""
        return sorted(key for key, used in sent.items() if len(used) < len(self.products) * 3)

    def _another(self, task: Task, used: set[tuple[str, int]]) -> tuple[str, int]:
        """A request no earlier request under the key was: another product or quantity (the
        same request twice under one key is a retry, answered with the first answer)."""
        fresh = [(p, q) for p, _ in self.products for q in (1, 2, 3) if (p, q) not in used]
        return task.rng.choice(fresh)

    def _keyed(
        self, task: Task, shop: Products, store: idempotency.IdempotencyStore, op: Op, key: str
    ) -> tuple[str, Any]:
        """A purchase with an ``Idempotency-Key``, as the service's keyed middleware runs it
        (service/api/keyed.py), retried under the same key until its answer is definite. Each
        answer means what the service documents: 422 (the key was another request's) and a
        refusal or a throttle (``RetriesExhausted``: the key given back) say nothing was applied;
        only a purchase whose outcome was unknown (``OutcomeUnknown``) leaves the op unknown when
        the tries run out. A client that reuses a key sends a request no earlier one under that
        key was (:meth:`_another`)."""
        product_id, quantity = op.args["product"], op.args["quantity"]
        request = idempotency.fingerprint(product_id, quantity)
        in_doubt = False  # some try's purchase may have been applied
        last: Any = None
        for _ in range(self.keyed_attempts):
            try:
                begun = store.begin(key, request)
            except idempotency.KeyReused:
                last = {"error": "IDEMPOTENCY_KEY_REUSED"}
                op.attempts.append((422, last))
                return FAIL, last
            except idempotency.StillRunning as exc:
                last = {"error": "IDEMPOTENCY_IN_PROGRESS"}
                op.attempts.append((409, last))
                task.sleep(exc.retry_after_ms / 1000 + 0.01)
                continue
            except (retry.OutcomeUnknown, retry.RetriesExhausted) as exc:
                # the claim alone (a put) changes no stock, whether or not it landed
                unknown = isinstance(exc, retry.OutcomeUnknown)
                last = {"error": "OUTCOME_UNKNOWN" if unknown else "THROTTLED"}
                op.attempts.append((503, last))
                task.sleep(0.1)
                continue
            if isinstance(begun, idempotency.Replay):
                # the stored answer is the purchase's receipt (the sim shapes no HTTP answer)
                op.attempts.append((201, begun.answer))
                return OK, begun.answer
            outcome, value = _purchase(shop, product_id, quantity, "versioned", begun)
            if outcome == OK:
                op.attempts.append((201, value))
                return OK, value
            if outcome == FAIL:  # nothing changed: the key is given back
                with contextlib.suppress(retry.OutcomeUnknown, retry.RetriesExhausted):
                    store.release(begun)
                # (an earlier try in doubt did not land either: its purchase would have
                # completed the key, and this try's claim found it not completed)
                op.attempts.append((409, value))
                return FAIL, value
            op.attempts.append((None, None))  # unknown: the claim stays until it lapses
            in_doubt = True
            task.sleep(0.1)
        if in_doubt:
            return UNKNOWN, None
        return FAIL, last  # every try was turned away before its purchase ran

    def records(self, client: Any, ops: list[Op]) -> dict[str, dict[str, Any]]:
        """The idempotency records of the keys ``ops`` used, as the table holds them at the end
        (status, fingerprint, the stored answer); a key given back has none."""
        found: dict[str, dict[str, Any]] = {}
        for key in sorted({op.args["key"] for op in ops if "key" in op.args}):
            item = client.get_item(
                TableName=IDEMPOTENCY_TABLE,
                Key=codec.encode_item({"id": key}),
                ConsistentRead=True,
            ).get("Item")
            record = codec.decode_item(item) if item else None
            if record:
                answer = record.get("answer")
                found[key] = {
                    "status": record.get("status"),
                    "fingerprint": record.get("fingerprint"),
                    "answer": json.loads(answer) if isinstance(answer, str) else None,
                }
        return found

    def final(self, client: Any) -> dict[str, int | None]:
        stock: dict[str, int | None] = {}
        for product_id, _ in self.products:
            item = client.get_item(
                TableName=PRODUCTS_TABLE,
                Key=codec.encode_item({"productId": product_id}),
                ConsistentRead=True,
            ).get("Item")
            decoded = codec.decode_item(item) or {}
            stock[product_id] = int(decoded["stock"]) if "stock" in decoded else None
        return stock


def _purchase(
    shop: Products,
    product_id: str,
    quantity: int,
    strategy: str,
    claim: idempotency.InProgress | None,
) -> tuple[str, Any]:
    """One purchase's outcome and what the history records of it."""
    try:
        receipt = shop.purchase(product_id, quantity, strategy, claim)
    except OutOfStock as exc:
        return FAIL, {"error": "OUT_OF_STOCK", "available": exc.details["available"]}
    except (Conflict, NotFound) as exc:
        return FAIL, {"error": exc.code}
    except retry.RetriesExhausted:
        return FAIL, {"error": "THROTTLED"}
    except retry.OutcomeUnknown:
        return UNKNOWN, None
    return OK, receipt


@dataclass
class Leasing:
    """Lease holders on one resource, with two deliberate behaviours besides the plain one:

    * **at the boundary**: a contender refused (``Held``, which says the holder's ``expiresAt``)
      sleeps until its own clock reads exactly that millisecond and tries once more there, before
      it waits as usual. Its clock is read when it wakes, before its call's scheduling point
      (``Leases.acquire`` reads ``now`` first), so the try carries ``:now`` = ``expiresAt`` when
      the scheduler wakes it on time; a lease at ``expiresAt == now`` is still live, so that try
      must be refused (``Held``);
    * **overstaying**: a holder pauses past its lease (to its own clock's ``expiresAt``, exactly
      or up to ``overstay_seconds`` later) before its fenced transaction: the write must be
      refused whether or not another client took the lease meanwhile.
    """

    resources: list[str]
    operations: int = 6  # acquisitions per client
    work_seconds: float = 1.5  # the most a holder works before its fenced write
    boundary_share: float = 0.5  # of acquisitions that try again at exactly the holder's expiry
    overstay_share: float = 0.25  # of holds that pause past the lease before the fenced write
    overstay_seconds: float = 0.5  # the most an overstaying holder pauses past its expiry

    def setup(self, client: Any) -> None:
        create_table(client, LEASES_TABLE, "resource")
        create_table(client, DATA_TABLE, "id")

    def body(self, recorder: Recorder, client: Any) -> Any:
        def run(task: Task) -> None:
            leases = lease.Leases(
                client, LEASES_TABLE, backoff=task.backoff(attempts=4), clock=task.clock
            )
            waits = task.backoff(attempts=50, base=0.05, cap=0.5)
            for number in range(self.operations):
                resource = task.rng.choice(self.resources)
                owner = f"{task.name}.{number}"
                boundary = task.rng.random() < self.boundary_share
                op = recorder.invoke("leases", task.name, "acquire", resource=resource, owner=owner)
                tried: dict[str, int] = {}
                try:
                    held = self._acquire(task, leases, waits, resource, owner, boundary, tried)
                except (lease.Held, retry.RetriesExhausted) as exc:
                    recorder.complete(op, FAIL, {"error": type(exc).__name__, **tried})
                    continue
                except retry.OutcomeUnknown:
                    recorder.complete(op, UNKNOWN)
                    continue
                except Crashed:
                    recorder.complete(op, UNKNOWN)
                    raise
                recorder.complete(
                    op,
                    OK,
                    {
                        "fence": held.fence,
                        "expiresAt": held.expires_at_ms,
                        "at": held.acquired_at,
                        "previous": _previous(held),
                        **tried,
                    },
                )
                hold = self._hold(recorder, task, leases, held, op)
                if task.rng.random() < self.overstay_share:
                    # Paused past the lease (a frozen process): to the expiry on its own clock,
                    # exactly (its last millisecond) or a little later.
                    late = 0.0 if task.rng.random() < 0.5 else task.rng.random()
                    until = (held.expires_at_ms + 0.5) / 1000 + late * self.overstay_seconds
                    task.sleep(max(0.0, until - task.clock()))
                else:
                    task.sleep(task.rng.random() * self.work_seconds)
                try:
                    self._write(recorder, task, leases, held)
                finally:  # released next, or dead: either way it holds no longer
                    hold.end = min(hold.end, recorder.scheduler.now)
                with contextlib.suppress(
                    lease.LeaseLost, retry.RetriesExhausted, retry.OutcomeUnknown
                ):
                    leases.release(held)

        return run

    @staticmethod
    def _acquire(
        task: Task,
        leases: lease.Leases,
        waits: retry.Backoff,
        resource: str,
        owner: str,
        boundary: bool,
        tried: dict[str, int],
    ) -> lease.Lease:
        """``acquire_wait``; at the boundary, first one try and, refused, one more at exactly the
        holder's ``expiresAt`` on this client's clock (``tried`` records that try's ``now`` and
        the expiry it aimed at)."""
        if boundary:
            try:
                return leases.acquire(resource, owner, LEASE_TTL_MS)
            except lease.Held as held:
                expiry = held.expires_at_ms
                if 0 < expiry - leases.now_ms() <= LEASE_TTL_MS:
                    task.sleep(max(0.0, (expiry + 0.5) / 1000 - task.clock()))
                    tried.update(boundary=expiry, triedAt=leases.now_ms())
                    with contextlib.suppress(lease.Held):
                        return leases.acquire(resource, owner, LEASE_TTL_MS)
        return leases.acquire_wait(resource, owner, LEASE_TTL_MS, wait_ms=4000, waits=waits)

    @staticmethod
    def _hold(
        recorder: Recorder, task: Task, leases: lease.Leases, held: lease.Lease, op: Op
    ) -> Hold:
        """What the new holder believes (see :class:`Hold`), added to the history."""
        hold = Hold(
            held.resource,
            held.owner,
            held.fence,
            recorder.scheduler.now,
            (held.expires_at_ms - leases.safety_margin_ms) / 1000 - task.skew,
            op,
            asked_ms=LEASE_TTL_MS,
            asked_at_ms=round((op.invoked + task.skew) * 1000),
            answered_at_ms=round(task.clock() * 1000),
            expires_at_ms=held.expires_at_ms,
            granted_at_ms=held.acquired_at,
            previous=_previous(held),
        )
        recorder.holds.append(hold)
        return hold

    @staticmethod
    def _write(
        recorder: Recorder,
        task: Task,
        leases: lease.Leases,
        held: lease.Lease,
        pattern: str = "leases",
    ) -> None:
        op = recorder.invoke(
            pattern,
            task.name,
            "write",
            resource=held.resource,
            fence=held.fence,
            expiresAt=held.expires_at_ms,
            at=leases.now_ms(),  # the guard's :now (read before any scheduling point)
        )
        append = {
            "Update": {
                "TableName": DATA_TABLE,
                "Key": codec.encode_item({"id": held.resource}),
                "UpdateExpression": "SET #log = list_append(if_not_exists(#log, :empty), :f)",
                "ExpressionAttributeNames": {"#log": "log"},
                "ExpressionAttributeValues": {
                    ":empty": {"L": []},
                    ":f": {"L": [{"N": str(held.fence)}]},
                },
            }
        }
        try:
            leases.transact(held, [append])
        except (lease.LeaseLost, retry.RetriesExhausted) as exc:
            recorder.complete(op, FAIL, {"error": type(exc).__name__})
        except (retry.OutcomeUnknown, Crashed) as exc:
            recorder.complete(op, UNKNOWN)
            if isinstance(exc, Crashed):
                raise
        else:
            recorder.complete(op, OK)

    def logs(self, client: Any) -> dict[str, list[int]]:
        return _logs(client, self.resources)


def _previous(held: lease.Lease) -> dict[str, Any] | None:
    """The lease an acquisition replaced, as its write's ALL_OLD image showed it (None: there was
    none): its owner, fence and ``expiresAt`` (0 once released), and whether it was released."""
    item = held.previous or {}
    if "owner" not in item:
        return None
    return {
        "owner": item["owner"],
        "fence": int(item.get("fence", 0)),
        "expiresAt": int(item.get("expiresAt", 0)),
        "released": "releasedAt" in item,
    }


def _logs(client: Any, resources: list[str]) -> dict[str, list[int]]:
    """The fences each resource's protected item accepted, in order."""
    logs: dict[str, list[int]] = {}
    for resource in resources:
        item = client.get_item(
            TableName=DATA_TABLE, Key=codec.encode_item({"id": resource}), ConsistentRead=True
        ).get("Item")
        log = (codec.decode_item(item) or {}).get("log", [])
        logs[resource] = [int(fence) for fence in log]
    return logs


@dataclass
class Cost:
    """What one reservation cost: the DynamoDB calls its client sent while it ran, and the most
    it may send (:meth:`Reservations.call_bound`)."""

    calls: int
    bound: int
    op: Op


@dataclass
class Reservations:
    skus: list[tuple[str, int, int]]  # (sku, units, pools)
    operations: int = 8  # reservations per client
    holds: tuple[float, ...] = (0.5, 1.0, 2.0)  # hold lengths a reservation asks for, seconds
    costs: list[Cost] = field(default_factory=list)

    def setup(self, client: Any) -> None:
        index = {
            "IndexName": config.INVENTORY_CLAIMABLE_INDEX,
            "KeySchema": [
                {"AttributeName": "pool", "KeyType": "HASH"},
                {"AttributeName": "claimableAt", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }
        for name, indexes in ((INVENTORY_TABLE, [index]), (INVENTORY_SUMMARY_TABLE, [])):
            client.create_table(
                TableName=name,
                KeySchema=[
                    {"AttributeName": "sku", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "sku", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                    *(
                        [
                            {"AttributeName": "pool", "AttributeType": "S"},
                            {"AttributeName": "claimableAt", "AttributeType": "N"},
                        ]
                        if indexes
                        else []
                    ),
                ],
                BillingMode="PAY_PER_REQUEST",
                **({"GlobalSecondaryIndexes": indexes} if indexes else {}),
                # The stack's stream: sim.streams keeps the summary from it.
                **({"StreamSpecification": _STREAM} if indexes else {}),
            )
        store = self._inventory(client, retry.Backoff(attempts=1, sleep=_never_sleeps))
        for sku, units, pools in self.skus:
            store.create(sku, units, pools)  # inline: small skus are built before answering

    @staticmethod
    def _inventory(client: Any, backoff: retry.Backoff, task: Task | None = None) -> Inventory:
        return Inventory(
            client,
            INVENTORY_TABLE,
            INVENTORY_SUMMARY_TABLE,
            backoff=backoff,
            clock=task.clock if task else (lambda: 0.0),
            rand=task.rng.random if task else (lambda: 0.5),
            writers=1,  # no threads of its own: one simulated client is one thread
            create_units_per_second=0,
            pool_hints=claims.PoolHints(clock=task.clock if task else (lambda: 0.0)),
        )

    def call_bound(self, pools: int, attempts: int) -> int:
        """The most DynamoDB calls one reservation may send: the sku's header, then per round a
        guess, each pool's bounded read and the claiming transaction, each call tried at most
        ``attempts`` times."""
        per_round = 1 + pools * PAGES_PER_POOL + 1
        return attempts * (1 + RESERVE_ROUNDS * per_round)

    def body(self, recorder: Recorder, client: Any) -> Any:
        attempts = 4

        def run(task: Task) -> None:
            store = self._inventory(
                client, task.backoff(attempts=attempts, base=0.005, cap=0.1), task
            )
            for _ in range(self.operations):
                sku, _, pools = task.rng.choice(self.skus)
                quantity = task.rng.randint(1, 3)
                hold = task.rng.choice(self.holds)
                op = recorder.invoke(
                    "inventory", task.name, "reserve", sku=sku, quantity=quantity, hold=hold
                )
                before = client.calls
                try:
                    outcome, value = _reserve(store, sku, quantity, hold)
                except Crashed:
                    recorder.complete(op, UNKNOWN)
                    raise
                finally:
                    self.costs.append(
                        Cost(client.calls - before, self.call_bound(pools, attempts), op)
                    )
                recorder.complete(op, outcome, value)
                if outcome != OK:
                    task.sleep(task.rng.uniform(0.05, 0.2))
                    continue
                roll = task.rng.random()
                if roll < 0.25:
                    continue  # the hold lapses
                task.sleep(task.rng.uniform(0, hold * 1.2))
                f = "confirm" if roll < 0.75 else "cancel"
                then = recorder.invoke(
                    "inventory", task.name, f, sku=sku, reservation=value["reservationId"]
                )
                try:
                    recorder.complete(then, *_settle(store, f, sku, value["reservationId"]))
                except Crashed:
                    recorder.complete(then, UNKNOWN)
                    raise

        return run

    def final(self, client: Any) -> dict[str, SkuState]:
        store = self._inventory(client, retry.Backoff(attempts=1, sleep=_never_sleeps))
        final = {}
        for sku, _, pools in self.skus:
            header = {"pools": pools}
            units = list(store.units_of(sku, header))
            final[sku] = SkuState(
                {unit_id(str(u["sk"])): str(u["status"]) for u in units},
                None,  # the summary is kept by a stream consumer: no streams here
                {
                    unit_id(str(u["sk"])): str(u.get("holder"))
                    for u in units
                    if u.get("status") in (claims.HELD, claims.SOLD)
                },
            )
        return final


def _never_sleeps(seconds: float) -> None:
    raise AssertionError("set-up and final reads run without faults and never wait")


def _reserve(store: Inventory, sku: str, quantity: int, hold: float) -> tuple[str, Any]:
    try:
        return OK, store.reserve(sku, quantity, hold_seconds=hold)
    except OutOfStock:
        return FAIL, {"error": "OUT_OF_STOCK"}
    except claims.ClaimHoldLapsed as exc:
        # Answered after its hold ended: a refusal, holding nothing; unless giving its units
        # back failed, when they may still name it (a hold that ended): as a lost reply's.
        return (FAIL, {"error": "HOLD_LAPSED"}) if exc.given_back else (UNKNOWN, None)
    except retry.RetriesExhausted:
        return FAIL, {"error": "THROTTLED"}
    except retry.OutcomeUnknown:
        return UNKNOWN, None


def _settle(store: Inventory, f: str, sku: str, reservation: str) -> tuple[str, Any]:
    try:
        if f == "confirm":
            return OK, store.confirm(sku, reservation)
        store.release(sku, reservation)
        return OK, None
    except (Expired, NotFound, AlreadyConfirmed) as exc:
        return FAIL, {"error": type(exc).__name__}
    except retry.RetriesExhausted:
        return FAIL, {"error": "THROTTLED"}
    except retry.OutcomeUnknown:
        return UNKNOWN, None


SHARDED_TABLE = "sim-sharded-products"


@dataclass
class Sharded:
    """Sharded products: ``Products.purchase`` on products whose stock is split over shards
    (``turnstile_ddb.sharded.take``, each client with hints of its own, as a Lambda environment
    has, and its own seeded random choices), with restocks (``Products.restock``:
    ``sharded.add`` told the same hints) racing with the takes.

    Each client serves ``workers`` requests at once (a process with several threads; each
    worker with hints of its own), its operations shared among them, and the clients crowd:
    most operations go to the product of the moment (the same for every client: the products
    take turns, ``turn`` operations each), so sales race on the same shards. A purchase asks for
    up to ``spread`` times one shard's initial share, so many need a transaction over several
    shards; restocks add one or two units a shard, so the stock stays near empty and spread thin,
    where even a small purchase needs several shards. Every count a worker's hints learn (a read,
    a write's answer) is watched: the lowest one learned during an operation goes in the history
    (``lowestShardSeen``), where a count below zero is an oversell that a later restock would
    hide from the final table."""

    products: list[tuple[str, int, int]]  # (product, initial stock, shards)
    operations: int = 10  # per client
    restock_share: float = 0.25  # of a client's operations
    restock_per_shard: tuple[int, ...] = (1, 1, 2)  # a restock's units, per shard
    crowd_share: float = 0.8  # of operations on the product of the moment
    turn: int = 3  # operations per product's turn
    spread: float = 2.0  # the largest purchase, in initial shares of one shard
    workers: int = 5  # requests a client serves at once, its operations shared among them

    class Watched(sharded.ShardHints):
        """Shard hints that also keep the lowest count they learned since :meth:`lowest`."""

        seen: int | None = None

        def count(self, counter: sharded.ShardedCounter, shard: int, value: int) -> None:
            self.seen = value if self.seen is None else min(self.seen, value)
            super().count(counter, shard, value)

        def lowest(self) -> int | None:
            seen, self.seen = self.seen, None
            return seen

    def setup(self, client: Any) -> None:
        create_table(client, SHARDED_TABLE, "productId")
        shop = Products(
            client, SHARDED_TABLE, backoff=retry.Backoff(attempts=1, sleep=_never_sleeps)
        )
        for product_id, stock, shards in self.products:
            shop.create(product_id, product_id, stock, shards)

    def body(self, recorder: Recorder, client: Any) -> Any:
        def run(task: Task) -> None:
            scheduler = recorder.scheduler
            siblings = [
                scheduler.start(
                    f"{task.name}.{worker}", functools.partial(serve, worker=worker), skew=task.skew
                )
                for worker in range(1, self.workers)
            ]
            serve(task, 0)
            for sibling in siblings:
                scheduler.join(sibling)

        def serve(task: Task, worker: int) -> None:
            watched = Sharded.Watched(clock=task.clock)
            hints = sharded.Hints(shards=watched, sold_out=sharded.SoldOutHints(clock=task.clock))
            shop = Products(
                client,
                SHARDED_TABLE,
                backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
                conflicts=task.backoff(attempts=6, base=0.005, cap=0.1, budget=1.0),
                hints=hints,
                rand=task.rng,
            )
            for number in range(worker, self.operations, self.workers):
                if task.rng.random() < self.crowd_share:
                    product = self.products[(number // self.turn) % len(self.products)]
                else:
                    product = task.rng.choice(self.products)
                product_id, stock, shards = product
                if task.rng.random() < self.restock_share:
                    units = shards * task.rng.choice(self.restock_per_shard)
                    op = recorder.invoke(
                        "sharded", task.name, "restock", product=product_id, units=units
                    )
                    try:
                        outcome, value = _restock(shop, product_id, units)
                    except Crashed:
                        recorder.complete(op, UNKNOWN)
                        raise
                else:
                    largest = max(3, round(self.spread * stock / shards))
                    quantity = task.rng.randint(1, largest)
                    op = recorder.invoke(
                        "sharded", task.name, "purchase", product=product_id, quantity=quantity
                    )
                    try:
                        outcome, value = _purchase(shop, product_id, quantity, "atomic", None)
                    except Crashed:
                        recorder.complete(op, UNKNOWN)
                        raise
                lowest = watched.lowest()
                if lowest is not None:
                    value = {**(value or {}), "lowestShardSeen": lowest}
                recorder.complete(op, outcome, value)
                task.sleep(task.rng.random() * 0.01)

        return run

    def final(self, client: Any) -> dict[str, list[int]]:
        """Each product's shard counts, read consistently."""
        return {
            product_id: sharded.read_all(
                client,
                sharded.ShardedCounter(SHARDED_TABLE, "productId", product_id, shards, "stock"),
                retry.Backoff(attempts=1, sleep=_never_sleeps),
            )
            for product_id, _, shards in self.products
        }


def _restock(shop: Products, product_id: str, units: int) -> tuple[str, Any]:
    try:
        return OK, shop.restock(product_id, units)
    except retry.RetriesExhausted:
        return FAIL, {"error": "THROTTLED"}
    except retry.OutcomeUnknown:
        return UNKNOWN, None


QUEUE_TABLE = "sim-queue-leases"


@dataclass
class _Renewing:
    """The leases a holder's heartbeat renews with: the real ones, each renewal's answer noted
    (virtual time, the renewed lease) so the holder's belief can follow it."""

    leases: lease.Leases
    scheduler: Scheduler
    renewals: list[tuple[float, lease.Lease]] = field(default_factory=list)

    def renew(self, held: lease.Lease, ttl_ms: int, **kwargs: Any) -> lease.Lease:
        renewed = self.leases.renew(held, ttl_ms, **kwargs)
        self.renewals.append((self.scheduler.now, renewed))
        return renewed


@dataclass
class Queueing:
    """The lease queue: ``LeaseQueue.acquire`` with bounded waits, holders that work while their
    ``Heartbeat`` renews (run as a simulated client of its own, on virtual time), write fenced and
    release; some plain ``Leases.acquire`` arrivals among them; crashes leave waiters and holders
    behind. The history records each acquisition's tickets and when it took its first, as
    ``chaos.checkers.queue`` reads them."""

    resources: list[str]
    operations: int = 5  # acquisitions per client
    plain_share: float = 0.2
    work_seconds: float = 2.0  # the most a holder works (L is 1.5 s: some holds need renewals)
    waits_ms: tuple[int, ...] = (3_000, 9_000)
    settings: lease_queue.QueueSettings = field(default_factory=lease_queue.QueueSettings)

    def setup(self, client: Any) -> None:
        create_table(client, QUEUE_TABLE, "resource")

    def body(self, recorder: Recorder, client: Any) -> Any:
        def run(task: Task) -> None:
            leases = lease.Leases(
                client, QUEUE_TABLE, backoff=task.backoff(attempts=4), clock=task.clock
            )
            tickets: list[int] = []
            ticketed: list[float] = []

            def took(resource: str, owner: str, ticket: int) -> None:
                tickets.append(ticket)
                if not ticketed:
                    ticketed.append(recorder.scheduler.now)

            queue = lease_queue.LeaseQueue(
                leases, self.settings, sleep=task.sleep, monotonic=task.clock, on_ticket=took
            )
            for number in range(self.operations):
                resource = task.rng.choice(self.resources)
                owner = f"{task.name}.{number}"
                role = "plain" if task.rng.random() < self.plain_share else "normal"
                tickets.clear()
                ticketed.clear()
                op = recorder.invoke(
                    "queue", task.name, "acquire", resource=resource, owner=owner, role=role
                )
                try:
                    if role == "plain":
                        held = leases.acquire(resource, owner, self.settings.expiry_ms)
                    else:
                        wait_ms = task.rng.choice(self.waits_ms)
                        held = queue.acquire(resource, owner, wait_ms=wait_ms)
                except lease_queue.WaitTimedOut as exc:
                    recorder.complete(op, FAIL, {"tickets": list(tickets), "at": exc.position})
                    op.status = 409
                    continue
                except (lease.Held, retry.RetriesExhausted) as exc:
                    recorder.complete(op, FAIL, {"error": type(exc).__name__})
                    op.status = 409 if isinstance(exc, lease.Held) else 503
                    task.sleep(task.rng.uniform(0, 0.1))
                    continue
                except retry.OutcomeUnknown:
                    recorder.complete(op, UNKNOWN, {"tickets": list(tickets)})
                    continue
                except Crashed:
                    recorder.complete(op, FAIL, {"tickets": list(tickets), "killed": True})
                    raise
                served: dict[str, Any] = {
                    "fence": held.fence,
                    "ticket": held.ticket,
                    "tickets": list(tickets),
                    "expiresAt": held.expires_at_ms,
                }
                if ticketed:
                    served["ticketedAt"] = ticketed[0]
                recorder.complete(op, OK, served)
                op.status = 201
                self._hold(recorder, task, leases, held, op)

        return run

    def _hold(
        self, recorder: Recorder, task: Task, leases: lease.Leases, held: lease.Lease, op: Op
    ) -> None:
        """Work under a heartbeat, write fenced, release; a crash leaves the lease to lapse."""
        scheduler = recorder.scheduler
        hold = Hold(
            held.resource,
            held.owner,
            held.fence,
            scheduler.now,
            _believed(leases, held, task),
            op,
            asked_ms=self.settings.expiry_ms,
            asked_at_ms=round((op.invoked + task.skew) * 1000),
            answered_at_ms=round(task.clock() * 1000),
            expires_at_ms=held.expires_at_ms,
            granted_at_ms=held.acquired_at,
            previous=_previous(held),
        )
        recorder.holds.append(hold)
        renewing = _Renewing(leases, scheduler)

        def start(loop: Any) -> Any:
            beat = scheduler.start(f"{task.name}:beat", lambda _: loop(), skew=task.skew)
            # its own backoff: a retry's sleep must be the beating client's, not the holder's
            renewing.leases = dataclasses.replace(leases, backoff=beat.backoff(attempts=4))

            def join() -> None:
                beat.crashed = beat.crashed or task.crashed  # one process: it died with it
                scheduler.join(beat)

            return join

        beat = lease_queue.Heartbeat(
            renewing,  # type: ignore[arg-type]  # renew is all a heartbeat calls
            held,
            period_ms=self.settings.heartbeat_ms,
            ttl_ms=self.settings.expiry_ms,
            sleep=scheduler.nap,
            start=start,
        )
        try:
            with beat:
                task.sleep(task.rng.random() * self.work_seconds)
                Leasing._write(recorder, task, leases, beat.lease, pattern="queue")
        except Crashed:
            kill = recorder.invoke(
                "queue",
                task.name,
                "kill",
                resource=held.resource,
                owner=held.owner,
                fence=held.fence,
            )
            recorder.complete(kill, OK, {"expiresAt": held.expires_at_ms})
            raise
        finally:
            hold.end = _belief_end(leases, held, task, renewing.renewals, scheduler.now)
        with contextlib.suppress(lease.LeaseLost, retry.RetriesExhausted, retry.OutcomeUnknown):
            leases.release(beat.lease)

    def logs(self, client: Any) -> dict[str, list[int]]:
        return _logs(client, self.resources)


def _believed(leases: lease.Leases, held: lease.Lease, task: Task) -> float:
    """Until when (global virtual seconds) a holder of ``held`` believes it holds it."""
    return (held.expires_at_ms - leases.safety_margin_ms) / 1000 - task.skew


def _belief_end(
    leases: lease.Leases,
    held: lease.Lease,
    task: Task,
    renewals: list[tuple[float, lease.Lease]],
    now: float,
) -> float:
    """The end of a holder's belief by ``now``: its lease's, carried on by each renewal answered
    while it still believed (a renewal answered after the belief lapsed does not revive it)."""
    end = _believed(leases, held, task)
    for at, renewed in renewals:
        if at > end or at > now:
            break
        end = max(end, _believed(leases, renewed, task))
    return min(end, now)
