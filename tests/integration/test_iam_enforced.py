"""The role policies as synthesized, enforced in-process on DynamoDB Local.

Domain code takes a client carrying a function's policy (``role(name).attach``); handlers called
through ``invoke`` act as their function on the wired clients. A copy of a policy without one
action denies exactly that call, and the handler then answers as the deployed function would.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local import iam
from service.domain.errors import DomainError
from service.domain.events import Events
from service.domain.products import Products
from service.handlers import products as products_handler
from tests.helpers import invoke, proxy_event
from turnstile_ddb import errors, retry


def test_a_sharded_product_read_works_under_the_products_role_and_not_without_batch_get(
    dynamodb_local: Any, tables: Any, role: Any, unique: str
) -> None:
    # Given a sharded product written by the products function, under its role
    policy = role("products")
    client = policy.attach(dynamodb_local.client(config=retry.client_config()))
    Products(client=client, table=tables["products"]).create(unique, "Drop", 8, shards=4)
    # When it is read under the role, and under a copy of the role without BatchGetItem
    product = Products(client=client, table=tables["products"]).get(unique)
    reduced = policy.without("dynamodb:BatchGetItem").attach(dynamodb_local.client())
    with pytest.raises(errors.AwsRefused) as denied:
        Products(client=reduced, table=tables["products"]).get(unique)
    # Then the role reads the shards' sum, the copy is denied in AWS's words
    assert product["stock"] == 8
    assert denied.value.code == "AccessDeniedException"
    message = denied.value.aws_message
    assert message.startswith(f"User: {policy.principal} is not authorized to perform: ")
    assert "dynamodb:BatchGetItem on resource: arn:aws:dynamodb:" in message
    assert denied.value.operation == "BatchGetItem"
    assert isinstance(denied.value.cause, ClientError)


def test_a_sharded_event_registration_works_under_the_events_role(
    dynamodb_local: Any, tables: Any, role: Any, unique: str
) -> None:
    client = role("events").attach(dynamodb_local.client(config=retry.client_config()))
    events = Events(client=client, table=tables["events"])
    events.create(unique, "Launch", 4, shards=2)
    events.register(unique, "ann")
    assert events.get(unique)["registered"] == 1


def test_the_handler_answers_as_on_aws_when_its_role_lacks_an_action(
    wired: Any, ddb: Any, tables: Any, role: Any, unique: str
) -> None:
    # Given a sharded product, and the products handler under its role as synthesized
    Products(client=ddb, table=tables["products"]).create(unique, "Drop", 6, shards=3)
    event = proxy_event(
        "GET", "/products/{productId}", f"/products/{unique}", params={"productId": unique}
    )
    status, _, body = invoke(products_handler.handler, event)
    assert (status, body["stock"]) == (200, 6)
    # When the same request runs under a copy of the role without BatchGetItem
    with iam.acting_as(role("products").without("dynamodb:BatchGetItem")):
        response = products_handler.handler(event, None)
    # Then the function answers what it answers on AWS for a denied call: a 500, nothing more
    assert response["statusCode"] == 500
    assert json.loads(response["body"])["error"] == "INTERNAL"


def test_the_decider_reads_a_full_sharded_events_shards_at_once(
    dynamodb_local: Any, ddb: Any, tables: Any, role: Any, unique: str
) -> None:
    # Given a sharded event whose every seat is taken
    Events(client=ddb, table=tables["events"]).create(unique, "Full", 2, shards=2)
    for user in ("ann", "bob"):
        Events(client=ddb, table=tables["events"]).register(unique, user)
    decider = role("decider")
    granted = decider.attach(dynamodb_local.client(config=retry.client_config()))
    reduced = decider.without("dynamodb:BatchGetItem").attach(dynamodb_local.client())
    # When the decider seats one more: it fails over to the other shards (one BatchGetItem)
    with pytest.raises(DomainError) as full:
        Events(client=granted, table=tables["events"]).register(unique, "cy")
    with pytest.raises(errors.AwsRefused) as denied:
        Events(client=reduced, table=tables["events"]).register(unique, "cy")
    # Then under its role it learns the event is full; without BatchGetItem it is denied
    assert full.value.code == "EVENT_FULL"
    assert denied.value.code == "AccessDeniedException"
