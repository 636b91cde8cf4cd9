"""Quick start: the installed wheel alone, against DynamoDB Local (or AWS).

What a first program needs: a low-level boto3 client with the settings the library expects
(``retry.client_config()``: botocore's own retries off, because the library decides what may be
retried), a table shaped for the primitive, and the primitive. Nothing else of this repository is
imported. The endpoint comes from ``AWS_ENDPOINT_URL_DYNAMODB`` (boto3 reads it); without it the
client talks to AWS in ``AWS_REGION``.
"""

from __future__ import annotations

import os
import uuid

import boto3

from turnstile_ddb import lease, retry, versioned

ddb = boto3.client(
    "dynamodb",
    region_name=os.environ.get("AWS_REGION", "us-east-1"),
    config=retry.client_config(),
)


def create_table(name: str, key: str) -> str:
    """An on-demand table with one string partition key, ready to use."""
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.get_waiter("table_exists").wait(TableName=name)
    return name


suffix = uuid.uuid4().hex[:8]
accounts = create_table(f"quickstart-accounts-{suffix}", "id")
locks = create_table(f"quickstart-leases-{suffix}", "resource")  # Leases' default key name

# A versioned update: read, decide, write only if the version is still the one read.
written = versioned.update_versioned(
    ddb,
    table=accounts,
    key={"id": "alice"},
    decide=lambda item: {"balance": (item or {}).get("balance", 0) + 10},
    backoff=retry.Backoff(),
    conflicts=retry.Backoff(attempts=10),
)

# A lease with a fencing token: one holder at a time, and every holder has a larger fence.
leases = lease.Leases(ddb, locks)
held = leases.acquire("report-42", owner="worker-a", ttl_ms=10_000)
try:
    leases.acquire("report-42", owner="worker-b", ttl_ms=10_000)
    raise SystemExit("a held lease must refuse a second owner")
except lease.Held:
    pass
leases.release(held)

for name in (accounts, locks):
    ddb.delete_table(TableName=name)
print(f"balance version {written.item['version']}; lease fence {held.fence}, released")
