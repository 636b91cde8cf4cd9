"""Reservations on a sku still being created, on DynamoDB Local: what they cost is bounded.

While a sku is CREATING, the claimable index already lists the units of chunks written but not yet
recorded, which a reservation may not take. A reservation used to page through all of them (a
40,000-unit sku: 5,169 Queries and 116 s for one unit, a 502 over HTTP). Each read of a pool now
sends at most ``claims.PAGES_PER_POOL`` Queries, and the answer says the sku is still being created.
The DynamoDB calls are counted at the client (``Faults`` counts every request sent).
"""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.errors import OutOfStock
from service.domain.inventory import Inventory
from tests.helpers import Faults, patient_client, pooled_service

pytestmark = pytest.mark.integration

UNITS = 2_000
POOLS = 2
QUERIES_PER_POOL = 4  # the bound the docs state (claims.PAGES_PER_POOL)


class Stopped(Exception):
    """Stops a creation step after its units are written, before its chunks are recorded."""


def records_chunks(params: dict[str, Any]) -> bool:
    """A transaction that moves the sku header's ``chunksDone`` (it records chunks)."""
    return any(
        (item.get("Update") or {}).get("Key", {}).get("sk") == {"S": "sku"}
        for item in params.get("TransactItems", [])
    )


def write_without_recording(client: Any, builder: Inventory, sku: str) -> None:
    """The creation's next step writes its units and stops before it records them: they are in
    the claimable index, and not offered (as while the worker is between the two)."""

    def stop(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems" and records_chunks(params):
            raise Stopped

    client.meta.events.register("provide-client-params.dynamodb", stop)
    try:
        with pytest.raises(Stopped):
            builder.advance(sku)
    finally:
        client.meta.events.unregister("provide-client-params.dynamodb", stop)


@pytest.mark.parametrize("recorded", [0, 100], ids=["none-recorded", "recorded-all-taken"])
def test_a_reservation_on_a_sku_being_created_reads_each_pool_a_few_pages_at_most(
    dynamodb_local, tables, unique, recorded
):
    client = patient_client(dynamodb_local)
    builder = pooled_service(client, tables, chunk_units=100, inline_units=0, parallel_chunks=1)
    builder.create(unique, UNITS, pools=POOLS)
    # Given a sku of 2,000 units in CREATING whose recorded units (none, or the first chunk's
    # 100, all held by another customer) are outnumbered by units written and not yet recorded
    if recorded:
        assert builder.advance(unique)
        pooled_service(client, tables).reserve(unique, recorded, hold_seconds=600)
    builder.parallel_chunks = UNITS // 100 - 1
    write_without_recording(client, builder, unique)
    assert builder.summary(unique)["unitsCreated"] == recorded
    # When a customer reserves one unit, every DynamoDB call of it counted
    calls = Faults(client)
    with pytest.raises(OutOfStock) as refused:
        pooled_service(client, tables).reserve(unique, 1)
    queries = calls.sent.get("Query", 0)
    # Then it read each pool a few pages at most, not every unit written
    assert queries <= QUERIES_PER_POOL * POOLS, calls.sent
    # And the answer says why and when to come back: the sku is still being created
    details = refused.value.details
    assert (details["status"], details["unitsCreated"]) == ("CREATING", recorded), details
    assert details["units"] == UNITS and details["retryAfterSeconds"] > 0, details
