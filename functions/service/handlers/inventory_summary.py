"""Stream consumer: keeps each sku's available / reserved / sold counts from the units' changes.

Powertools' ``BatchProcessor`` reports failed records one by one (``batchItemFailures``), so the
event source mapping retries from the first failure only; every record is applied at most once
per unit change (see :class:`service.domain.inventory.Summaries`), so those retries are harmless.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from service import config, runtime
from service.domain.inventory import Summaries

summaries: runtime.Lazy[Summaries] = runtime.Lazy(
    lambda: Summaries(
        client=runtime.dynamodb.get(),
        table=config.Tables.from_env(config.INVENTORY_SUMMARY)[config.INVENTORY_SUMMARY],
    )
)
processor: runtime.Lazy[BatchProcessor] = runtime.Lazy(
    lambda: BatchProcessor(event_type=EventType.DynamoDBStreams)
)


def record_handler(record: DynamoDBRecord) -> None:
    summaries.get().apply(record.raw_event)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor.get(), context=context
    )
    return dict(response)
