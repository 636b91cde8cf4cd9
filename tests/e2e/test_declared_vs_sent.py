"""What the server sends is what the OpenAPI document declares, both ways (issue 40, item 2).

One walk calls every route against the local stack (the session's, started once): successes,
replays, and every refusal a client can bring about. Each answer is recorded (operation, status,
body, header names), then:

* **sent, not declared, fails**: a status the operation does not declare, a body that does not
  validate against the declared schema (``jsonschema``; answers and error bodies declare
  ``additionalProperties: false``), an error code outside the operation's enum, a header the
  response does not declare;
* **declared, never sent, fails**: every declared success field and header, every detail each
  recorded error code declares (``service.api.errors.details_of``), every declared header of an
  exercised error status (``Retry-After`` where a recorded code says when to retry), and every
  declared error code but those below.

Not exercised, so not required to be sent (each declared code of an operation is, except these):

* ``INTERNAL`` (500): a bug; nothing a client sends may cause it.
* ``THROTTLED``, ``OUTCOME_UNKNOWN`` (503), ``PAYMENT_FAILED`` (502): outages of DynamoDB, the
  identity provider or the payment provider; the local stack has none (tests/integration injects
  them). ``HOLD_LAPSED`` (503): a reservation slower than its own hold.
* ``CONFLICT``, ``IDEMPOTENCY_IN_PROGRESS`` (409): lost races between concurrent requests (the
  integration and concurrency tests have them; here they would be timing).
* ``FORBIDDEN`` on routes open to any signed-in caller: the policy admits everyone there (a 403
  comes from the gateway, deployed).
* ``LOCKED``, ``LOCK_LOST`` on ``top_up_wallet``: the wallet's lease held by a concurrent top-up,
  or lost in the middle of one.
* ``Retry-After`` on a refusal of a route taking an Idempotency-Key whose code says nothing of
  retrying: sent only when the claim could not be given back (the idempotency store down).

Transport headers (``Content-Type``, ``Content-Length``, ``Date``, ``Server``, ``Connection``) are
the HTTP layer's, not the API's: left out on both sides.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # (no stubs installed)
import pytest
import requests

from local.pump import StreamPump
from service import policy
from service.api import routes
from service.api.errors import details_of
from tests.helpers import Person
from turnstile_ddb import codec

DECIDER = "service.handlers.registration_consumer.handler"
TRANSPORT = {"content-type", "content-length", "date", "server", "connection"}
NOT_EXERCISED = {
    "INTERNAL",
    "THROTTLED",
    "OUTCOME_UNKNOWN",
    "PAYMENT_FAILED",
    "HOLD_LAPSED",
    "CONFLICT",
    "IDEMPOTENCY_IN_PROGRESS",
}
NOT_EXERCISED_ON = {("top_up_wallet", "LOCKED"), ("top_up_wallet", "LOCK_LOST")}
BY_OPERATION = {route.operation: route for route in routes.ROUTES}


@dataclass(frozen=True)
class Sent:
    operation: str
    status: int
    body: Any
    headers: frozenset[str]

    @property
    def code(self) -> str | None:
        return self.body.get("error") if self.status >= 400 else None


class Walk:
    """Calls routes by operation id and records every answer."""

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url
        self.sent: list[Sent] = []
        self.surprises: list[str] = []  # answers with another status than the walk expected

    def call(self, who: Person | requests.Session, operation: str, *ids: str, **kwargs: Any) -> Any:
        route = BY_OPERATION[operation]
        path = route.path
        for name, value in zip(route.params, ids, strict=True):
            path = path.replace("{" + name + "}", value)
        response = who.request(route.method, self.api_url + path, timeout=60, **kwargs)
        body = response.json() if response.content else None
        headers = frozenset(name.lower() for name in response.headers) - TRANSPORT
        self.sent.append(Sent(operation, response.status_code, body, headers))
        return response

    def expect(self, status: int, who: Any, operation: str, *ids: str, **kwargs: Any) -> Any:
        response = self.call(who, operation, *ids, **kwargs)
        if response.status_code != status:
            self.surprises.append(f"{operation} {status}: {response.status_code} {response.text}")
        return response.json() if response.content else None


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def valid_body(operation: str) -> dict[str, Any]:
    """A body the route's model accepts (what it then does with it is not reached)."""
    bodies: dict[str, dict[str, Any]] = {
        "create_product": {"productId": new_id("p"), "name": "n", "stock": 1},
        "update_product": {"name": "n"},
        "restock": {"units": 1},
        "purchase": {"quantity": 1},
        "acquire_lock": {"ttlSeconds": 5},
        "renew_lock": {"fence": 1, "ttlSeconds": 5},
        "release_lock": {"fence": 1},
        "top_up_wallet": {"amount": 1},
        "create_inventory": {"sku": new_id("s"), "units": 1},
        "reserve": {"quantity": 1},
        "create_event": {"eventId": new_id("e"), "name": "n", "capacity": 1},
    }
    return bodies.get(operation, {})


def with_body(route: routes.Route) -> dict[str, Any]:
    """The keyword arguments of a request the route's model accepts (body and If-Match)."""
    if route.body is None:
        return {}
    headers = {"If-Match": "*"} if "If-Match" in route.headers else {}
    return {"json": valid_body(route.operation), "headers": headers}


def walk_envelopes(walk: Walk, admin: Person) -> None:
    """The refusals every route shares: no token, a malformed id or body, a body where none is
    taken, an Idempotency-Key it does not take, a malformed one, a reused one."""
    anonymous = requests.Session()
    for route in routes.ROUTES:
        ids = ["x"] * len(route.params)
        walk.expect(401, anonymous, route.operation, *ids)
        headers = {"If-Match": '"1"'} if "If-Match" in route.headers else {}
        if route.params:  # an id the function's route pattern does not match
            walk.expect(404, admin, route.operation, "\u00d7", *ids[1:], **with_body(route))
        if route.body is None:
            walk.expect(400, admin, route.operation, "bad id", *ids[1:])
            walk.expect(400, admin, route.operation, *ids, json={"x": 1})
            continue
        wrong = {"not-a-field": 1}
        walk.expect(400, admin, route.operation, *ids, json=wrong, headers=headers)
        raw = {**headers, "Content-Type": "application/json"}
        walk.expect(400, admin, route.operation, *ids, data="{", headers=raw)
        walk.expect(413, admin, route.operation, *ids, data="x" * 20_000, headers=raw)
        plain = {**headers, "Content-Type": "text/plain"}
        walk.expect(415, admin, route.operation, *ids, data="{}", headers=plain)
        # a malformed key on a keyed route; any key on another (refused before anything runs)
        keyed = {**headers, "Idempotency-Key": "a b" if route.idempotent else "k"}
        walk.expect(400, admin, route.operation, *ids, json=valid_body(route.operation),
                    headers=keyed)  # fmt: skip


def walk_products(walk: Walk, admin: Person, alice: Person) -> None:
    # one item, two shards, and one shard whose count follows the load (adaptive)
    for extra in ({"shards": 1}, {"shards": 2}, {"adaptive": True}):
        product = new_id("p")
        body = {"productId": product, "name": "Lamp", "stock": 10, **extra}
        key = {"Idempotency-Key": new_id("k")}
        walk.expect(201, admin, "create_product", json=body, headers=key)
        walk.expect(201, admin, "create_product", json=body, headers=key)  # replayed
        walk.expect(422, admin, "create_product", json={**body, "stock": 9}, headers=key)
        walk.expect(409, admin, "create_product", json=body)
        walk.expect(403, alice, "create_product", json={**body, "productId": new_id("p")})
        walk.expect(200, alice, "get_product", product)
        walk.expect(200, admin, "update_product", product, json={"name": "L"},
                    headers={"If-Match": '"1"'})  # fmt: skip
        walk.expect(412, admin, "update_product", product, json={"name": "M"},
                    headers={"If-Match": '"1"'})  # fmt: skip
        walk.expect(428, admin, "update_product", product, json={"name": "M"})
        walk.expect(403, alice, "update_product", product, json={"name": "M"},
                    headers={"If-Match": "*"})  # fmt: skip
        walk.expect(200, admin, "restock", product, json={"units": 2})
        walk.expect(403, alice, "restock", product, json={"units": 2})
        buy = {"quantity": 1}
        walk.expect(201, alice, "purchase", product, json=buy, headers=key)
        walk.expect(201, alice, "purchase", product, json=buy, headers=key)  # replayed
        walk.expect(422, alice, "purchase", product, json={"quantity": 2}, headers=key)
        walk.expect(409, alice, "purchase", product, json={"quantity": 1000})
    none = new_id("none")
    walk.expect(404, admin, "get_product", none)
    walk.expect(404, admin, "update_product", none, json={"name": "N"}, headers={"If-Match": "*"})
    walk.expect(404, admin, "restock", none, json={"units": 1})
    walk.expect(404, admin, "purchase", none, json={"quantity": 1})


def queue_a_waiter(ddb: Any, table: str, resource: str) -> None:
    """A waiter elsewhere takes a ticket at a free lock, as turnstile_ddb.lease_queue's ticket
    write does, and is not served yet: until it comes (or the queue goes stale, seconds later),
    a plain acquisition is refused as QUEUED, without racing anyone."""
    ddb.update_item(
        TableName=table,
        Key=codec.encode_item({"resource": resource}),
        UpdateExpression="ADD tickets :one SET head = if_not_exists(head, :one), "
        "fence = if_not_exists(fence, :zero), expiresAt = if_not_exists(expiresAt, :zero), "
        "queuedAt = :now",
        ExpressionAttributeValues=codec.values(one=1, zero=0, now=int(time.time() * 1000)),
    )


def walk_locks(walk: Walk, alice: Person, bob: Person, ddb: Any, leases: str) -> None:
    resource = new_id("r")
    mine = {"owner": alice.sub, "ttlSeconds": 30}
    held = walk.expect(201, alice, "acquire_lock", resource, json=mine)
    walk.expect(409, bob, "acquire_lock", resource, json={"ttlSeconds": 30})
    walk.expect(409, bob, "acquire_lock", resource, json={"ttlSeconds": 30, "waitMs": 0})
    walk.expect(403, alice, "acquire_lock", resource, json={**mine, "owner": bob.sub})
    lease = {"owner": alice.sub, "fence": held["fence"]}
    walk.expect(200, alice, "renew_lock", resource, json={**lease, "ttlSeconds": 30})
    stale = {"owner": alice.sub, "fence": held["fence"] + 5}
    walk.expect(409, alice, "renew_lock", resource, json={**stale, "ttlSeconds": 30})
    walk.expect(403, alice, "renew_lock", resource,
                json={**lease, "owner": bob.sub, "ttlSeconds": 30})  # fmt: skip
    walk.expect(409, alice, "release_lock", resource, json=stale)
    walk.expect(403, alice, "release_lock", resource, json={**lease, "owner": bob.sub})
    walk.expect(204, alice, "release_lock", resource, json=lease)
    walk.expect(201, alice, "acquire_lock", resource, json={**mine, "waitMs": 1000})  # queued
    queued = new_id("r")
    queue_a_waiter(ddb, leases, queued)
    refused = walk.expect(409, bob, "acquire_lock", queued, json={"ttlSeconds": 30})
    if (refused or {}).get("reason") != "QUEUED" or refused.get("waiting") != 1:
        walk.surprises.append(f"acquire_lock of a queued lock: {refused}")


def walk_wallets(walk: Walk, admin: Person, alice: Person, bob: Person) -> None:
    wallet = new_id("w")
    key = {"Idempotency-Key": new_id("k")}
    walk.expect(201, alice, "top_up_wallet", wallet, json={"amount": 5}, headers=key)
    walk.expect(201, alice, "top_up_wallet", wallet, json={"amount": 5}, headers=key)
    walk.expect(422, alice, "top_up_wallet", wallet, json={"amount": 6}, headers=key)
    walk.expect(403, bob, "top_up_wallet", wallet, json={"amount": 5})
    walk.expect(200, alice, "get_wallet", wallet)
    walk.expect(403, bob, "get_wallet", wallet)
    walk.expect(404, admin, "get_wallet", new_id("none"))


def walk_inventory(walk: Walk, admin: Person, alice: Person, bob: Person) -> None:
    sku = new_id("s")
    walk.expect(201, admin, "create_inventory", json={"sku": sku, "units": 3})
    walk.expect(409, admin, "create_inventory", json={"sku": sku, "units": 4})
    walk.expect(403, alice, "create_inventory", json={"sku": new_id("s"), "units": 1})
    walk.expect(200, alice, "get_inventory", sku)
    walk.expect(200, admin, "count_inventory", sku)
    walk.expect(403, alice, "count_inventory", sku)
    held = walk.expect(201, alice, "reserve", sku, json={"quantity": 1})
    walk.expect(409, alice, "reserve", sku, json={"quantity": 3})
    walk.expect(403, bob, "confirm_reservation", sku, held["reservationId"])
    walk.expect(200, alice, "confirm_reservation", sku, held["reservationId"])
    walk.expect(409, alice, "release_reservation", sku, held["reservationId"])
    other = walk.expect(201, alice, "reserve", sku, json={"quantity": 1})
    walk.expect(403, bob, "release_reservation", sku, other["reservationId"])
    walk.expect(204, alice, "release_reservation", sku, other["reservationId"])
    walk.expect(404, alice, "confirm_reservation", sku, other["reservationId"])
    walk.expect(404, alice, "release_reservation", sku, other["reservationId"])
    # a hold that ended: its confirm is 409 EXPIRED, naming its units (the server's clock is
    # this machine's: once expiresAt is past, the hold has lapsed whenever the confirm runs)
    # (a hold of 1 s: one of 0.1 s could lapse before a reservation on a busy machine answered,
    # a 503 HOLD_LAPSED; a reserve refused anyway is a surprise the walk reports, not a KeyError)
    brief = walk.expect(201, alice, "reserve", sku, json={"quantity": 1, "holdSeconds": 1}) or {}
    if "expiresAt" in brief:
        time.sleep(max(0.0, brief["expiresAt"] / 1000 - time.time()) + 0.05)
        walk.expect(409, alice, "confirm_reservation", sku, brief["reservationId"])
    # a sku still being created (no creation worker runs here): its progress and when to retry
    big = new_id("s")
    walk.expect(201, admin, "create_inventory", json={"sku": big, "units": 5000})
    walk.expect(409, alice, "reserve", big, json={"quantity": 1})
    none = new_id("none")
    walk.expect(404, alice, "get_inventory", none)
    walk.expect(404, admin, "count_inventory", none)
    walk.expect(404, alice, "reserve", none, json={"quantity": 1})


def walk_events(walk: Walk, admin: Person, alice: Person, bob: Person, pump: StreamPump) -> None:
    sharded = new_id("e")
    walk.expect(201, admin, "create_event", json={"eventId": sharded, "name": "Fair",
                "capacity": 10, "shards": 2})  # fmt: skip
    walk.expect(200, alice, "get_event", sharded)
    adaptive = new_id("e")
    walk.expect(201, admin, "create_event", json={"eventId": adaptive, "name": "Expo",
                "capacity": 10, "adaptive": True})  # fmt: skip
    walk.expect(200, alice, "get_event", adaptive)
    event = new_id("e")
    body = {"eventId": event, "name": "Talk", "capacity": 1}
    key = {"Idempotency-Key": new_id("k")}
    walk.expect(201, admin, "create_event", json=body, headers=key)
    walk.expect(201, admin, "create_event", json=body, headers=key)
    walk.expect(422, admin, "create_event", json={**body, "capacity": 2}, headers=key)
    walk.expect(409, admin, "create_event", json=body)
    walk.expect(403, alice, "create_event", json={**body, "eventId": new_id("e")})
    walk.expect(200, alice, "get_event", event)
    walk.expect(201, alice, "register", event, json={}, headers=key)
    walk.expect(201, alice, "register", event, json={}, headers=key)
    walk.expect(422, alice, "register", event, json={"userId": "x"}, headers=key)
    walk.expect(409, alice, "register", event, json={})
    walk.expect(409, bob, "register", event, json={})
    walk.expect(403, alice, "register", event, json={"userId": bob.sub})
    walk.expect(200, alice, "list_user_registrations", alice.sub)
    walk.expect(403, bob, "list_user_registrations", alice.sub)
    walk.expect(403, bob, "unregister", event, alice.sub)
    walk.expect(204, alice, "unregister", event, alice.sub)
    walk.expect(404, alice, "unregister", event, alice.sub)
    # registration requests: two for the one seat, decided by the consumer (pumped here)
    asked = [
        walk.expect(202, who, "request_registration", event, json={}, headers=key)
        for who, key in ((alice, {"Idempotency-Key": new_id("k")}), (bob, {}))
    ]
    walk.expect(202, alice, "request_registration", event, json={},
                headers={"Idempotency-Key": "replayed"})  # fmt: skip
    walk.expect(202, alice, "request_registration", event, json={},
                headers={"Idempotency-Key": "replayed"})  # fmt: skip
    walk.expect(422, alice, "request_registration", event, json={"userId": "x"},
                headers={"Idempotency-Key": "replayed"})  # fmt: skip
    walk.expect(403, alice, "request_registration", event, json={"userId": bob.sub})
    pump.drain(timeout=300)
    for who, request in zip((alice, bob), asked, strict=True):
        walk.expect(200, who, "get_registration_request", event, request["requestId"])
    walk.expect(403, bob, "get_registration_request", event, asked[0]["requestId"])
    none = new_id("none")
    walk.expect(404, alice, "get_event", none)
    walk.expect(404, alice, "register", none, json={})
    walk.expect(404, alice, "request_registration", none, json={})
    walk.expect(404, alice, "get_registration_request", event, none)


@pytest.fixture(scope="module")
def walked(api_url, admin, alice, bob, ddb, streams, tables, functions) -> Walk:
    walk = Walk(api_url)
    walk_envelopes(walk, admin)
    walk_products(walk, admin, alice)
    walk_locks(walk, alice, bob, ddb, tables["leases"])
    walk_wallets(walk, admin, alice, bob)
    walk_inventory(walk, admin, alice, bob)
    pump = StreamPump(
        dynamodb=ddb,
        streams=streams,
        table=tables["registration_requests"],
        handler=functions[DECIDER],
    )
    walk_events(walk, admin, alice, bob, pump)
    return walk


@pytest.fixture(scope="module")
def recorded(walked: Walk) -> list[Sent]:
    return walked.sent


@pytest.fixture(scope="module")
def document(api_url) -> dict[str, Any]:
    found: dict[str, Any] = requests.get(f"{api_url}/openapi.json", timeout=30).json()
    return found


def declared(document: dict[str, Any], operation: str) -> dict[str, Any]:
    route = BY_OPERATION[operation]
    found: dict[str, Any] = document["paths"][route.path][route.method.lower()]["responses"]
    return found


def schema_of(document: dict[str, Any], response: dict[str, Any]) -> dict[str, Any] | None:
    content = (response.get("content") or {}).get("application/json")
    if content is None:
        return None
    return {**content["schema"], "components": document["components"]}


def component(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = document["components"]["schemas"][schema["$ref"].split("/")[-1]]
    return found


def test_every_route_is_walked_and_answers_as_the_walk_expects(walked):
    assert {sent.operation for sent in walked.sent} == set(BY_OPERATION)
    assert walked.surprises == [], "\n".join(walked.surprises)


def test_nothing_is_sent_that_the_document_does_not_declare(recorded, document):
    problems = []
    for sent in recorded:
        responses = declared(document, sent.operation)
        response = responses.get(str(sent.status))
        if response is None:
            problems.append(f"{sent.operation} {sent.status}: undeclared status {sent.body}")
            continue
        schema = schema_of(document, response)
        if schema is None and sent.body is not None:
            problems.append(f"{sent.operation} {sent.status}: a body where none is declared")
        elif schema is not None:
            errors = [
                e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(sent.body)
            ]
            if errors:
                problems.append(f"{sent.operation} {sent.status}: {errors} in {sent.body}")
        undeclared = sent.headers - {name.lower() for name in response.get("headers", {})}
        if undeclared:
            problems.append(f"{sent.operation} {sent.status}: undeclared headers {undeclared}")
    assert problems == [], "\n".join(problems)


def required_codes(document: dict[str, Any], operation: str) -> set[str]:
    """The codes the operation declares that the walk must bring about (module docstring)."""
    route = BY_OPERATION[operation]
    codes = {
        code
        for status, response in declared(document, operation).items()
        if int(status) >= 400
        for code in response["content"]["application/json"]["examples"]
    }
    codes -= NOT_EXERCISED | {code for op, code in NOT_EXERCISED_ON if op == operation}
    if policy.access_of(route) is policy.Access.ANY_CALLER:
        codes.discard("FORBIDDEN")
    return codes


def test_every_declared_code_field_and_header_is_sent(recorded, document):
    by_status: dict[tuple[str, int], list[Sent]] = defaultdict(list)
    by_code: dict[tuple[str, str], list[Sent]] = defaultdict(list)
    for sent in recorded:
        by_status[sent.operation, sent.status].append(sent)
        if sent.code is not None:
            by_code[sent.operation, sent.code].append(sent)
    missing = []
    for operation, route in BY_OPERATION.items():
        responses = declared(document, operation)
        # every declared code answered (but those the docstring names)
        answered = {code for op, code in by_code if op == operation}
        for code in sorted(required_codes(document, operation) - answered):
            missing.append(f"{operation}: code {code} never sent")
        # the success: every declared field and header sent by some answer
        answers = by_status.get((operation, route.status), [])
        success = responses[str(route.status)]
        schema = schema_of(document, success)
        fields = set(component(document, schema)["properties"]) if schema else set()
        sent_fields = {name for sent in answers for name in (sent.body or {})}
        for name in sorted(fields - sent_fields):
            missing.append(f"{operation} {route.status}: field {name} never sent")
        headers = {name.lower() for name in success.get("headers", {})}
        for name in sorted(headers - {h for sent in answers for h in sent.headers}):
            missing.append(f"{operation} {route.status}: header {name} never sent")
        # each recorded code: the details it declares, and Retry-After where it says to retry
        for (op, code), refusals in by_code.items():
            if op != operation:
                continue
            details = set(details_of(route.function, code))
            for name in sorted(details - {name for sent in refusals for name in sent.body}):
                missing.append(f"{operation} {code}: detail {name} never sent")
            for sent in refusals:
                if "retryAfterSeconds" in sent.body and "retry-after" not in sent.headers:
                    missing.append(f"{operation} {code}: retryAfterSeconds without Retry-After")
    assert missing == [], "\n".join(missing)
