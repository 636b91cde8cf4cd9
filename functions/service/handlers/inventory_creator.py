"""Creation worker: builds a large sku's units in chunks, one chunk per header change.

Fed by the inventory table's stream, filtered (on AWS by the event source mapping, locally by the
pump) to the records of sku headers. ``POST /inventory`` writes the header as CREATING; that INSERT
brings the first chunk here; recording a chunk changes the header, whose MODIFY brings the next,
until the header says READY. A chunk that fails is retried with its record (partial batch
response), and repeating a chunk writes only the units still missing (see
:meth:`service.domain.inventory.Inventory.advance`), so any crash resumes where it stopped.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from service import catalog, config, runtime
from service.domain.inventory import CREATING, HEADER, Inventory
from service.observability import observed
from service.streams import process_in_order
from turnstile import codec


def _inventory() -> Inventory:
    tables = catalog.tables("inventorycreator")
    return Inventory(
        client=runtime.dynamodb.get(),
        table=tables[config.INVENTORY],
        summary_table=tables[config.INVENTORY_SUMMARY],
    )


inventory: runtime.Lazy[Inventory] = runtime.Lazy(_inventory)


def record_handler(record: DynamoDBRecord, builder: Inventory | None = None) -> None:
    """One creation step for a header record (``builder``: the Inventory to build with, this
    function's own by default)."""
    change = record.raw_event.get("dynamodb") or {}
    keys = codec.decode_item(change.get("Keys")) or {}
    new = codec.decode_item(change.get("NewImage")) or {}
    if keys.get("sk") != HEADER or new.get("status") != CREATING:
        return  # the mapping's filter already drops these; a local run without it too
    (builder or inventory.get()).advance(str(keys["sku"]))


def process(
    event: dict[str, Any], context: Any, builder: Inventory | None = None
) -> dict[str, Any]:
    """The worker's batch, in order, with the partial batch response (see :func:`handler`)."""
    return process_in_order(event, context, lambda record: record_handler(record, builder))


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process(event, context)
