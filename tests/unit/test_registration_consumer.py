"""The stream consumer's answer to Lambda: partial batch failures, and records it must skip."""

from __future__ import annotations

from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from service.domain.events import Events
from service.domain.registration_requests import RegistrationRequests
from service.handlers import registration_consumer
from turnstile_ddb import codec


def record(
    sequence: str, name: str, new: dict[str, Any] | None, old: dict[str, Any] | None = None
) -> dict[str, Any]:
    change: dict[str, Any] = {
        "Keys": codec.encode_item({"eventId": "e1", "requestId": f"r{sequence}"}),
        "SequenceNumber": sequence,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
        "SizeBytes": 100,
    }
    if new is not None:
        change["NewImage"] = codec.encode_item(new)
    if old is not None:
        change["OldImage"] = codec.encode_item(old)
    return {
        "eventID": f"id-{sequence}",
        "eventName": name,
        "eventSource": "aws:dynamodb",
        "eventVersion": "1.1",
        "awsRegion": "us-east-1",
        "dynamodb": change,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/requests/stream/x",
    }


@pytest.fixture
def services(moto_ddb: Any, moto_tables: Any) -> RegistrationRequests:
    events = Events(client=moto_ddb, table=moto_tables["events"])
    events.create("e1", "Event", 10)
    return RegistrationRequests(
        client=moto_ddb, table=moto_tables["registration_requests"], events=events
    )


def test_a_poison_record_stops_the_batch_in_order_and_the_rest_follow_once_it_is_set_aside(
    services,
):
    # Given a batch: a good request, one whose image lacks the user, and another good one
    first = services.submit("e1", "ann")["requestId"]
    last = services.submit("e1", "bob")["requestId"]
    pending = {"eventId": "e1", "status": "PENDING"}
    event = {
        "Records": [
            record("100", "INSERT", {**pending, "requestId": first, "userId": "ann"}),
            record("200", "INSERT", {**pending, "requestId": "broken"}),
            record("300", "INSERT", {**pending, "requestId": last, "userId": "bob"}),
        ]
    }
    # When the handler runs
    response = registration_consumer.handler(event, None)
    # Then the poison record and everything after it are reported, so Lambda retries from it and
    # no later request is decided before it (first come, first served)
    assert response == {"batchItemFailures": [{"itemIdentifier": "200"}, {"itemIdentifier": "300"}]}
    assert services.get("e1", first)["status"] == "ACCEPTED"
    assert services.get("e1", last)["status"] == "PENDING"
    # And once the mapping has set the poison record aside (retries spent, sent to the DLQ), the
    # delivery resumes after it and the rest is decided: the poison blocks nothing for good
    response = registration_consumer.handler({"Records": event["Records"][2:]}, None)
    assert response == {"batchItemFailures": []}
    assert services.get("e1", last)["status"] == "ACCEPTED"
    assert services.events.get("e1")["registered"] == 2


def test_own_decisions_removals_and_ttl_deletions_are_skipped_without_failing(services):
    # Given the records the decider must ignore: its own decision write, a deletion, and a TTL
    # deletion as DynamoDB Local reports it (eventName UNKNOWN_TO_SDK_VERSION, no new image)
    request_id = services.submit("e1", "ann")["requestId"]
    before = {"eventId": "e1", "requestId": request_id, "userId": "ann", "status": "PENDING"}
    after = {**before, "status": "ACCEPTED"}
    event = {
        "Records": [
            record("1", "MODIFY", after, before),
            record("2", "REMOVE", None, after),
            record("3", "UNKNOWN_TO_SDK_VERSION", None, after),
        ]
    }
    # When the handler runs
    response = registration_consumer.handler(event, None)
    # Then nothing failed and nothing was decided by those records
    assert response == {"batchItemFailures": []}
    assert services.get("e1", request_id)["status"] == "PENDING"
    assert services.events.get("e1")["registered"] == 0


def test_a_redelivered_insert_decides_nothing_twice(services):
    # Given a request that was decided already
    request_id = services.submit("e1", "ann")["requestId"]
    insert = record(
        "7",
        "INSERT",
        {"eventId": "e1", "requestId": request_id, "userId": "ann", "status": "PENDING"},
    )
    assert registration_consumer.handler({"Records": [insert]}, None) == {"batchItemFailures": []}
    # When the same record is delivered again
    response = registration_consumer.handler({"Records": [insert, insert]}, None)
    # Then it succeeds as a no-op: still one seat taken
    assert response == {"batchItemFailures": []}
    assert services.get("e1", request_id)["status"] == "ACCEPTED"
    assert services.events.get("e1")["registered"] == 1


def test_a_batch_where_every_record_fails_raises_so_lambda_bisects_it(services):
    # Given a batch with nothing but poison
    event = {"Records": [record("9", "INSERT", {"eventId": "e1", "status": "PENDING"})]}
    # Then the invocation fails as a whole (the mapping bisects, retries, then dead-letters)
    with pytest.raises(BatchProcessingError):
        registration_consumer.handler(event, None)
