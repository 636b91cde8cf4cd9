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

from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from service import catalog, config, runtime
from service.domain.events import Events
from service.domain.registration_requests import PENDING, RegistrationRequests
from service.observability import observed
from service.streams import process_in_order
from turnstile_ddb import metrics

logger = Logger()  # service: POWERTOOLS_SERVICE_NAME, set per function by the stack
PATTERN = "decider"  # metrics: RequestAccepted, RequestRejected, AlreadyDecided, PendingAge


def _requests() -> RegistrationRequests:
    tables = catalog.tables("decider")
    client = runtime.dynamodb.get()
    return RegistrationRequests(
        client=client,
        table=tables[config.REGISTRATION_REQUESTS],
        events=Events(
            client=client, table=tables[config.EVENTS], hints=runtime.sharded_hints.get()
        ),
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
    age = pending_age_ms(str(image.get("requestedAt", "")), datetime.now(UTC))
    if age is not None:
        metrics.timing("PendingAge", age, pattern=PATTERN)
    decision = requests.get().decide(
        str(image["eventId"]), str(image["requestId"]), str(image["userId"])
    )
    if decision is None:
        metrics.count("AlreadyDecided", pattern=PATTERN)
        return "already decided"
    metrics.count(f"Request{decision.status.title()}", pattern=PATTERN)
    logger.info(
        "decided",
        extra={
            "requestId": decision.request_id,
            "status": decision.status,
            "reason": decision.reason,
        },
    )
    return decision.status


def pending_age_ms(requested_at: str, now: datetime) -> float | None:
    """How long a request has been PENDING (ms), from its ``requestedAt``; None if unreadable.

    Measured at every attempt to decide it, retries included: a request the decider keeps failing
    on shows a growing age until the mapping gives it up to the dead-letter queue (whose depth is
    alarmed), so between them a request stuck PENDING is never invisible.
    """
    try:
        requested = datetime.fromisoformat(requested_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, (now - requested).total_seconds() * 1000)


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # In stream order, stopping at the first failure: a request is never decided before an
    # earlier one of the same batch that is still waiting for its retry (first come, first served).
    return process_in_order(event, context, decide, pattern=PATTERN)
