"""Stream consumer: keeps each sku's available / reserved / sold counts from the units' changes.

Records are processed strictly in stream order (``service.streams``): a unit's changes must be
applied in the order they happened, since each is guarded by the unit's change number ``seq`` (see
:class:`service.domain.inventory_summary.Summaries`), which also makes redelivered records harmless.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from service import catalog, config, runtime
from service.domain.inventory_summary import Summaries
from service.observability import observed
from service.streams import process_in_order
from turnstile_ddb import metrics

PATTERN = "summary"  # metrics: SummaryApplied, SummarySkipped, StreamLag

summaries: runtime.Lazy[Summaries] = runtime.Lazy(
    lambda: Summaries(
        client=runtime.dynamodb.get(),
        table=catalog.tables("inventorysummary")[config.INVENTORY_SUMMARY],
    )
)


def record_handler(record: DynamoDBRecord, done: Mapping[str, bool] | None = None) -> None:
    """One record: already applied with the batch (``done``, by sequence number), else alone."""
    sequence = record.dynamodb.sequence_number if record.dynamodb else None
    if done is not None and sequence is not None and sequence in done:
        applied = done[sequence]
    else:
        applied = summaries.get().apply(record.raw_event)
    metrics.count("SummaryApplied" if applied else "SummarySkipped", pattern=PATTERN)


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The batch's records together first (:meth:`Summaries.apply_together`: a few transactions
    instead of one per record); whatever that left undone, one by one, in order."""
    done = summaries.get().apply_together(event.get("Records") or [])
    return process_in_order(
        event, context, lambda record: record_handler(record, done), pattern=PATTERN
    )
