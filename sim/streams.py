"""DynamoDB Streams under the scheduler: a stand-in for Lambda's event source mapping, with faults.

The model (:class:`sim.model.Model`) keeps each streamed table's changes as one ordered log; here a
pump per (table, shard) reads it the way a mapping reads a stream. A shard holds the records of
the partition keys that hash to it, in order; shards are read concurrently, each by its own
simulated client. The pump gives its consumer batches of at most ``batch_size`` records (a Lambda
shaped event) and honours the consumer's answer as the Lambda service does (as ``local.pump``
does for ``make local``):

* a partial batch response: the records before the first reported failure are done, the batch
  is retried from that record; each retry of it counts;
* the function failed (it raised, or its process died mid-batch): the batch is bisected
  (``BisectBatchOnFunctionError``), its first half retried, until the failing record is alone;
  then retries count against it;
* after ``retry_attempts`` retries a record goes to the dead letters and the shard moves on.

The seeded stream faults (:class:`StreamFaults`), on top of the DynamoDB faults every call of the
consumer meets: a batch processed and then **redelivered** (the mapping's checkpoint was lost, so
delivery is at least once), an invocation that **dies mid-batch** after a few of its calls (its
writes so far stay; the batch fails whole and is bisected). What happened is kept in
:attr:`Streams.log` (virtual time, pump, what) and shown in the history's last line.

The consumers are the service's own, called through their domain code (the Lambda handlers' module
globals build their clients from the environment, and the decider logs every decision to stdout):

* the decider (``service.handlers.registration_consumer``): each INSERT of a PENDING request,
  :meth:`service.domain.registration_requests.RegistrationRequests.decide`, in stream order with
  :func:`service.streams.process_in_order`, as its handler does;
* the inventory summary (``service.handlers.inventory_summary``): the batch together with
  :meth:`service.domain.inventory_summary.Summaries.apply_together`, what that left one by one
  with :meth:`Summaries.apply`, in order, as its handler does, from the reservations workload's
  units (:class:`sim.workloads.Reservations`, whose inventory table has a stream).

Workload: ``clients`` clients each submit ``each`` registration requests (the asynchronous
sign-up path, :meth:`RegistrationRequests.submit`) to two small events, from a few users, so the
events fill and some users ask twice. Properties, once every stream drained: chaos's
:func:`chaos.checkers.registrations` (never above capacity, the counter matches the registrations,
every accepted request decided or dead-lettered); a fresh request never refused as existing (only
a resend of its own write could find it); each request decided exactly once (one decision
returned however often its record was delivered, and it is the request's final status); an
accepted request holds exactly one seat and a seat only an accepted request; and the stream-kept
summary equals the units' counts (the property :func:`chaos.checkers.inventory` calls "summary
converges", judged here alone: the reservations' other properties are judged in sim.run).
"""

from __future__ import annotations

import json
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from chaos import checkers
from chaos.checkers import EventState, Report, SkuState
from chaos.history import FAIL, OK, UNKNOWN
from service import config
from service.domain.events import EVENT_SK, REGISTRATION_PREFIX, Events
from service.domain.inventory import SUMMARY, UNIT, sku_of, unit_id
from service.domain.inventory_summary import Summaries
from service.domain.registration_requests import ACCEPTED, PENDING, RegistrationRequests
from service.streams import process_in_order
from sim.scheduler import EPOCH, Crashed, Task
from sim.workloads import INVENTORY_SUMMARY_TABLE, INVENTORY_TABLE
from turnstile_ddb import codec, creation, errors, retry

EVENTS_TABLE = "sim-stream-events"
REQUESTS_TABLE = "sim-registration-requests"
STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}  # infra/tables.py's
PATTERN = "stream-registrations"
_COUNTS = {"free": "available", "held": "reserved", "sold": "sold"}  # unit status -> counter
POLL_SECONDS = 0.25  # how often a pump with nothing to read looks again (Lambda: 4 times a second)


@dataclass
class StreamFaults:
    """Per-invocation probabilities of the stream faults; the pump's seed decides which."""

    redeliver: float = 0.15  # a batch that went through is delivered again
    die: float = 0.1  # the invocation dies after a few of its calls (mid-batch)


@dataclass
class Mapping:
    """One event source mapping: a table's stream, its consumer, its settings (the stack's are
    ``config.STREAM_BATCH_SIZE`` records and ``config.STREAM_RETRY_ATTEMPTS`` retries; the batches
    here are smaller, so that a run has many of them)."""

    name: str
    table: str
    hash_key: str
    consume: Callable[[Task, Any, dict[str, Any]], dict[str, Any]]
    batch_size: int = 4
    retry_attempts: int = config.STREAM_RETRY_ATTEMPTS
    shards: int = 2


class _Dying:
    """The invocation's DynamoDB client, which dies (raises :class:`Crashed`) at its
    ``calls_left``-th call: the process running the batch ended there."""

    def __init__(self, client: Any, calls_left: int | None) -> None:
        self._client = client
        self._left = calls_left

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)

        def call(**params: Any) -> Any:
            if self._left is not None:
                if self._left == 0:
                    raise Crashed
                self._left -= 1
            return method(**params)

        return call


def _iso(task: Task) -> Callable[[], str]:
    def now() -> str:
        stamp = datetime.fromtimestamp(task.clock(), UTC).isoformat(timespec="milliseconds")
        return stamp.replace("+00:00", "Z")

    return now


def _scan(real: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = real.scan(**params)
        items += [codec.decode_item(item) or {} for item in page["Items"]]
        if "LastEvaluatedKey" not in page:
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@dataclass
class Streams:
    """The registration requests' submitters (``body``), the pumps they start, the checks."""

    each: int = 4  # requests per client
    events: tuple[tuple[str, int], ...] = (("ev0", 3), ("ev1", 2))  # (event, capacity)
    users: int = 5
    faults: StreamFaults = field(default_factory=StreamFaults)
    real: Any = None
    started: bool = False
    pumps: set[str] = field(default_factory=set)
    log: list[str] = field(default_factory=list)
    happened: Counter[str] = field(default_factory=Counter)
    # requestId -> the decisions returned for it (None: "already decided"), in order
    decisions: dict[str, list[str | None]] = field(default_factory=lambda: defaultdict(list))
    dead_letters: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    unexpected: list[str] = field(default_factory=list)

    # -- set-up ------------------------------------------------------------------------------
    def setup(self, real: Any) -> None:
        if not hasattr(real, "stream_records"):
            raise TypeError(
                "the streams workload reads sim.model.Model's stream log; on another DynamoDB "
                "(--backend moto) run without it: --size streams=0:0"
            )
        self.real = real
        for name, sort in ((EVENTS_TABLE, "sk"), (REQUESTS_TABLE, "requestId")):
            real.create_table(
                TableName=name,
                KeySchema=[
                    {"AttributeName": "eventId", "KeyType": "HASH"},
                    {"AttributeName": sort, "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "eventId", "AttributeType": "S"},
                    {"AttributeName": sort, "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
                **({"StreamSpecification": STREAM} if name == REQUESTS_TABLE else {}),
            )
        once = retry.Backoff(attempts=1, sleep=_never_sleeps)
        events = Events(client=real, table=EVENTS_TABLE, backoff=once, transactions=once)
        for event_id, capacity in self.events:
            events.create(event_id, event_id, capacity)

    def mappings(self) -> list[Mapping]:
        return [
            Mapping("decider", REQUESTS_TABLE, "eventId", self._decide),
            Mapping("summary", INVENTORY_TABLE, "sku", self._summarize),
        ]

    # -- the submitters ----------------------------------------------------------------------
    def body(self, recorder: Any, client: Any) -> Callable[[Task], None]:
        def run(task: Task) -> None:
            if not self.started:  # the first client to run starts the mappings' pumps
                self.started = True
                for mapping in self.mappings():
                    for shard in range(mapping.shards):
                        name = f"pump-{mapping.name}{shard}"
                        self.pumps.add(name)
                        task.scheduler.start(name, self._pump(mapping, shard, client))
            requests = self._requests(task, client)
            for _ in range(self.each):
                event_id = task.rng.choice(self.events)[0]
                user = f"u{task.rng.randrange(self.users)}"
                op = recorder.invoke(PATTERN, task.name, "request", event=event_id, user=user)
                try:
                    answer = requests.submit(event_id, user)
                except Crashed:
                    recorder.complete(op, UNKNOWN)
                    raise
                except retry.RetriesExhausted:
                    recorder.complete(op, FAIL, {"error": "THROTTLED"})
                except retry.OutcomeUnknown:
                    recorder.complete(op, UNKNOWN)
                except creation.AlreadyExists:  # a fresh id: only a resend of our own write
                    recorder.complete(op, FAIL, {"error": "ALREADY_EXISTS"})
                else:
                    recorder.complete(op, OK, {"requestId": answer["requestId"]})
                task.sleep(task.rng.uniform(0.05, 0.5))

        return run

    @staticmethod
    def _requests(task: Task, client: Any) -> RegistrationRequests:
        clock = _iso(task)
        events = Events(
            client=client,
            table=EVENTS_TABLE,
            backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
            transactions=task.backoff(
                attempts=config.REGISTRATION_ATTEMPTS,
                base=config.REGISTRATION_BASE_SECONDS,
                cap=config.REGISTRATION_CAP_SECONDS,
            ),
            clock=clock,
        )
        return RegistrationRequests(
            client=client,
            table=REQUESTS_TABLE,
            events=events,
            backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
            clock=clock,
            epoch=task.clock,
        )

    # -- the consumers -----------------------------------------------------------------------
    def _decide(self, task: Task, client: Any, event: dict[str, Any]) -> dict[str, Any]:
        """What ``service.handlers.registration_consumer.handler`` does with a batch."""
        requests = self._requests(task, client)

        def decide(record: DynamoDBRecord) -> str:
            if record.raw_event.get("eventName") != "INSERT":
                return "skipped"
            image = codec.decode_item(record.raw_event["dynamodb"]["NewImage"]) or {}
            if image.get("status") != PENDING:
                return "skipped: not pending"
            request_id = str(image["requestId"])
            decision = self._expected(
                lambda: requests.decide(str(image["eventId"]), request_id, str(image["userId"]))
            )
            self.decisions[request_id].append(None if decision is None else decision.status)
            return "already decided" if decision is None else decision.status

        return process_in_order(event, None, decide, pattern="decider")

    def _summarize(self, task: Task, client: Any, event: dict[str, Any]) -> dict[str, Any]:
        """What ``service.handlers.inventory_summary.handler`` does with a batch."""
        summaries = Summaries(
            client=client,
            table=INVENTORY_SUMMARY_TABLE,
            backoff=task.backoff(attempts=4, base=0.005, cap=0.1),
        )
        done = self._expected(lambda: summaries.apply_together(event.get("Records") or []))

        def apply(record: DynamoDBRecord) -> None:
            sequence = record.dynamodb.sequence_number if record.dynamodb else None
            if sequence is None or sequence not in done:
                self._expected(lambda: summaries.apply(record.raw_event))

        return process_in_order(event, None, apply, pattern="summary")

    def _expected(self, work: Callable[[], Any]) -> Any:
        """Run a consumer's step; a failure DynamoDB's faults explain (a refusal, retries run
        out, an unknown outcome) fails the record as on AWS; any other exception is a bug the
        mapping's retries would hide, so it is noted for the check too."""
        try:
            return work()
        except errors.TurnstileError:
            raise
        except Exception as exc:
            self.unexpected.append(repr(exc))
            raise

    # -- the pumps ---------------------------------------------------------------------------
    def _shard(self, mapping: Mapping, record: dict[str, Any]) -> int:
        key = json.dumps(record["dynamodb"]["Keys"][mapping.hash_key], sort_keys=True)
        return zlib.crc32(key.encode()) % mapping.shards

    def _note(self, task: Task, what: str, detail: str = "") -> None:
        self.happened[what] += 1
        now = task.scheduler.now - EPOCH
        self.log.append(f"{now:.6f} {task.name} {what}{' ' + detail if detail else ''}")

    def _producers_done(self, task: Task) -> bool:
        return all(t.done for t in task.scheduler.tasks if t.name not in self.pumps)

    def _pump(self, mapping: Mapping, shard: int, client: Any) -> Callable[[Task], None]:
        def run(task: Task) -> None:
            read = 0  # records of the table's log read so far (every shard's)
            mine: list[dict[str, Any]] = []  # this shard's, in order
            checkpoint = 0  # mine[:checkpoint] are done (or dead-lettered)
            limit = mapping.batch_size
            retries: Counter[int] = Counter()  # position in mine -> failed deliveries
            while True:
                fresh = self.real.stream_records(mapping.table, read)
                read += len(fresh)
                mine += [r for r in fresh if self._shard(mapping, r) == shard]
                if checkpoint >= len(mine):
                    if self._producers_done(task):
                        return
                    task.sleep(POLL_SECONDS)
                    continue
                batch = mine[checkpoint : checkpoint + limit]
                done = self._invoke(task, mapping, client, batch)
                if done == len(batch):
                    limit = mapping.batch_size
                    if task.rng.random() < self.faults.redeliver:
                        self._note(task, "redelivered", f"{len(batch)} records from {checkpoint}")
                    else:
                        checkpoint += done
                    continue
                if done is None and len(batch) > 1:
                    limit = max(1, len(batch) // 2)
                    self._note(task, "bisected", f"{len(batch)} records from {checkpoint}")
                    continue
                checkpoint += done or 0
                retries[checkpoint] += 1
                if retries[checkpoint] > mapping.retry_attempts:
                    self.dead_letters[mapping.name].append(mine[checkpoint])
                    self._note(task, "dead-lettered", f"record {checkpoint}")
                    checkpoint += 1
                    limit = mapping.batch_size
                else:
                    self._note(task, "retried", f"from record {checkpoint}")

        return run

    def _invoke(
        self, task: Task, mapping: Mapping, client: Any, batch: list[dict[str, Any]]
    ) -> int | None:
        """Hand ``batch`` to the consumer: how many of its first records are done; None when the
        function failed (raised, or its process died) and the batch as a whole is to be retried."""
        calls_left = None
        if task.rng.random() < self.faults.die:
            calls_left = task.rng.randrange(2 * len(batch) + 1)
        event = {"Records": [{**record, "eventSourceARN": mapping.table} for record in batch]}
        try:
            response = mapping.consume(task, _Dying(client, calls_left), event)
        except Crashed:
            # Its own dying, or the client's crash fault: a new environment takes the next batch.
            task.crashed = False
            self._note(task, "died", f"mid-batch of {len(batch)}")
            return None
        except BatchProcessingError:  # every record failed: the function raised
            return None
        failures = response.get("batchItemFailures") or []
        if not failures:
            return len(batch)
        first = failures[0]["itemIdentifier"]
        sequences = [record["dynamodb"]["SequenceNumber"] for record in batch]
        return sequences.index(first)

    # -- judging -----------------------------------------------------------------------------
    def _registrations(self) -> tuple[dict[str, EventState], dict[str, str], dict[str, str]]:
        states = {
            event_id: EventState(capacity, 0, set(), {}) for event_id, capacity in self.events
        }
        seats: dict[str, str] = {}  # requestId -> the user its registration item seats
        for item in _scan(self.real, EVENTS_TABLE):
            state = states[str(item["eventId"])]
            if item["sk"] == EVENT_SK:
                state.registered = int(item["registered"])
            elif str(item["sk"]).startswith(REGISTRATION_PREFIX):
                state.users.add(str(item["userId"]))
                if "requestId" in item:
                    seats[str(item["requestId"])] = str(item["userId"])
        statuses: dict[str, str] = {}
        for item in _scan(self.real, REQUESTS_TABLE):
            statuses[str(item["requestId"])] = str(item["status"])
            states[str(item["eventId"])].requests[str(item["requestId"])] = str(item["status"])
        return states, statuses, seats

    def _skus(self) -> dict[str, SkuState]:
        units: dict[str, dict[str, str]] = defaultdict(dict)
        summaries: dict[str, dict[str, int]] = {}
        for item in _scan(self.real, INVENTORY_TABLE):
            if str(item["sk"]).startswith(UNIT):
                units[sku_of(str(item["sku"]))][unit_id(str(item["sk"]))] = str(item["status"])
        for item in _scan(self.real, INVENTORY_SUMMARY_TABLE):
            if item["sk"] == SUMMARY:
                summaries[str(item["sku"])] = {
                    name: int(item.get(name, 0)) for name in ("available", "reserved", "sold")
                }
        return {sku: SkuState(units[sku], summaries.get(sku), None) for sku in units}

    def check(self, recorder: Any, stats: Any, real: Any) -> Report:
        report = Report()
        report.expect(
            not self.unexpected,
            "streams",
            "no unexpected exception in a consumer",
            f"{self.unexpected[:3]}",
        )
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        for op in ops:
            report.expect(
                op.value != {"error": "ALREADY_EXISTS"},
                "streams",
                "a fresh request is not refused as existing",
                f"{op.process}'s request (a fresh id) was refused: its own write was sent twice",
                [op],
            )
        states, statuses, seats = self._registrations()
        dead = {
            str((codec.decode_item(r["dynamodb"]["Keys"]) or {})["requestId"])
            for r in self.dead_letters["decider"]
        }
        report.merge(checkers.registrations(ops, states, dead, set()))
        for request_id, decisions in sorted(self.decisions.items()):
            returned = [d for d in decisions if d is not None]
            report.expect(
                len(returned) <= 1,
                "streams",
                "each request decided exactly once",
                f"request {request_id} was decided {len(returned)} times: {returned}",
            )
            report.expect(
                all(d == statuses.get(request_id) for d in returned),
                "streams",
                "each request decided exactly once",
                f"request {request_id} was answered {returned} but is {statuses.get(request_id)}",
            )
        accepted = {rid for rid, status in statuses.items() if status == ACCEPTED}
        report.expect(
            accepted == set(seats),
            "streams",
            "an accepted request holds one seat, and only those",
            f"accepted without a seat {sorted(accepted - set(seats))[:4]}, seated but not "
            f"accepted {sorted(set(seats) - accepted)[:4]}",
        )
        skus = self._skus()
        dead_skus = {
            sku_of(str((codec.decode_item(r["dynamodb"]["Keys"]) or {})["sku"]))
            for r in self.dead_letters["summary"]
        }
        # A change given up on is missing from the summary by design (on AWS, the dead-letter
        # queue's alarm says so): its sku's summary is not judged.
        for sku, state in sorted(skus.items()):
            if sku in dead_skus:
                continue
            counted = Counter(_COUNTS[status] for status in state.units.values())
            report.expect(
                state.summary == {name: counted[name] for name in _COUNTS.values()},
                "inventory",
                "summary converges",  # as chaos.checkers.inventory names it
                f"{sku}: summary {state.summary} but the units count {dict(counted)}",
            )
        return report

    def final(self, real: Any) -> dict[str, Any]:
        _, statuses, _ = self._registrations()
        return {
            "requests": dict(sorted(Counter(statuses.values()).items())),
            "stream": dict(sorted(self.happened.items())),
            "stream_log": self.log,
        }


def _never_sleeps(seconds: float) -> None:
    raise AssertionError("set-up runs without faults and never waits")
