"""What DynamoDB Local never does: TransactionConflict and throttling. Injected with botocore's
Stubber, to check the retries (same ClientRequestToken every time) and the exact answers read
from CancellationReasons."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from service.domain.errors import AlreadyRegistered, EventFull, NotFound
from service.domain.events import Events
from service.domain.registration_requests import ACCEPTED, RegistrationRequests
from service.handlers import events as events_handler
from tests.helpers import proxy_event
from turnstile_ddb import codec, retry

NO_WAIT = retry.Backoff(attempts=4, base=0.001, cap=0.001, sleep=lambda seconds: None)
EVENT = {"eventId": "e1", "sk": "EVENT", "name": "N", "capacity": 2, "registered": 2, "version": 3}


@pytest.fixture
def stubbed() -> Any:
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        endpoint_url="http://stubbed.invalid",
        config=retry.client_config(),
    )
    tokens: list[str] = []
    client.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems",
        lambda params, **_: tokens.append(params["ClientRequestToken"]),
    )
    with Stubber(client) as stubber:
        client.tokens = tokens  # type: ignore[attr-defined]
        client.stubber = stubber  # type: ignore[attr-defined]
        yield client
        stubber.assert_no_pending_responses()


def cancelled(stubber: Stubber, *reasons: dict[str, Any]) -> None:
    stubber.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        service_message="Transaction cancelled",
        http_status_code=400,
        modeled_fields={"CancellationReasons": list(reasons)},
    )


def ok(stubber: Stubber) -> None:
    stubber.add_response(
        "transact_write_items", {}, {"TransactItems": ANY, "ClientRequestToken": ANY}
    )


def reason(code: str, item: dict[str, Any] | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"Code": code, "Message": code}
    if item is not None:
        found["Item"] = codec.encode_item(item)
    return found


def events_on(client: Any) -> Events:
    return Events(client=client, table="events", backoff=NO_WAIT, transactions=NO_WAIT)


def test_transaction_conflicts_and_throttling_are_retried_with_the_same_token(stubbed):
    # Given a conflict, then a throttled cancellation, then a plain throttling error, then success
    cancelled(stubbed.stubber, reason("TransactionConflict"), reason("None"))
    cancelled(stubbed.stubber, reason("None"), reason("ThrottlingError"))
    stubbed.stubber.add_client_error(
        "transact_write_items", service_error_code="ProvisionedThroughputExceededException"
    )
    ok(stubbed.stubber)
    # When a user registers
    registration = events_on(stubbed).register("e1", "ann")
    # Then it succeeded after four sends, all carrying one ClientRequestToken
    assert registration["userId"] == "ann"
    assert len(stubbed.tokens) == 4 and len(set(stubbed.tokens)) == 1


def test_the_cancellation_reasons_give_the_exact_answer(stubbed):
    member = {"eventId": "e1", "sk": "REG#ann", "userId": "ann"}
    # Given: the event is full / the user holds a seat (and it is full) / no event at all
    cancelled(stubbed.stubber, reason("ConditionalCheckFailed", EVENT), reason("None"))
    cancelled(
        stubbed.stubber,
        reason("ConditionalCheckFailed", EVENT),
        reason("ConditionalCheckFailed", member),
    )
    cancelled(stubbed.stubber, reason("ConditionalCheckFailed"), reason("None"))
    events = events_on(stubbed)
    # Then each is told apart, with no retry of a failed condition (one send each)
    with pytest.raises(EventFull) as full:
        events.register("e1", "bob")
    assert full.value.details == {"capacity": 2, "registered": 2}
    with pytest.raises(AlreadyRegistered):
        events.register("e1", "ann")
    with pytest.raises(NotFound):
        events.register("e1", "cy")
    assert len(stubbed.tokens) == 3


def test_endless_conflicts_end_in_a_clean_503_not_a_500(stubbed, moto_env):
    # Given a database that answers every transaction with a conflict
    for _ in range(NO_WAIT.attempts):
        cancelled(stubbed.stubber, reason("TransactionConflict"), reason("None"))
    events_handler.events.set(events_on(stubbed))
    try:
        # When a registration comes in over HTTP
        response = events_handler.handler(
            proxy_event(
                "POST",
                "/events/{eventId}/registrations",
                "/events/e1/registrations",
                body=json.dumps({"userId": "ann"}),
                params={"eventId": "e1"},
            ),
            None,
        )
    finally:
        events_handler.events.set(None)
    # Then the client is told to retry later
    assert response["statusCode"] == 503
    assert json.loads(response["body"])["error"] == "THROTTLED"
    assert response["headers"]["Retry-After"] == "1"


def test_the_decider_retries_a_conflict_and_then_accepts(stubbed):
    # Given a conflict on the first try of the accept transaction
    cancelled(stubbed.stubber, reason("TransactionConflict"), reason("None"), reason("None"))
    ok(stubbed.stubber)
    requests = RegistrationRequests(
        client=stubbed, table="requests", events=events_on(stubbed), backoff=NO_WAIT
    )
    # When the request is decided
    decision = requests.decide("e1", "r1", "ann")
    # Then it is accepted after one resend with the same token
    assert decision is not None and decision.status == ACCEPTED
    assert len(stubbed.tokens) == 2 and len(set(stubbed.tokens)) == 1


def test_the_decider_treats_its_own_failed_pending_check_as_already_decided(stubbed):
    # Given a redelivery: the request is no longer PENDING (and its registration exists)
    cancelled(
        stubbed.stubber,
        reason("None"),
        reason("ConditionalCheckFailed", {"eventId": "e1", "sk": "REG#ann"}),
        reason("ConditionalCheckFailed", {"status": "ACCEPTED"}),
    )
    requests = RegistrationRequests(
        client=stubbed, table="requests", events=events_on(stubbed), backoff=NO_WAIT
    )
    # Then deciding again does nothing (no reject write is sent: the stubber has nothing queued)
    assert requests.decide("e1", "r1", "ann") is None
