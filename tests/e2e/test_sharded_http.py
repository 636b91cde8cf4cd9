"""Sharded products and events over HTTP, served by the functions as deployed.

The sharded paths read their shards with ``BatchGetItem`` (``turnstile_ddb.sharded``). DynamoDB
Local
enforces no IAM, so only the workers' policy check can tell whether the functions' roles allow
that read: before ``infra.access`` (then ``service.access``) granted ``dynamodb:BatchGetItem``
these answered 500.
"""

from __future__ import annotations

from local.pump import StreamPump

DECIDER = "service.handlers.registration_consumer.handler"


def test_a_sharded_products_get_and_purchase_succeed(api_url, unique, admin, alice):
    # Given a product whose stock is spread over 4 shards
    created = admin.post(
        f"{api_url}/products",
        json={"productId": unique, "name": "Drop", "stock": 10, "shards": 4},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    # When alice reads it, buys 2 and reads it again
    before = alice.get(f"{api_url}/products/{unique}", timeout=30)
    bought = alice.post(f"{api_url}/products/{unique}/purchases", json={"quantity": 2}, timeout=30)
    after = alice.get(f"{api_url}/products/{unique}", timeout=30)
    # Then every answer is the contract's, and the shards' sum moved by exactly 2
    assert before.status_code == 200, before.text
    assert bought.status_code == 201, bought.text
    assert after.status_code == 200, after.text
    assert (before.json()["stock"], after.json()["stock"]) == (10, 8)
    assert bought.json()["shard"] in range(4)


def test_a_sharded_events_registration_succeeds(api_url, unique, admin, alice):
    # Given an event whose 10 seats are spread over 4 shards
    created = admin.post(
        f"{api_url}/events",
        json={"eventId": unique, "name": "Launch", "capacity": 10, "shards": 4},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    # When alice registers
    seat = alice.post(f"{api_url}/events/{unique}/registrations", json={}, timeout=30)
    # Then she holds a seat, and the event counts it
    assert seat.status_code == 201, seat.text
    assert seat.json()["userId"] == alice.sub
    event = alice.get(f"{api_url}/events/{unique}", timeout=30)
    assert event.status_code == 200, event.text
    assert event.json()["registered"] == 1


def test_a_sharded_events_registration_request_is_accepted_by_the_decider(
    api_url, unique, admin, alice, ddb, streams, tables, functions
):
    # Given a sharded event and alice's registration request
    admin.post(
        f"{api_url}/events",
        json={"eventId": unique, "name": "Async", "capacity": 3, "shards": 2},
        timeout=30,
    )
    asked = alice.post(f"{api_url}/events/{unique}/registration-requests", json={}, timeout=30)
    assert asked.status_code == 202, asked.text
    # When the stream is pumped through the decider function (its worker, its role)
    pump = StreamPump(
        dynamodb=ddb,
        streams=streams,
        table=tables["registration_requests"],
        handler=functions[DECIDER],
    )
    pump.drain(timeout=300)
    # Then the request is accepted and nothing was given up on
    decided = alice.get(f"{api_url}{asked.headers['Location']}", timeout=30).json()
    assert decided["status"] == "ACCEPTED", decided
    assert pump.dead_letters == []


def test_an_adaptive_products_and_events_requests_succeed_with_the_resizer_built(
    api_url, unique, admin, alice
):
    # Given an adaptive product and an adaptive event (one shard each; the functions build their
    # resizer, whose lease is on the leases table, with the first request)
    product = admin.post(
        f"{api_url}/products",
        json={"productId": unique, "name": "Drop", "stock": 10, "adaptive": True},
        timeout=30,
    )
    event = admin.post(
        f"{api_url}/events",
        json={"eventId": unique, "name": "Launch", "capacity": 10, "adaptive": True},
        timeout=30,
    )
    assert (product.status_code, event.status_code) == (201, 201), product.text + event.text
    # When alice buys 2, registers and cancels
    bought = alice.post(f"{api_url}/products/{unique}/purchases", json={"quantity": 2}, timeout=30)
    seat = alice.post(f"{api_url}/events/{unique}/registrations", json={}, timeout=30)
    gone = alice.delete(f"{api_url}/events/{unique}/registrations/{alice.sub}", timeout=30)
    # Then each is answered as the contract says, and the counts moved exactly
    assert (bought.status_code, seat.status_code, gone.status_code) == (201, 201, 204)
    after = alice.get(f"{api_url}/products/{unique}", timeout=30).json()
    assert (after["stock"], after["adaptive"]) == (8, True)
    assert alice.get(f"{api_url}/events/{unique}", timeout=30).json()["registered"] == 0
