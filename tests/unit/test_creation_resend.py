"""turnstile_ddb.creation on moto (API shape): a create that carries a token recognises its own
resend after a lost reply, and tells it from an item someone else created."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from moto import mock_aws

from turnstile_ddb import creation, errors, retry

TABLE = "things"


@pytest.fixture
def client(moto_env: dict[str, str]) -> Iterator[Any]:
    with mock_aws():
        made = boto3.client("dynamodb", region_name="us-east-1", config=retry.client_config())
        made.create_table(
            TableName=TABLE,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield made


class LosesFirstReply:
    """A client whose first ``put_item`` is applied but whose reply never arrives."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.puts = 0

    def put_item(self, **request: Any) -> Any:
        self.puts += 1
        answer = self.client.put_item(**request)
        if self.puts == 1:
            raise ReadTimeoutError(endpoint_url="http://dynamodb")
        return answer


def no_wait() -> retry.Backoff:
    return retry.Backoff(attempts=3, sleep=lambda _: None)


def create(client: Any, token: str | None, name: str = "first") -> creation.Created:
    return creation.create_if_absent(
        client,
        table=TABLE,
        item={"id": "t1", "name": name},
        key_attr="id",
        backoff=no_wait(),
        token=token,
    )


def test_a_resend_after_a_lost_reply_answers_created(client):
    # Given a client that applies the first put and loses its reply
    losing = LosesFirstReply(client)
    # When a create with a token is sent through it
    created = create(losing, "request-1")
    # Then it was resent, recognised its own item, and answers created (resent)
    assert losing.puts == 2
    assert created.resent
    assert created.item == {"id": "t1", "name": "first", creation.TOKEN: "request-1"}


def test_a_lost_reply_without_a_token_is_an_unknown_outcome(client):
    # Given the same lost reply, but a create that carries no token
    losing = LosesFirstReply(client)
    # Then it cannot tell its own item from someone else's, so it does not resend
    with pytest.raises(errors.OutcomeUnknown):
        create(losing, None)
    assert losing.puts == 1


def test_a_different_request_answers_already_exists(client):
    # Given an item created by one request
    first = create(client, "request-1")
    assert not first.resent
    # When another request creates the same key, then it is told the item exists, with the item
    with pytest.raises(creation.AlreadyExists) as exists:
        create(client, "request-2", name="second")
    assert exists.value.current == {"id": "t1", "name": "first", creation.TOKEN: "request-1"}


def test_the_same_request_again_answers_created_and_writes_nothing(client):
    create(client, "request-1")
    again = create(client, "request-1", name="changed")
    assert again.resent and again.item["name"] == "first"


def test_the_token_may_be_an_attribute_the_item_has_anyway(client):
    # Given creates identified by what they create (an attribute of the item), not by a request id
    def make(units: int) -> creation.Created:
        return creation.create_if_absent(
            client,
            table=TABLE,
            item={"id": "sku-1", "units": units},
            key_attr="id",
            backoff=no_wait(),
            token=units,
            token_attr="units",
        )

    # Then the same content again is found created, other content is someone else's item
    assert not make(5).resent
    assert make(5).resent
    with pytest.raises(creation.AlreadyExists):
        make(6)
    stored = client.get_item(TableName=TABLE, Key={"id": {"S": "sku-1"}})["Item"]
    assert set(stored) == {"id", "units"}  # no extra attribute


def test_an_item_whose_token_attribute_disagrees_is_refused_before_sending(client):
    with pytest.raises(ValueError, match="token"):
        creation.create_if_absent(
            client,
            table=TABLE,
            item={"id": "x", "createdBy": "someone"},
            key_attr="id",
            backoff=no_wait(),
            token="me",
        )
