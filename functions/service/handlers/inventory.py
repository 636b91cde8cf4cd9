"""Inventory API (seed 002): units, reservations that hold them, confirm, release, counts."""

from __future__ import annotations

from typing import Any

from service import config, runtime
from service.api import schema
from service.api.http import Api, Request, Response, Route, created, ok
from service.domain.inventory import Inventory
from service.observability import observed

TABLES = (config.INVENTORY, config.INVENTORY_SUMMARY)

inventory: runtime.Lazy[Inventory] = runtime.Lazy(
    lambda: Inventory(
        client=runtime.dynamodb.get(),
        table=config.Tables.from_env(*TABLES)[config.INVENTORY],
        summary_table=config.Tables.from_env(*TABLES)[config.INVENTORY_SUMMARY],
    )
)


def create_inventory(request: Request) -> Response:
    body = request.body
    answer = inventory.get().create(body["sku"], body["units"])
    return created(answer, f"/inventory/{answer['sku']}")


def get_inventory(request: Request) -> Response:
    return ok(inventory.get().summary(request.params["sku"]))


def count_inventory(request: Request) -> Response:
    return ok(inventory.get().exact(request.params["sku"]))


def reserve(request: Request) -> Response:
    body: dict[str, Any] = request.body
    sku = request.params["sku"]
    answer = inventory.get().reserve(
        sku, body["quantity"], body.get("holdSeconds", config.INVENTORY_HOLD_SECONDS)
    )
    return created(answer, f"/inventory/{sku}/reservations/{answer['reservationId']}")


def confirm(request: Request) -> Response:
    return ok(inventory.get().confirm(request.params["sku"], request.params["reservationId"]))


def release(request: Request) -> Response:
    inventory.get().release(request.params["sku"], request.params["reservationId"])
    return Response(204)


ROUTES = [
    Route(
        "POST",
        "/inventory",
        create_inventory,
        "Create a sku: 201 at once with status CREATING (READY for up to 1000 units) and "
        "Location; the units are created in resumable chunks, progress on GET /inventory/{sku}",
        body=schema.obj(
            {
                "sku": schema.identifier(),
                "units": schema.integer(1, config.INVENTORY_MAX_UNITS),
            }
        ),
        success=201,
        errors=("ALREADY_EXISTS",),
    ),
    Route(
        "GET",
        "/inventory/{sku}",
        get_inventory,
        "Counts kept from the table's stream (consistency: eventual; holds that lapsed unclaimed "
        "still count as reserved)",
        errors=("NOT_FOUND",),
    ),
    Route(
        "GET",
        "/inventory/{sku}/exact",
        count_inventory,
        "Exact counts from the units themselves (a Query of the sku, never a scan)",
        errors=("NOT_FOUND",),
    ),
    Route(
        "POST",
        "/inventory/{sku}/reservations",
        reserve,
        "Hold quantity units, all or none, skipping units others hold (SKIP LOCKED)",
        body=schema.obj(
            {"quantity": schema.integer(1, config.INVENTORY_MAX_QUANTITY)},
            {
                "holdSeconds": schema.number(
                    config.INVENTORY_MIN_HOLD_SECONDS, config.INVENTORY_MAX_HOLD_SECONDS
                )
            },
        ),
        success=201,
        errors=("NOT_FOUND", "OUT_OF_STOCK"),
    ),
    Route(
        "POST",
        "/inventory/{sku}/reservations/{reservationId}/confirm",
        confirm,
        "Turn the hold into a sale, only while it is valid and still this reservation's",
        errors=("NOT_FOUND", "EXPIRED"),
    ),
    Route(
        "DELETE",
        "/inventory/{sku}/reservations/{reservationId}",
        release,
        "Release the reservation's units (free again)",
        success=204,
        errors=("NOT_FOUND", "ALREADY_CONFIRMED"),
    ),
]

api: runtime.Lazy[Api] = runtime.Lazy(lambda: Api(ROUTES))


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api.get()(event, context)
