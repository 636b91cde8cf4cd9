"""The pump survives DynamoDB Local refusing a shard iterator (TrimmedDataAccessException), which
happens under ``make local`` when an empty read races a write: it re-reads after the last record
it finished with, so nothing is skipped and nothing finished is delivered again."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from local.pump import StreamPump
from tests.helpers import keys_of, put

pytestmark = pytest.mark.integration


def test_a_refused_iterator_is_replaced_from_the_checkpoint(ddb, streams, stream_table):
    # Given a pump that has finished k0, k1, and a streams client that refuses the next read once
    seen: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.extend(keys_of(event))
        return {"batchItemFailures": []}

    put(ddb, stream_table, "k0", "k1")
    pump = StreamPump(dynamodb=ddb, streams=streams, table=stream_table, handler=handler)
    pump.drain()
    real = streams.get_records
    refused: list[bool] = []

    def once_refused(**kwargs: Any) -> Any:
        if not refused:
            refused.append(True)
            raise ClientError(
                {"Error": {"Code": "TrimmedDataAccessException", "Message": "trimmed"}},
                "GetRecords",
            )
        return real(**kwargs)

    put(ddb, stream_table, "k2", "k3")
    pump.streams = type("Refusing", (), {})()
    pump.streams.get_records = once_refused
    pump.streams.get_shard_iterator = streams.get_shard_iterator
    pump.streams.describe_stream = streams.describe_stream
    # When the pump carries on
    pump.drain()
    # Then the read was refused once and every record came exactly once, in order
    assert refused == [True]
    assert seen == ["k0", "k1", "k2", "k3"]
