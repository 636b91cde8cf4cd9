"""Reservations at their edges: a late cancel racing a rival's claim, and a confirm or an
inventory view at exactly a hold's end.

The reservations workload (:class:`sim.workloads.Reservations`) acts at random times, so two
things never happen in it: a cancel that comes after its own hold lapsed while a rival claims the
lapsed units, and a clock reading that lands on the very millisecond a hold ends (calls take 1 to
10 ms, clocks are skewed). This workload makes both happen on purpose, each client running short
*episodes*, every one on a small sku of its own (3 units, 1 pool) so that the history alone says
what the sku holds:

* **late cancel**: reserve all 3 units with a short hold, leave them past the hold, then cancel;
  meanwhile a rival (a simulated client of its own, with its own skewed clock, started with
  ``Scheduler.start``) claims one of the lapsed units as soon as its own clock shows the hold
  ended, and confirms it later, well inside its own hold;
* **confirm at the end**: reserve 1 or 2 units, then confirm with the clock the library reads
  showing exactly the hold's end (``holdUntil``); half the time a rival reserves every unit at
  that same millisecond on its own clock;
* **view at the end**: reserve a unit and confirm it, reserve 1 or 2 more, then read the inventory
  view (``Inventory.exact``: counts from the units themselves) with the clock it reads showing
  exactly the hold's end, sometimes after one view at a random moment within the hold;
* **claim after the end**: reserve 1 to 3 units with a short hold, the client stalling just before
  its claim's write until after the hold's end (as a paused process would, between its read and
  its write): the claim lands on free units, and its answer must not be a hold that has already
  ended (dead on arrival); the library gives the units back and answers ``ClaimHoldLapsed``;
* **answered at the end**: reserve 1 to 3 units, the library's first clock reading after its
  claim's write showing exactly the ``holdUntil`` that write recorded: a hold ending at that very
  millisecond has ended (``claims`` decides ``clock >= until``), so it is given back as well.

Exact milliseconds come from a :class:`sim.boundary.BoundaryClock`: the clock each client's
``Inventory`` reads (the library sends the reading as ``:now``), which can be armed so that its
next reading first waits, on virtual time, until this client's clock shows a given millisecond
(or the end the client's next write records: :class:`sim.boundary.Noting`). It is a pause placed
just before the clock is read (the pause fault places one before a call); another client's call
may still carry virtual time past that millisecond, and then the reading is later, which the
properties judge the same way. Each confirm and view records the reading the library sent
(``now``) and the client's clock when it began (``clock``).

Judged by :func:`chaos.checkers.inventory` over these skus, and by :func:`sim.checks.late_confirms`
(a confirm at or after its hold's end is refused), :func:`sim.checks.live_on_arrival` (a
reservation is answered with a hold still live on its client's clock: each reserve records the
client's clock when its answer came, ``answered``), :func:`sim.checks.live_confirms` (a confirm
refused while its hold was live is explained by another reservation that may have taken a unit,
or by its own cancel) and :func:`sim.checks.inventory_views` (a view shows what the history left
in the sku at the view's ``now``).

Cost: about 25 DynamoDB calls per client (two clients by default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.checkers import Report, SkuState, inventory
from chaos.history import FAIL, OK, UNKNOWN, Op
from service import config
from service.domain.errors import AlreadyConfirmed, Expired, NotFound, OutOfStock
from service.domain.inventory import Inventory, unit_id
from sim import checks
from sim.boundary import BoundaryClock, Noting, Stalling
from sim.scheduler import Crashed, Task
from turnstile_ddb import claims, retry

TABLE = "sim-edges-inventory"
SUMMARY_TABLE = "sim-edges-inventory-summary"
UNITS = 3  # per episode's sku, in one pool
SHORT_HOLD = 0.3  # seconds: the holds that are left to end
RIVAL_HOLD = 1.5  # seconds: the late-cancel rival's hold, which it confirms well inside
RIVAL_SKEW_SECONDS = 0.2  # a rival's clock is off the global one by at most this (sim.kinds)
EPISODES = (
    "late-cancel",
    "confirm-at-end",
    "view-at-end",
    "claim-after-end",
    "answered-at-end",
)


def _sleep_until(task: Task, seconds: float) -> None:
    """Sleep until this client's clock shows ``seconds`` (epoch seconds)."""
    task.sleep(max(0.0, seconds - task.clock()))


@dataclass
class ReservationEdges:
    episodes: int = 3  # per client
    skus: list[str] = field(default_factory=list)
    real: Any = None

    def setup(self, real: Any) -> None:
        self.real = real
        index = {
            "IndexName": config.INVENTORY_CLAIMABLE_INDEX,
            "KeySchema": [
                {"AttributeName": "pool", "KeyType": "HASH"},
                {"AttributeName": "claimableAt", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }
        for name, indexed in ((TABLE, True), (SUMMARY_TABLE, False)):
            attributes = [("sku", "S"), ("sk", "S")]
            if indexed:
                attributes += [("pool", "S"), ("claimableAt", "N")]
            real.create_table(
                TableName=name,
                KeySchema=[
                    {"AttributeName": "sku", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": a, "AttributeType": t} for a, t in attributes
                ],
                BillingMode="PAY_PER_REQUEST",
                **({"GlobalSecondaryIndexes": [index]} if indexed else {}),
            )

    def body(self, recorder: Any, client: Any) -> Any:
        # The client's skus are created here, before the run, as set-up is (no faults, no time).
        number = len(self.skus) // max(1, self.episodes)
        mine = [f"edge{number}x{n}" for n in range(self.episodes)]
        admin = self._admin(self.real)
        for sku in mine:
            admin.create(sku, UNITS, 1)
        self.skus.extend(mine)

        def run(task: Task) -> None:
            start = task.rng.randrange(len(EPISODES))
            for n, sku in enumerate(mine):
                episode = EPISODES[(start + n) % len(EPISODES)]
                getattr(_Actor(recorder, task, client), episode.replace("-", "_"))(sku)

        return run

    @staticmethod
    def _admin(real: Any) -> Inventory:
        return Inventory(
            real,
            TABLE,
            SUMMARY_TABLE,
            backoff=retry.Backoff(attempts=1, sleep=_never_sleeps),
            clock=_zero_clock,
            rand=_half,
            writers=1,
            create_units_per_second=0,
            pool_hints=None,
        )

    def final(self, real: Any) -> dict[str, SkuState]:
        store = self._admin(real)
        final = {}
        for sku in self.skus:
            units = list(store.units_of(sku, {"pools": 1}))
            final[sku] = SkuState(
                {unit_id(str(u["sk"])): str(u["status"]) for u in units},
                None,  # no stream consumer here
                {
                    unit_id(str(u["sk"])): str(u.get("holder"))
                    for u in units
                    if u.get("status") in (claims.HELD, claims.SOLD)
                },
            )
        return final

    def check(self, recorder: Any, stats: Any, real: Any) -> Report:
        skus = set(self.skus)
        ops = [op for op in recorder.ops if op.pattern == "inventory" and op.args["sku"] in skus]
        report = inventory(ops, self.final(real))
        report.merge(checks.late_confirms(ops))
        report.merge(checks.live_on_arrival(ops))
        report.merge(checks.live_confirms(ops))
        report.merge(checks.inventory_views(ops))
        return report


def _zero_clock() -> float:
    return 0.0


def _half() -> float:
    return 0.5


def _never_sleeps(seconds: float) -> None:
    raise AssertionError("set-up and final reads run without faults and never wait")


class _Actor:
    """One simulated client's side of an episode: its ``Inventory`` on its own
    :class:`sim.boundary.BoundaryClock`, and each call recorded in the history (``pattern``
    ``inventory``)."""

    def __init__(self, recorder: Any, task: Task, client: Any) -> None:
        self.recorder = recorder
        self.task = task
        self.client = client
        self.clock = BoundaryClock(task)
        self.stalling = Stalling(Noting(client, self.clock), task)
        self.store = Inventory(
            self.stalling,
            TABLE,
            SUMMARY_TABLE,
            backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
            clock=self.clock,
            rand=task.rng.random,
            writers=1,
            create_units_per_second=0,
            pool_hints=claims.PoolHints(clock=task.clock),
        )

    def _do(
        self,
        f: str,
        call: Callable[[], tuple[str, Any]],
        at_ms: int | None,
        *,
        seek_end: bool = False,
        **args: Any,
    ) -> Op:
        """Record ``f``: the client's clock when it began (``clock``), the call's outcome, and the
        first clock reading the library took (``now``), the armed one when ``at_ms`` is given;
        ``seek_end``: the first reading after a write waits for the end that write recorded."""
        op = self.recorder.invoke(
            "inventory", self.task.name, f, clock=int(self.task.clock() * 1000), **args
        )
        self.clock.reset()
        if at_ms is not None:
            self.clock.arm(at_ms)
        self.clock.seek_written = seek_end
        try:
            outcome, value = call()
        except Crashed:
            self.recorder.complete(op, UNKNOWN)
            raise
        finally:
            if self.clock.readings:
                op.args["now"] = self.clock.readings[0]
            if seek_end and self.clock.landed:
                op.args["end"], op.args["read"] = self.clock.landed[0]
            self.clock.reset()
            self.stalling.seconds = None
        op.args["answered"] = int(self.task.clock() * 1000)
        self.recorder.complete(op, outcome, value)
        return op

    def reserve(
        self, sku: str, quantity: int, hold: float, at_ms: int | None = None, seek_end: bool = False
    ) -> Op:
        def call() -> tuple[str, Any]:
            try:
                return OK, self.store.reserve(sku, quantity, hold_seconds=hold)
            except OutOfStock:
                return FAIL, {"error": "OUT_OF_STOCK"}
            except claims.ClaimHoldLapsed as exc:
                # Given back: nothing held; else the units may still name it (unknown).
                return (FAIL, {"error": "HOLD_LAPSED"}) if exc.given_back else (UNKNOWN, None)
            except retry.RetriesExhausted:
                return FAIL, {"error": "THROTTLED"}
            except retry.OutcomeUnknown:
                return UNKNOWN, None

        return self._do(
            "reserve", call, at_ms, seek_end=seek_end, sku=sku, quantity=quantity, hold=hold
        )

    def settle(self, f: str, sku: str, reservation: str, at_ms: int | None = None) -> Op:
        def call() -> tuple[str, Any]:
            try:
                if f == "confirm":
                    return OK, self.store.confirm(sku, reservation)
                self.store.release(sku, reservation)
                return OK, None
            except (Expired, NotFound, AlreadyConfirmed) as exc:
                return FAIL, {"error": type(exc).__name__}
            except retry.RetriesExhausted:
                return FAIL, {"error": "THROTTLED"}
            except retry.OutcomeUnknown:
                return UNKNOWN, None

        return self._do(f, call, at_ms, sku=sku, reservation=reservation)

    def view(self, sku: str, at_ms: int | None = None) -> Op:
        def call() -> tuple[str, Any]:
            try:
                return OK, self.store.exact(sku)
            except retry.RetriesExhausted:
                return FAIL, {"error": "THROTTLED"}
            except retry.OutcomeUnknown:
                return UNKNOWN, None

        return self._do("view", call, at_ms, sku=sku)

    def rival(self, name: str, body: Callable[[_Actor], None]) -> Task:
        """Start a rival: a simulated client of its own (its own skewed clock and Inventory)
        sharing this client's connection; join it with ``Scheduler.join``."""
        skew = round(self.task.rng.uniform(-RIVAL_SKEW_SECONDS, RIVAL_SKEW_SECONDS), 6)
        recorder, client = self.recorder, self.client
        return recorder.scheduler.start(
            f"{self.task.name}:{name}", lambda task: body(_Actor(recorder, task, client)), skew=skew
        )

    # -- episodes -------------------------------------------------------------------------------

    def late_cancel(self, sku: str) -> None:
        """Reserve every unit, leave the hold to lapse, cancel late, while a rival claims one of
        the lapsed units once its own clock shows the hold ended, and confirms it later."""
        held = self.reserve(sku, UNITS, SHORT_HOLD)
        if held.type != OK:
            return
        ended = int(held.value["expiresAt"]) / 1000

        def claim(rival: _Actor) -> None:
            _sleep_until(rival.task, ended + rival.task.rng.uniform(0.0, 0.05))
            mine = rival.reserve(sku, 1, RIVAL_HOLD)
            if mine.type == OK:
                rival.task.sleep(rival.task.rng.uniform(0.6, 1.0))
                rival.settle("confirm", sku, mine.value["reservationId"])

        other = self.rival("rival", claim)
        _sleep_until(self.task, ended + self.task.rng.uniform(0.05, 0.5))
        self.settle("cancel", sku, held.value["reservationId"])
        self.recorder.scheduler.join(other)

    def confirm_at_end(self, sku: str) -> None:
        """Confirm with the library's clock reading exactly the hold's end; half the time a rival
        reserves every unit at that same millisecond on its own clock."""
        held = self.reserve(sku, self.task.rng.randint(1, 2), SHORT_HOLD)
        if held.type != OK:
            return
        until = int(held.value["expiresAt"])
        other = None
        if self.task.rng.random() < 0.5:

            def claim(rival: _Actor) -> None:
                _sleep_until(rival.task, until / 1000 - 0.1)
                rival.reserve(sku, UNITS, SHORT_HOLD, at_ms=until)

            other = self.rival("rival", claim)
        _sleep_until(self.task, until / 1000 - 0.1)  # the lead unit's read comes first
        self.settle("confirm", sku, held.value["reservationId"], at_ms=until)
        if other is not None:
            self.recorder.scheduler.join(other)

    def claim_after_end(self, sku: str) -> None:
        """Reserve 1 to 3 units, stalling just before the claim's write until after the hold's
        end: the answer must not be a hold already ended."""
        self.stalling.seconds = SHORT_HOLD + self.task.rng.uniform(0.05, 0.3)
        self.reserve(sku, self.task.rng.randint(1, UNITS), SHORT_HOLD)

    def answered_at_end(self, sku: str) -> None:
        """Reserve 1 to 3 units with the library's first clock reading after its claim's write
        showing exactly the end that write recorded (``holdUntil``): a hold that ends at that very
        millisecond has ended, so the answer must not be it (given back, ``ClaimHoldLapsed``)."""
        self.reserve(sku, self.task.rng.randint(1, UNITS), SHORT_HOLD, seek_end=True)

    def view_at_end(self, sku: str) -> None:
        """Sell a unit, hold 1 or 2 more, then read the view at exactly the hold's end (sometimes
        once before, at a random moment within the hold)."""
        sold = self.reserve(sku, 1, 2.0)
        if sold.type == OK:
            self.settle("confirm", sku, sold.value["reservationId"])
        held = self.reserve(sku, self.task.rng.randint(1, 2), SHORT_HOLD)
        if held.type != OK:
            return
        until = int(held.value["expiresAt"])
        if self.task.rng.random() < 0.5:
            _sleep_until(self.task, until / 1000 - self.task.rng.uniform(0.0, SHORT_HOLD))
            self.view(sku)
        self.view(sku, at_ms=until)
