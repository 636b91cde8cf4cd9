"""A local stand-in for Lambda's DynamoDB Streams event source mapping.

It polls DynamoDB Local's stream shards, builds Lambda-shaped stream events, invokes the same
consumer handler Lambda runs, and honours partial batch responses the way the Lambda service does:
records before the first reported failure count as done, the batch is retried from the first failed
sequence number, and after ``retry_attempts`` retries the failing record goes to the dead letters
(a list here, an SQS queue on AWS) and the shard moves on. A handler that raises fails its whole
batch; as with ``BisectBatchOnFunctionError``, the batch is then halved until the record that breaks
it is alone, and only then do retries count against it. One batch per shard at a time, shards
in parent-before-child order: records of one key arrive in the order they were written.

Its settings (batch size, retries, event filters) come from the template's
``AWS::Lambda::EventSourceMapping`` resources, so the pump behaves as the deployed mapping is
configured. Filters: like Lambda, records that match no pattern are dropped before any invocation
and the batch size counts matching records only; the pump reads up to 1000 records a call then.
Only the pattern forms turnstile uses are understood (nested objects, lists of exact values).
A record given up on counts as ``DeadLettered`` (pattern ``streams``) in ``turnstile_ddb.metrics``;
on AWS the queue depth says it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from local import init_report
from local import template as template_
from service.lru import LRU
from turnstile_ddb import metrics

log = logging.getLogger("local.pump")

Handler = Callable[[dict[str, Any], Any], Any]

# Shards whose read state a pump keeps: the ones not read to their end (about one open shard per
# partition, and at a start every shard the stream still lists: a day of them, each lives hours),
# so a table of a thousand partitions stays far under it.
MAX_SHARDS = 10_000
# Records given up on that a pump keeps (the oldest dropped): each is a consumer failing a record
# every retry, which tests and make chaos read; a long run that breaks a consumer keeps the latest.
MAX_DEAD_LETTERS = 10_000


@dataclass(frozen=True)
class MappingSpec:
    """One event source mapping of the template, resolved to local names."""

    function_name: str
    handler: str  # "module.path.handler"
    table: str
    batch_size: int
    retry_attempts: int
    filters: tuple[dict[str, Any], ...] = ()
    timeout_seconds: float = 3.0  # the function's Timeout (Lambda's default when unset)

    def load_handler(self) -> Handler:
        handler, _ = init_report.load(self.handler, self.function_name)
        return handler


def mapping_specs(template: dict[str, Any], table_names: dict[str, str]) -> list[MappingSpec]:
    resources = template["Resources"]
    specs = []
    for resource in resources.values():
        if resource["Type"] != "AWS::Lambda::EventSourceMapping":
            continue
        properties = resource["Properties"]
        source = properties["EventSourceArn"].get("Fn::GetAtt", [None])[0]
        if source not in table_names:
            continue  # not a DynamoDB stream of ours
        logical, function = template_.invoked_function(template, properties["FunctionName"])
        specs.append(
            MappingSpec(
                function_name=logical,
                handler=function["Properties"]["Handler"],
                table=table_names[source],
                batch_size=int(properties.get("BatchSize", 100)),
                retry_attempts=int(properties.get("MaximumRetryAttempts", -1)),
                filters=tuple(
                    json.loads(each["Pattern"])
                    for each in (properties.get("FilterCriteria") or {}).get("Filters", [])
                ),
                timeout_seconds=float(function["Properties"].get("Timeout", 3)),
            )
        )
    return specs


def matches(pattern: Any, value: Any) -> bool:
    """An event filter pattern against a record: objects nest, a list names the allowed values."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            key in value and matches(inner, value[key]) for key, inner in pattern.items()
        )
    if isinstance(pattern, list):
        return any(value == allowed for allowed in pattern)
    return bool(value == pattern)


def _depth(shard_id: str, listed: dict[str, str | None]) -> int:
    """How many of ``shard_id``'s ancestors the stream lists (parents sort before children)."""
    depth, parent = 0, listed.get(shard_id)
    while parent in listed:
        depth, parent = depth + 1, listed.get(parent)
    return depth


@dataclass
class _Shard:
    shard_id: str
    parent: str | None
    iterator: str | None = None
    done: bool = False
    limit: int | None = None  # a bisected batch size, until the batch succeeds
    checkpoint: str | None = None  # sequence number of the last record handed on (done or DLQ)
    attempts: dict[str, int] = field(default_factory=dict)
    parent_finished: bool = False  # its parent was read to its end when this one was taken on
    # When a read of it last found nothing (epoch seconds): every record read later was written
    # after that (dated_records)
    empty_at: float | None = None


@dataclass
class _Context:
    """Lambda's context for one invocation: its remaining time counts down from the function's
    timeout (nothing stops a local invocation that overruns it; the handler is told, as on AWS)."""

    function_name: str
    timeout_seconds: float = 60.0
    aws_request_id: str = "local-stream"
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        left = self.timeout_seconds - (time.monotonic() - self.started)
        return max(0, int(left * 1000))


def dated_records(records: list[dict[str, Any]], not_before: float | None) -> list[dict[str, Any]]:
    """``records`` with ``ApproximateCreationDateTime`` as epoch seconds, as Lambda hands it over,
    and no earlier than ``not_before`` rounded down to the second (as AWS rounds it).

    DynamoDB Local rounds it down to the minute, so a record would look up to 60 s older than it
    is (``StreamLag``). ``not_before`` is when the pump last found the shard empty: anything read
    since was written after it. Without it (the pump is behind, or just started) DynamoDB Local's
    date stays: a lag may then be overstated, never understated."""
    dated = []
    for raw in records:
        change = dict(raw["dynamodb"])
        created = change.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            created = created.timestamp()
        if isinstance(created, (int, float)) and not_before is not None:
            created = max(float(created), float(int(not_before)))
        if created is not None:
            change["ApproximateCreationDateTime"] = created
        dated.append({**raw, "dynamodb": change})
    return dated


def lambda_record(raw: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A GetRecords record in the shape Lambda hands to a function."""
    change = dict(raw["dynamodb"])
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        change["ApproximateCreationDateTime"] = created.timestamp()
    record = {
        "eventID": raw["eventID"],
        "eventName": raw["eventName"],
        "eventVersion": raw.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": change,
        "eventSourceARN": stream_arn,
    }
    if "userIdentity" in raw:
        record["userIdentity"] = raw["userIdentity"]
    return record


class StreamPump:
    def __init__(
        self,
        *,
        dynamodb: Any,
        streams: Any,
        table: str,
        handler: Handler,
        batch_size: int = 100,
        retry_attempts: int = 5,
        function_name: str = "consumer",
        filters: tuple[dict[str, Any], ...] = (),
        timeout_seconds: float = 60.0,
        max_shards: int = MAX_SHARDS,
        max_dead_letters: int = MAX_DEAD_LETTERS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.streams = streams
        self.clock = clock
        self.filters = filters
        self.handler = handler
        self.batch_size = batch_size
        self.retry_attempts = retry_attempts
        self.function_name = function_name
        self.timeout_seconds = timeout_seconds
        description = dynamodb.describe_table(TableName=table)["Table"]
        self.stream_arn: str = description["LatestStreamArn"]
        self.region = streams.meta.region_name
        # What was read of each shard not finished yet, and of a finished one until its child
        # starts or the stream trims it: at most ``max_shards`` (docs/soak.md, "Process-wide
        # state and its bounds"); more shards wait for room, in parent-before-child order.
        self.shards: LRU[str, _Shard] = LRU(max_shards)
        # The records given up on, the most recent ``max_dead_letters`` (an SQS queue on AWS).
        self.dead_letters: list[dict[str, Any]] = []
        self.max_dead_letters = max_dead_letters
        self.delivered = 0
        self._lock = threading.Lock()  # one poll at a time (run() thread vs drain())

    # -- shards ----------------------------------------------------------------------------

    def _discover(self) -> None:
        listed: dict[str, str | None] = {}  # every shard the stream lists now -> its parent
        start: str | None = None
        while True:
            kwargs: dict[str, Any] = {"StreamArn": self.stream_arn}
            if start:
                kwargs["ExclusiveStartShardId"] = start
            description = self.streams.describe_stream(**kwargs)["StreamDescription"]
            for shard in description["Shards"]:
                listed[shard["ShardId"]] = shard.get("ParentShardId")
            start = description.get("LastEvaluatedShardId")
            if not start:
                break
        finished = self._finished(listed)
        # Forget a finished shard the stream no longer lists (trimmed: it cannot be read again) or
        # whose child has started (the stream still lists it, and _finished says so again).
        for shard_id, shard in self.shards.items():
            if shard.done and (shard_id not in listed or shard_id in finished):
                self.shards.pop(shard_id)
        # Take on the shards not known yet, parents first, while there is room: one that waits
        # for room is listed again at the next poll, and its children wait with it. A child
        # takes its finished parent's place (it remembers that the parent was read).
        for shard_id in sorted(listed, key=lambda each: _depth(each, listed)):
            if shard_id in self.shards or shard_id in finished:
                continue
            parent = self.shards.peek(listed[shard_id] or "")
            if parent is not None and parent.done and len(self.shards) >= self.shards.size:
                self.shards.pop(parent.shard_id)
            if len(self.shards) >= self.shards.size:
                break
            shard = _Shard(shard_id, listed[shard_id])
            shard.parent_finished = parent is not None and parent.done
            self.shards.put(shard_id, shard)

    def _finished(self, listed: dict[str, str | None]) -> set[str]:
        """The listed shards read to their end before: the ancestors of a shard that has
        started or took its finished parent's place, since a child starts only after its parent
        is done (:meth:`_ready`; :meth:`start_at_latest` leaves out what both hold). No state is
        kept for them."""
        finished: set[str] = set()
        for shard_id, shard in self.shards.items():
            if shard.done or shard.iterator is not None or shard.parent_finished:
                parent = listed.get(shard_id, shard.parent)
                while parent and parent not in finished:
                    finished.add(parent)
                    parent = listed.get(parent)
        return finished

    def start_at_latest(self) -> None:
        """Leave out what the stream holds now: the shards known now are read from after their
        latest record (shards that appear later, from their start). For a caller that needs only
        the records of what it writes next, in a table whose stream holds much else."""
        with self._lock:
            self._discover()
            for _, shard in self.shards.items():
                if shard.iterator is None:
                    shard.iterator = self._iterator(shard, "LATEST")

    def _ready(self, shard: _Shard) -> bool:
        parent = self.shards.peek(shard.parent or "")
        return not shard.done and (parent is None or parent.done)

    def _iterator(self, shard: _Shard, kind: str, sequence: str | None = None) -> str | None:
        kwargs: dict[str, Any] = {
            "StreamArn": self.stream_arn,
            "ShardId": shard.shard_id,
            "ShardIteratorType": kind,
        }
        if sequence:
            kwargs["SequenceNumber"] = sequence
        return self.streams.get_shard_iterator(**kwargs).get("ShardIterator")

    # -- polling ---------------------------------------------------------------------------

    def poll_once(self) -> int:
        """Deliver at most one batch per ready shard; returns how many records were delivered."""
        with self._lock:
            self._discover()
            delivered = 0
            for _, shard in self.shards.items():
                if self._ready(shard):
                    delivered += self._poll_shard(shard)
            return delivered

    def _poll_shard(self, shard: _Shard) -> int:
        if shard.iterator is None:
            shard.iterator = self._iterator(shard, "TRIM_HORIZON")
            if shard.iterator is None:
                shard.done = True
                return 0
        limit = shard.limit or (1000 if self.filters else self.batch_size)
        asked_at = self.clock()
        try:
            response = self.streams.get_records(ShardIterator=shard.iterator, Limit=limit)
        except ClientError as exc:
            # DynamoDB Local sometimes refuses an iterator it handed out from an empty read that
            # raced a write ("read past the oldest stream record"); iterators also expire. Like
            # the Lambda poller, start again just after the last record we finished with.
            code = exc.response.get("Error", {}).get("Code")
            if code not in ("TrimmedDataAccessException", "ExpiredIteratorException"):
                raise
            log.info("re-reading shard %s after %s", shard.shard_id, code)
            if shard.checkpoint is None:
                shard.iterator = self._iterator(shard, "TRIM_HORIZON")
            else:
                shard.iterator = self._iterator(shard, "AFTER_SEQUENCE_NUMBER", shard.checkpoint)
            return 0
        records = dated_records(response.get("Records", []), shard.empty_at)
        following = response.get("NextShardIterator")
        if not records:
            shard.empty_at = asked_at
            shard.iterator = following
            shard.done = following is None
            return 0
        if self.filters:
            records, cut = self._window(records)
            if cut:  # the batch ends before the page does: continue right after it
                following = self._iterator(
                    shard, "AFTER_SEQUENCE_NUMBER", records[-1]["dynamodb"]["SequenceNumber"]
                )
        failed, crashed = self._invoke(records)
        self.delivered += len(records)
        if failed is None:
            shard.checkpoint = records[-1]["dynamodb"]["SequenceNumber"]
            shard.iterator = following
            shard.done = following is None
            shard.limit = None
            shard.attempts.clear()
            return len(records)
        sequence = records[failed]["dynamodb"]["SequenceNumber"]
        if failed > 0:
            shard.checkpoint = records[failed - 1]["dynamodb"]["SequenceNumber"]
        if crashed and len(records) > 1:
            shard.limit = max(1, len(records) // 2)  # bisect, retry the first half
            shard.iterator = self._iterator(shard, "AT_SEQUENCE_NUMBER", sequence)
            return len(records)
        # Only the record failing now is counted: the first failure only moves forward, so the
        # counts of the records before it are never needed again.
        shard.attempts = {sequence: shard.attempts.get(sequence, 0) + 1}
        if 0 <= self.retry_attempts < shard.attempts[sequence]:
            log.warning("giving up on %s after %s retries", sequence, self.retry_attempts)
            self.dead_letters.append(records[failed])
            del self.dead_letters[: -self.max_dead_letters]
            shard.attempts.clear()
            metrics.count("DeadLettered", pattern="streams")
            shard.checkpoint = sequence
            shard.iterator = self._iterator(shard, "AFTER_SEQUENCE_NUMBER", sequence)
        else:
            shard.iterator = self._iterator(shard, "AT_SEQUENCE_NUMBER", sequence)
        return len(records)

    def _wanted(self, record: dict[str, Any]) -> bool:
        shaped = lambda_record(record, self.stream_arn, self.region)
        return not self.filters or any(matches(pattern, shaped) for pattern in self.filters)

    def _window(self, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
        """The records up to the ``batch_size``-th one that passes the filters; and whether
        that cut the page short."""
        wanted = 0
        for index, record in enumerate(records):
            if self._wanted(record):
                wanted += 1
                if wanted == self.batch_size and index + 1 < len(records):
                    return records[: index + 1], True
        return records, False

    def _invoke(self, records: list[dict[str, Any]]) -> tuple[int | None, bool]:
        """Run the handler: (index of the first failed record or None, whether it raised).
        Records the filters drop count as done without an invocation."""
        shaped = [
            lambda_record(r, self.stream_arn, self.region) for r in records if self._wanted(r)
        ]
        if not shaped:
            return None, False
        event = {"Records": shaped}
        try:
            result = self.handler(event, _Context(self.function_name, self.timeout_seconds)) or {}
        except Exception:  # a crashed invocation fails the whole batch
            log.exception("stream consumer %s raised", self.function_name)
            return 0, True
        failures = {item["itemIdentifier"] for item in result.get("batchItemFailures") or []}
        for index, record in enumerate(records):
            if record["dynamodb"]["SequenceNumber"] in failures:
                return index, False
        return None, False

    def drain(self, *, timeout: float = 60.0, idle_polls: int = 2) -> int:
        """Poll until ``idle_polls`` polls in a row deliver nothing; returns records delivered."""
        deadline = time.monotonic() + timeout
        total, idle = 0, 0
        while idle < idle_polls:
            if time.monotonic() > deadline:
                raise TimeoutError("the stream did not drain in time")
            delivered = self.poll_once()
            total += delivered
            idle = 0 if delivered else idle + 1
        return total

    def run(self, stop: threading.Event, interval: float = 0.2) -> None:
        while not stop.is_set():
            try:
                if not self.poll_once():
                    stop.wait(interval)
            except Exception:  # keep pumping; DynamoDB Local may be restarting
                log.exception("stream pump error")
                stop.wait(1.0)
