"""Which Lambda functions exist, what serves each, and which tables each may touch.

The one place that says which function uses which table: the CDK stack grants exactly these and
sets one environment variable per table (``infra``), and each function reads its table names with
:func:`tables` from the same entry. Routes are declared in ``service.api.routes``.

Read by the CDK stack and the local runner at deploy or start time, so it imports no Lambda
runtime module (boto3, Powertools, domains): only ``service.config``. Every function reads its
table names here at run time, so the route declarations (and their pydantic models) are imported
only when routes are asked for: a stream consumer's cold start never loads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from service import config

if TYPE_CHECKING:
    from service.api.routes import Route


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    module: str
    tables: tuple[str, ...]
    description: str
    # An API function's memory is the one ``python -m bench --only memory --record-memory``
    # chose from its measured warm requests (bench/memory.json, held to it by
    # tests/infra/test_memory_choice.py); the stream consumers' were not measured.
    memory_mb: int = 512
    timeout_seconds: int = config.API_TIMEOUT_SECONDS

    @property
    def handler(self) -> str:
        return f"{self.module}.handler"

    def routes(self) -> tuple[Route, ...]:
        from service.api import routes as declared

        return declared.of(self.name)


API_FUNCTIONS: tuple[FunctionSpec, ...] = (
    FunctionSpec(
        name="products",
        module="service.handlers.products",
        # leases: one resizer at a time for an adaptive product's shards
        tables=(config.PRODUCTS, config.IDEMPOTENCY, config.LEASES),
        description="Products and purchases with optimistic concurrency",
        memory_mb=512,  # bench/memory.json: 6.3 ms CPU, 22.0 ms waiting (median)
    ),
    FunctionSpec(
        name="locks",
        module="service.handlers.locks",
        tables=(config.LEASES,),
        description="Lease locks with fencing tokens",
        memory_mb=768,  # bench/memory.json: 2.8 ms CPU, 5.5 ms waiting (median)
        timeout_seconds=config.LOCKS_TIMEOUT_SECONDS,  # a queued acquisition waits up to 20 s
    ),
    FunctionSpec(
        name="wallets",
        module="service.handlers.wallets",
        tables=(config.LEASES, config.WALLETS, config.IDEMPOTENCY),
        description="Wallet top-ups charged once inside a lease, FOR UPDATE style",
        memory_mb=1024,  # bench/memory.json: 11.2 ms CPU, 22.0 ms waiting (median)
    ),
    FunctionSpec(
        name="inventory",
        module="service.handlers.inventory",
        tables=(config.INVENTORY, config.INVENTORY_SUMMARY),
        description="Inventory units reserved SKIP LOCKED style, with expiring holds",
        memory_mb=512,  # bench/memory.json: 5.3 ms CPU, 11.8 ms waiting (median)
        timeout_seconds=29,  # creates skus of up to 1000 units inline; larger ones: the worker
    ),
    FunctionSpec(
        name="events",
        module="service.handlers.events",
        # leases: one resizer at a time for an adaptive event's counter shards
        tables=(config.EVENTS, config.REGISTRATION_REQUESTS, config.IDEMPOTENCY, config.LEASES),
        description="Events and registrations without write skew",
        memory_mb=1024,  # bench/memory.json: 6.4 ms CPU, 14.5 ms waiting (median)
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
        description="Per-sku inventory counts from the inventory table's stream",
    ),
    ConsumerSpec(
        name="inventorycreator",
        module="service.handlers.inventory_creator",
        tables=(config.INVENTORY, config.INVENTORY_SUMMARY),
        source=config.INVENTORY,
        filters=(config.INVENTORY_CREATION_FILTER,),
        batch_size=1,  # one chunk of units per invocation: bounded time, retried alone
        description="Creates large skus' units in resumable chunks",
        timeout_seconds=120,
        memory_mb=1024,
    ),
    ConsumerSpec(
        name="decider",
        module="service.handlers.registration_consumer",
        tables=(config.EVENTS, config.REGISTRATION_REQUESTS),
        source=config.REGISTRATION_REQUESTS,
        description="Decides registration requests in stream order",
        timeout_seconds=60,
    ),
)


def api_routes() -> list[tuple[FunctionSpec, Route]]:
    return [(spec, route) for spec in API_FUNCTIONS for route in spec.routes()]


def spec(name: str) -> FunctionSpec:
    (found,) = [spec for spec in API_FUNCTIONS + STREAM_CONSUMERS if spec.name == name]
    return found


def tables(name: str) -> config.Tables:
    """Function ``name``'s physical table names, from the variables the stack sets for it."""
    return config.Tables.from_env(*spec(name).tables)
