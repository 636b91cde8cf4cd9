"""Creation worker: builds a large sku's units in chunks, one chunk per header change.

Fed by the inventory table's stream, filtered (on AWS by the event source mapping, locally by the
pump) to the records of sku headers. ``POST /inventory`` writes the header as CREATING; that INSERT
brings the first step here; recording a step's chunks changes the header, whose MODIFY brings the
next, until the header says READY. One invocation also goes on to the next steps itself while its
remaining time covers them (:meth:`~service.domain.inventory.Inventory.advance_while`), so most
steps do not wait for a stream poll; the records of those steps then find the creation further on
or done. A chunk that fails is retried with its record (partial batch
response), and repeating a chunk writes only the units still missing (see
:meth:`service.domain.inventory.Inventory.advance`), so any crash resumes where it stopped.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from service import catalog, config, runtime
from service.domain.inventory import CREATING, HEADER, Inventory, pace_of
from service.observability import observed
from service.streams import process_in_order
from turnstile_ddb import codec


def _inventory() -> Inventory:
    """The worker's Inventory, paced as the environment says (the local stack: unpaced, as
    DynamoDB Local has no capacity limit), else by the table's capacity, read once per cold
    start (:func:`~service.domain.inventory.pace_of`)."""
    tables = catalog.tables("inventorycreator")
    client = runtime.dynamodb.get()
    pace = config.inventory_create_pace()
    if pace is None:
        pace = pace_of(client, tables[config.INVENTORY], config.call_backoff())
    return Inventory(
        client=client,
        table=tables[config.INVENTORY],
        summary_table=tables[config.INVENTORY_SUMMARY],
        create_units_per_second=pace,
    )


inventory: runtime.Lazy[Inventory] = runtime.Lazy(_inventory)


def record_handler(
    record: DynamoDBRecord, builder: Inventory | None = None, context: Any = None
) -> None:
    """Creation steps for a header record (``builder``: the Inventory to build with, this
    function's own by default), as many as the invocation's remaining time covers (one when
    ``context`` is None)."""
    change = record.raw_event.get("dynamodb") or {}
    keys = codec.decode_item(change.get("Keys")) or {}
    new = codec.decode_item(change.get("NewImage")) or {}
    if keys.get("sk") != HEADER or new.get("status") != CREATING:
        return  # the mapping's filter already drops these; a local run without it too
    remaining = getattr(context, "get_remaining_time_in_millis", None) or (lambda: 0)
    (builder or inventory.get()).advance_while(str(keys["sku"]), remaining)


def process(
    event: dict[str, Any], context: Any, builder: Inventory | None = None
) -> dict[str, Any]:
    """The worker's batch, in order, with the partial batch response (see :func:`handler`)."""
    return process_in_order(event, context, lambda record: record_handler(record, builder, context))


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process(event, context)
