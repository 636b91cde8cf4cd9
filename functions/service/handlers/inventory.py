"""Inventory API (SKIP LOCKED): units, reservations that hold them, confirm, release, counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response

from service import catalog, config, policy, runtime
from service.api.bodies import inventory as models
from service.api.resolver import Id, Resolver, created, no_content, ok
from service.domain.inventory import Inventory
from service.observability import observed
from turnstile_ddb import claims

app = Resolver("inventory")


def _inventory() -> Inventory:
    """The function's Inventory, built once per execution environment: its pool hints (what
    its reservations have seen of the pools lately) serve every request the environment runs."""
    tables = catalog.tables("inventory")
    return Inventory(
        client=runtime.dynamodb.get(),
        table=tables["inventory"],
        summary_table=tables["inventory_summary"],
        pool_hints=claims.PoolHints(),
        # Inline creations (small skus) keep the pace the environment names, as the worker does.
        create_units_per_second=config.inventory_create_pace(),
    )


inventory: runtime.Lazy[Inventory] = runtime.Lazy(_inventory)


def _owned_by_caller() -> Callable[[str | None], None]:
    """A reservation is confirmed or released by whoever made it (docs/identity.md)."""
    caller = app.caller()
    return lambda owner: policy.require_owner(caller, owner, write=True, what="reservation")


@app.declared
def create_inventory(body: models.CreateInventoryRequest) -> Response[Any]:
    answer = inventory.get().create(body.sku, body.units)
    return created(answer, f"/inventory/{answer['sku']}")


@app.declared
def get_inventory(sku: Id) -> Response[Any]:
    return ok(inventory.get().summary(sku))


@app.declared
def count_inventory(sku: Id) -> Response[Any]:
    return ok(inventory.get().exact(sku))


@app.declared
def reserve(sku: Id, body: models.ReservationRequest) -> Response[Any]:
    owner = app.caller().sub
    answer = inventory.get().reserve(sku, body.quantity, body.holdSeconds, owner=owner)
    return created(answer, f"/inventory/{sku}/reservations/{answer['reservationId']}")


@app.declared
def confirm_reservation(sku: Id, reservationId: Id) -> Response[Any]:
    return ok(inventory.get().confirm(sku, reservationId, _owned_by_caller()))


@app.declared
def release_reservation(sku: Id, reservationId: Id) -> Response[Any]:
    inventory.get().release(sku, reservationId, _owned_by_caller())
    return no_content()


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
