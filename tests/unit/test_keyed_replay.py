"""The service's Idempotency-Key answers through the real products handler on moto: the store
keeps an opaque answer that the service shapes as ``{statusCode, body, headers}``, and a record
written by turnstile-ddb 0.3 (``statusCode``, ``body``, ``headers`` attributes) replays the same."""

from __future__ import annotations

import json
from typing import Any

from service.handlers import products
from tests.helpers import keyed_post, scan_all


def post(body: dict[str, Any], key: str) -> tuple[int, dict[str, Any], Any]:
    response = products.handler(keyed_post("/products", {}, body, key), None)
    return response["statusCode"], response.get("headers") or {}, json.loads(response["body"])


def test_a_record_in_the_old_shape_replays_like_the_new_one(moto_ddb, moto_tables):
    # Given a keyed create, stored by this version
    body = {"productId": "p-old", "name": "n", "stock": 3}
    status, headers, first = post(body, "key-old-1")
    assert status == 201 and "Idempotent-Replayed" not in headers
    table = moto_tables["idempotency"]
    (record,) = [r for r in scan_all(moto_ddb, table) if r.get("status") == {"S": "COMPLETED"}]
    stored = json.loads(record["answer"]["S"])
    assert stored == {
        "statusCode": 201,
        "body": first,
        "headers": {"Location": "/products/p-old", "ETag": headers["ETag"]},
    }
    # When the same record is rewritten as turnstile-ddb 0.3 wrote it
    old = {k: v for k, v in record.items() if k != "answer"}
    old["statusCode"] = {"N": "201"}
    old["body"] = {"S": json.dumps(first)}
    old["headers"] = {"S": json.dumps(stored["headers"])}
    moto_ddb.put_item(TableName=table, Item=old)
    # Then a retry replays the first answer: status, body, Location and ETag
    again = post(body, "key-old-1")
    assert again[0] == 201 and again[2] == first
    assert again[1]["Location"] == "/products/p-old"
    assert again[1]["ETag"] == headers["ETag"]
    assert again[1]["Idempotent-Replayed"] == "true"
