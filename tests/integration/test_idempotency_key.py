"""Idempotency-Key on POST: a retry gets the first answer, never a second effect."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from service.domain.products import Products
from service.handlers import products
from tests.helpers import invoke, proxy_event, purchase, scan_all, stock_of
from turnstile_ddb import codec


def test_a_retried_purchase_returns_the_first_receipt(wired, ddb, tables, unique):
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    first = invoke(products.handler, purchase(unique, {"quantity": 2}, key=f"a-{unique}"))
    second = invoke(products.handler, purchase(unique, {"quantity": 2}, key=f"a-{unique}"))
    assert first[0] == second[0] == 201
    assert second[2] == first[2]
    assert stock_of(ddb, tables, unique) == (3, 2)


def test_an_out_of_stock_refusal_is_not_stored_so_a_retry_buys_after_restock(
    wired, ddb, tables, unique
):
    # Given an empty product and a refused keyed purchase
    Products(client=ddb, table=tables["products"]).create(unique, "P", 0)
    refused = invoke(products.handler, purchase(unique, {"quantity": 1}, key=f"b-{unique}"))
    assert (refused[0], refused[2]["error"]) == (409, "OUT_OF_STOCK")
    # When stock arrives and the client retries with the same key
    Products(client=ddb, table=tables["products"]).update(unique, 1, {"stock": 5})
    again = invoke(products.handler, purchase(unique, {"quantity": 1}, key=f"b-{unique}"))
    # Then the retry runs: the refusal changed nothing, so it was not the key's answer
    assert again[0] == 201 and "Idempotent-Replayed" not in again[1]
    assert stock_of(ddb, tables, unique) == (4, 3)


def test_the_same_key_for_a_different_request_is_422(wired, ddb, tables, unique):
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    invoke(products.handler, purchase(unique, {"quantity": 1}, key=f"c-{unique}"))
    status, _, body = invoke(products.handler, purchase(unique, {"quantity": 3}, key=f"c-{unique}"))
    assert (status, body["error"]) == (422, "IDEMPOTENCY_KEY_REUSED")
    assert stock_of(ddb, tables, unique) == (4, 2)


def test_a_retry_that_writes_the_same_body_differently_is_the_same_request(
    wired, ddb, tables, unique
):
    # Given a keyed purchase of one unit
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    first = invoke(products.handler, purchase(unique, {"quantity": 1}, key=f"q-{unique}"))
    assert first[0] == 201
    # When retries send the same request written otherwise: 1.0 is the integer 1 by the
    # contract, and "atomic" is the strategy a body without one gets
    for body in ({"quantity": 1.0}, {"strategy": "atomic", "quantity": 1}):
        again = invoke(products.handler, purchase(unique, body, key=f"q-{unique}"))
        # Then each gets the first answer, replayed, and one unit was sold
        assert (again[0], again[1].get("Idempotent-Replayed")) == (201, "true"), (body, again)
        assert again[2] == first[2]
    assert stock_of(ddb, tables, unique) == (4, 2)


def test_a_malformed_key_is_400(wired, ddb, tables, unique):
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    status, _, body = invoke(products.handler, purchase(unique, {"quantity": 1}, key="a b"))
    assert (status, body["error"]) == (400, "BAD_REQUEST")
    assert stock_of(ddb, tables, unique) == (5, 1)


def test_twenty_concurrent_requests_with_one_key_buy_once(wired, ddb, tables, unique):
    # Given a product and 20 threads sending the same keyed purchase at the same moment
    Products(client=ddb, table=tables["products"]).create(unique, "P", 50)
    barrier = threading.Barrier(20)

    def send(_: int):
        barrier.wait()
        return invoke(products.handler, purchase(unique, {"quantity": 1}, key=f"d-{unique}"))

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(send, range(20)))
    # Then one unit was sold; every 201 is the same receipt; the rest were told to retry shortly
    statuses = Counter(status for status, _, _ in answers)
    assert set(statuses) <= {201, 409}
    receipts = {a[2]["purchaseId"] for a in answers if a[0] == 201}
    assert len(receipts) == 1
    assert all(a[2]["error"] == "IDEMPOTENCY_IN_PROGRESS" for a in answers if a[0] == 409)
    assert stock_of(ddb, tables, unique) == (49, 2)


def test_a_keyed_create_is_replayed_not_refused(wired, ddb, tables, unique):
    event = proxy_event(
        "POST",
        "/products",
        "/products",
        body=f'{{"productId": "{unique}", "name": "P", "stock": 1}}',
        headers={"Content-Type": "application/json", "Idempotency-Key": f"e-{unique}"},
    )
    first, second = invoke(products.handler, event), invoke(products.handler, event)
    assert first[0] == second[0] == 201 and first[2] == second[2]


def test_an_idempotency_store_outage_is_503_not_500_and_buys_nothing(
    wired, ddb, tables, dynamodb_local, unique
):
    from tests.helpers import Faults
    from turnstile_ddb import retry

    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    client = dynamodb_local.client(config=retry.client_config())
    Faults(client).throttle("PutItem", 100)  # the claim (a conditional put) cannot be written
    wired(client)
    status, headers, body = invoke(
        products.handler, purchase(unique, {"quantity": 1}, key=f"f-{unique}")
    )
    assert (status, body["error"], headers["Retry-After"]) == (503, "THROTTLED", "1")
    assert stock_of(ddb, tables, unique) == (5, 1)


def test_a_committed_create_is_answered_even_if_its_answer_cannot_be_stored(
    wired, ddb, tables, dynamodb_local, unique
):
    from tests.helpers import Faults
    from turnstile_ddb import retry

    # Given storing answers fails (the completion is an UpdateItem; the create is a PutItem)
    client = dynamodb_local.client(config=retry.client_config())
    Faults(client).throttle("UpdateItem", 100)
    wired(client)
    event = proxy_event(
        "POST",
        "/products",
        "/products",
        body=f'{{"productId": "{unique}", "name": "P", "stock": 1}}',
        headers={"Content-Type": "application/json", "Idempotency-Key": f"g-{unique}"},
    )
    # When a keyed create commits
    status, _, body = invoke(products.handler, event)
    # Then the client hears that it happened, not a 5xx for a write that was applied
    assert status == 201 and body["productId"] == unique
    assert stock_of(ddb, tables, unique) == (1, 1)


def test_a_stored_answer_expires_by_the_ttl_attribute_the_stack_gives_the_table(
    wired, ddb, tables, unique
):
    # Given the idempotency table as the stack declares it (its TTL attribute), and a keyed
    # purchase whose answer is stored
    table = tables["idempotency"]
    ttl = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]["AttributeName"]
    Products(client=ddb, table=tables["products"]).create(unique, "P", 5)
    started = time.time()
    invoke(products.handler, purchase(unique, {"quantity": 1}, key=f"ttl-{unique}"))
    # Then the record carries its expiry under that attribute (a day ahead), so TTL cleans it up
    records = [
        item
        for item in (codec.decode_item(raw) or {} for raw in scan_all(ddb, table))
        if str(item["id"]).endswith(f"#ttl-{unique}")
    ]
    assert len(records) == 1
    assert records[0]["status"] == "COMPLETED"
    assert started + 23 * 3600 < records[0][ttl] < time.time() + 25 * 3600
