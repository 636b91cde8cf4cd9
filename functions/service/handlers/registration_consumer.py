"""Stream consumer: decides registration requests in the order the stream delivers them.

Fed by the registration-requests table's stream (NEW_AND_OLD_IMAGES). Only the INSERT of a PENDING
request needs work. Everything else is skipped without failing the record: the decider's own
decision writes (MODIFY), deletions (REMOVE), and TTL deletions, which DynamoDB Local reports with
eventName "UNKNOWN_TO_SDK_VERSION" (Powertools' ``event_name`` enum would raise on that, so the raw
name is read). A record that cannot be decided (malformed image, an outage) is reported in
``batchItemFailures`` together with every record after it (``service.streams``): the event source
mapping retries from it, bisects, and after its retries sends it to the dead-letter queue; then the
records behind it are decided, still in order.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from service import catalog, config, runtime
from service.domain.events import Events
from service.domain.registration_requests import PENDING, RegistrationRequests
from service.streams import process_in_order

logger = Logger(service="turnstile-decider")


def _requests() -> RegistrationRequests:
    tables = catalog.tables("decider")
    client = runtime.dynamodb.get()
    return RegistrationRequests(
        client=client,
        table=tables[config.REGISTRATION_REQUESTS],
        events=Events(client=client, table=tables[config.EVENTS]),
    )


requests: runtime.Lazy[RegistrationRequests] = runtime.Lazy(_requests)


def decide(record: DynamoDBRecord) -> str:
    """Decide one record; returns what happened (for logs and tests)."""
    name = record.raw_event.get("eventName")
    if name != "INSERT":
        return f"skipped {name}"
    change = record.dynamodb
    if change is None:
        raise ValueError("stream record without a dynamodb section")
    image = change.new_image
    if image.get("status") != PENDING:
        return "skipped: not pending"
    decision = requests.get().decide(
        str(image["eventId"]), str(image["requestId"]), str(image["userId"])
    )
    if decision is None:
        return "already decided"
    logger.info(
        "decided",
        extra={
            "requestId": decision.request_id,
            "status": decision.status,
            "reason": decision.reason,
        },
    )
    return decision.status


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # In stream order, stopping at the first failure: a request is never decided before an
    # earlier one of the same batch that is still waiting for its retry (first come, first served).
    return process_in_order(event, context, decide)
