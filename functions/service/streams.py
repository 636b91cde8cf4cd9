"""Stream batches processed in order: after the first failed record, stop.

Powertools' ``BatchProcessor`` goes on with the records after a failure and reports only the
failures. The event source mapping then retries from the first failure, so the records behind it
would have run *before* it: a later change of the same unit would be applied before an earlier
one (and the earlier one then mistaken for a duplicate), and a later registration request decided
before an earlier one. Here, once a record fails, every later record of the batch is reported as
failed without running, so each retry starts at the first unfinished record and everything runs
in stream order. A record that keeps failing is retried a bounded number of times, then sent to
the dead-letter queue by the mapping, and the records behind it flow again.

Metrics, under the consumer's pattern: ``StreamLag`` (ms from the change to its handling, from the
record's ``ApproximateCreationDateTime``, whole seconds on AWS), ``RecordFailed`` for a record that
failed and ``RecordNotRun`` for the records held back behind it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from turnstile_ddb import metrics


class NotRunAfterFailure(Exception):
    """This record was not processed because an earlier record of its batch failed."""


def lag_ms(record: DynamoDBRecord, now: float) -> float | None:
    """How long ago (ms, at ``now`` epoch seconds) the change was written; None if unknown."""
    created = (record.raw_event.get("dynamodb") or {}).get("ApproximateCreationDateTime")
    if not isinstance(created, (int, float)):
        return None
    return max(0.0, (now - float(created)) * 1000)


class _InOrder:
    def __init__(self, handle: Callable[[DynamoDBRecord], Any], pattern: str) -> None:
        self.handle = handle
        self.pattern = pattern
        self.failed = False

    def __call__(self, record: DynamoDBRecord) -> Any:
        if self.failed:
            metrics.count("RecordNotRun", pattern=self.pattern)
            raise NotRunAfterFailure(record.dynamodb.sequence_number if record.dynamodb else "")
        lag = lag_ms(record, time.time())
        if lag is not None:
            metrics.timing("StreamLag", lag, pattern=self.pattern)
        try:
            return self.handle(record)
        except Exception:
            self.failed = True
            metrics.count("RecordFailed", pattern=self.pattern)
            raise


def process_in_order(
    event: dict[str, Any],
    context: Any,
    handle: Callable[[DynamoDBRecord], Any],
    *,
    pattern: str = "streams",
) -> dict[str, Any]:
    """Run ``handle`` on each record in order; the partial batch response Lambda expects.

    A batch whose first record fails fails whole (Powertools raises), so Lambda bisects it.
    A processor holds one batch's state, so each call gets its own.
    """
    processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
    return dict(
        process_partial_response(
            event=event,
            record_handler=_InOrder(handle, pattern),
            processor=processor,
            context=context,
        )
    )
