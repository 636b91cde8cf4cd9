"""``StreamLag``: milliseconds from a change to its handling, from the stream record's
``ApproximateCreationDateTime``.

On AWS, Lambda hands a consumer that field as epoch SECONDS, a number rounded down to the second
(``1479499740`` in the Lambda developer guide's example event); the consumer multiplies by 1000
once. DynamoDB Local gives epoch seconds too, but rounded down to the MINUTE (seen: a change
written at 23:57:21.9 stamped ``1795823820.000``, 23:57:00): every local record looked up to
60 s old, and the running total a ``contention:`` line shows (durations summed) grew by about
30 s a record. The local pump, which knows when it last found a shard empty (nothing written
since), dates a record no earlier than that, rounded down to the second as AWS rounds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from local.pump import StreamPump
from service.streams import lag_ms

MINUTE = 1_800_000_000.0  # a whole minute, epoch seconds


def test_the_consumer_reads_aws_epoch_seconds_and_reports_milliseconds():
    # Given a record as Lambda hands it over: epoch seconds, a number
    record = DynamoDBRecord({"dynamodb": {"ApproximateCreationDateTime": MINUTE + 30}})
    # Then the lag 1.5 s later is 1500 ms: seconds times 1000, once
    assert lag_ms(record, MINUTE + 31.5) == 1500.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Stream:
    """One shard whose reads return, in turn, the pages given (then nothing)."""

    def __init__(self, clock: Clock, pages: list[tuple[float, list[dict[str, Any]]]]) -> None:
        self.clock = clock
        self.pages = pages
        self.meta = SimpleNamespace(region_name="ddblocal")

    def describe_stream(self, **_: Any) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, **_: Any) -> dict[str, Any]:
        return {"ShardIterator": "it"}

    def get_records(self, **_: Any) -> dict[str, Any]:
        at, records = self.pages.pop(0) if self.pages else (self.clock.now, [])
        self.clock.now = at  # the time the read is answered
        return {"Records": records, "NextShardIterator": "it"}


def local_record(created: float) -> dict[str, Any]:
    """A GetRecords record as boto3 parses DynamoDB Local's (a datetime, whole minutes)."""
    return {
        "eventID": "e1",
        "eventName": "INSERT",
        "dynamodb": {
            "ApproximateCreationDateTime": datetime.fromtimestamp(created, UTC),
            "Keys": {"pk": {"S": "a"}},
            "SequenceNumber": "1",
        },
    }


def delivered(pages: list[tuple[float, list[dict[str, Any]]]], start: float) -> list[float]:
    """The ``ApproximateCreationDateTime`` of each record the pump hands to the consumer."""
    clock = Clock(start)
    seen: list[float] = []

    def consumer(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.extend(r["dynamodb"]["ApproximateCreationDateTime"] for r in event["Records"])
        return {"batchItemFailures": []}

    table = SimpleNamespace(describe_table=lambda **_: {"Table": {"LatestStreamArn": "arn"}})
    pump = StreamPump(
        dynamodb=table, streams=Stream(clock, pages), table="t", handler=consumer, clock=clock
    )
    for _ in range(len(pages)):
        pump.poll_once()
    return seen


def test_a_local_record_is_dated_no_earlier_than_the_pumps_last_empty_read():
    # Given a shard the pump found empty at :30.4, then a change DynamoDB Local stamps :00
    pages = [(MINUTE + 30.4, []), (MINUTE + 30.6, [local_record(MINUTE)])]
    # When the pump hands it to the consumer
    (created,) = delivered(pages, MINUTE + 30.4)
    # Then it is dated :30 (the empty read, rounded down to the second as on AWS), not :00
    assert created == MINUTE + 30
    # And its lag handled at :30.6 is 600 ms, not 30.6 s
    record = DynamoDBRecord({"dynamodb": {"ApproximateCreationDateTime": created}})
    assert round(lag_ms(record, MINUTE + 30.6) or 0) == 600


def test_without_an_empty_read_before_it_a_record_keeps_dynamodb_locals_date():
    # Given a record read at the pump's first read (written before the pump looked)
    (created,) = delivered([(MINUTE + 30.6, [local_record(MINUTE)])], MINUTE + 30.6)
    # Then it keeps the date DynamoDB Local gave: a lag is never made smaller than it may be
    assert created == MINUTE
