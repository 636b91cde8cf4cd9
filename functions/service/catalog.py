"""Which Lambda functions exist, what serves each, and which tables each may touch.

Read by the CDK stack (one function, its grants and its environment per entry; API methods per
route) and by the local runner (which module answers which route). Importing a handler module does
no work, so reading ``ROUTES`` here is cheap.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from service import config
from service.api.http import Route
from service.domain.inventory import CREATION_FILTER


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    module: str
    tables: tuple[str, ...]
    description: str
    memory_mb: int = 512
    timeout_seconds: int = config.API_TIMEOUT_SECONDS

    @property
    def handler(self) -> str:
        return f"{self.module}.handler"

    def routes(self) -> list[Route]:
        return list(getattr(importlib.import_module(self.module), "ROUTES", []))


API_FUNCTIONS: tuple[FunctionSpec, ...] = (
    FunctionSpec(
        name="products",
        module="service.handlers.products",
        tables=(config.PRODUCTS, config.IDEMPOTENCY),
        description="Products and purchases with optimistic concurrency (seed 000)",
    ),
    FunctionSpec(
        name="locks",
        module="service.handlers.locks",
        tables=(config.LEASES,),
        description="Lease locks with fencing tokens (seed 003)",
    ),
    FunctionSpec(
        name="wallets",
        module="service.handlers.wallets",
        tables=(config.LEASES, config.WALLETS, config.IDEMPOTENCY),
        description="Wallet top-ups charged once inside a lease, FOR UPDATE style (seed 004)",
    ),
    FunctionSpec(
        name="inventory",
        module="service.handlers.inventory",
        tables=(config.INVENTORY, config.INVENTORY_SUMMARY),
        description="Inventory units reserved SKIP LOCKED style, with expiring holds (seed 002)",
        timeout_seconds=29,  # creates skus of up to 1000 units inline; larger ones: the worker
    ),
    FunctionSpec(
        name="events",
        module="service.handlers.events",
        tables=(config.EVENTS, config.REGISTRATION_REQUESTS, config.IDEMPOTENCY),
        description="Events and registrations without write skew (seed 001)",
    ),
)


@dataclass(frozen=True)
class ConsumerSpec(FunctionSpec):
    """A function fed by a table's DynamoDB stream (``source``), through an event source mapping
    with partial batch responses; ``module.handler`` returns ``{"batchItemFailures": [...]}``."""

    source: str = ""
    filters: tuple[dict[str, Any], ...] = ()  # event filter patterns: only matching records
    batch_size: int = config.STREAM_BATCH_SIZE
    retry_attempts: int = config.STREAM_RETRY_ATTEMPTS
    max_record_age_seconds: int = config.STREAM_MAX_RECORD_AGE_SECONDS


STREAM_CONSUMERS: tuple[ConsumerSpec, ...] = (
    ConsumerSpec(
        name="inventorysummary",
        module="service.handlers.inventory_summary",
        tables=(config.INVENTORY_SUMMARY,),
        source=config.INVENTORY,
        description="Per-sku inventory counts from the inventory table's stream (seed 002)",
    ),
    ConsumerSpec(
        name="inventorycreator",
        module="service.handlers.inventory_creator",
        tables=(config.INVENTORY, config.INVENTORY_SUMMARY),
        source=config.INVENTORY,
        filters=(CREATION_FILTER,),
        batch_size=1,  # one chunk of units per invocation: bounded time, retried alone
        description="Creates large skus' units in resumable chunks (seed 002)",
        timeout_seconds=120,
        memory_mb=1024,
    ),
    ConsumerSpec(
        name="decider",
        module="service.handlers.registration_consumer",
        tables=(config.EVENTS, config.REGISTRATION_REQUESTS),
        source=config.REGISTRATION_REQUESTS,
        description="Decides registration requests in stream order (seed 001, option 1)",
        timeout_seconds=60,
    ),
)


def api_routes() -> list[tuple[FunctionSpec, Route]]:
    return [(spec, route) for spec in API_FUNCTIONS for route in spec.routes()]
