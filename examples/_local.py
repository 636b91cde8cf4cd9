"""Shared by the examples: a DynamoDB client and a table to play with.

The client is plain boto3. Against DynamoDB Local, set ``AWS_ENDPOINT_URL_DYNAMODB`` (boto3 reads
it) and any credentials; ``make examples`` does that for you.
"""

from __future__ import annotations

import uuid
from typing import Any

import boto3


def client() -> Any:
    return boto3.client("dynamodb", region_name="us-east-1")


def create_table(
    ddb: Any,
    prefix: str,
    key: str,
    sort_key: str | None = None,
    index: tuple[str, str, str] | None = None,
) -> str:
    """A fresh on-demand table with string keys (``index``: name, partition, numeric sort)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    attributes = [{"AttributeName": key, "AttributeType": "S"}]
    schema = [{"AttributeName": key, "KeyType": "HASH"}]
    if sort_key:
        attributes.append({"AttributeName": sort_key, "AttributeType": "S"})
        schema.append({"AttributeName": sort_key, "KeyType": "RANGE"})
    extra: dict[str, Any] = {}
    if index:
        index_name, partition, sort = index
        attributes += [
            {"AttributeName": partition, "AttributeType": "S"},
            {"AttributeName": sort, "AttributeType": "N"},
        ]
        extra["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index_name,
                "KeySchema": [
                    {"AttributeName": partition, "KeyType": "HASH"},
                    {"AttributeName": sort, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ]
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=attributes,
        KeySchema=schema,
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    ddb.get_waiter("table_exists").wait(TableName=name)
    return name
