"""Run a sku's creation to the end through the creation worker, without a stream.

Tests and benchmarks that need a whole sku before they start (and run no stream pump) call
:func:`create_to_ready`: ``POST /inventory``'s :meth:`~service.domain.inventory.Inventory.create`,
then the creation worker's own batch code (``service.handlers.inventory_creator.process``, bound
to the caller's Inventory) given the header's latest change record each time, as the filtered
event source mapping hands it over on AWS, until the header leaves CREATING. Each record passes
the deployed filter first (``CREATION_FILTER``). A failing step raises (a one-record batch fails
whole, as Lambda would retry it). Nothing here writes a unit: the worker does, as deployed.
"""

from __future__ import annotations

import uuid
from typing import Any

from local.pump import matches
from service.domain.inventory import CREATING, CREATION_FILTER, HEADER, Inventory
from turnstile_ddb import codec

STREAM_ARN = "arn:aws:dynamodb:local:000000000000:table/inventory/stream/local"


def header_record(header: dict[str, Any]) -> dict[str, Any]:
    """The stream record (Lambda's shape) of the header's latest change."""
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": "MODIFY",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "local",
        "eventSourceARN": STREAM_ARN,
        "dynamodb": {
            "Keys": codec.encode_item({"sku": header["sku"], "sk": HEADER}),
            "NewImage": codec.encode_item(header),
            "SequenceNumber": str(uuid.uuid4().int % 10**20),
            "SizeBytes": 1,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


def _read_header(inventory: Inventory, sku: str) -> dict[str, Any]:
    response = inventory.client.get_item(
        TableName=inventory.table,
        Key=codec.encode_item({"sku": sku, "sk": HEADER}),
        ConsistentRead=True,
    )
    return codec.decode_item(response.get("Item")) or {}


def create_to_ready(
    inventory: Inventory, sku: str, units: int, pools: int | None = None
) -> dict[str, Any]:
    """Create ``sku`` and run the creation worker on its header's changes until it leaves
    CREATING; the creation's progress as ``POST /inventory`` answers it."""
    from service.handlers import inventory_creator

    inventory.create(sku, units, pools)
    header = _read_header(inventory, sku)
    steps = int(header.get("chunks", 0)) + 1  # each step records at least one chunk
    while header.get("status") == CREATING:
        if steps == 0:
            raise AssertionError(f"{sku}: the worker's steps recorded no chunk: {header}")
        record = header_record(header)
        if not matches(CREATION_FILTER, record):
            raise AssertionError(f"the deployed filter drops the header record: {record}")
        inventory_creator.process({"Records": [record]}, None, inventory)
        header = _read_header(inventory, sku)
        steps -= 1
    return inventory.progress(header)
