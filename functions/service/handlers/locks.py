"""Locks API (seed 003): acquire, renew and release leases with fencing tokens."""

from __future__ import annotations

from typing import Any

from service import config, runtime
from service.api import schema
from service.api.http import Api, Request, Response, Route, created, ok
from service.domain import locks as domain
from service.observability import observed

TABLES = (config.LEASES,)


locks: runtime.Lazy[domain.Locks] = runtime.Lazy(
    lambda: domain.Locks(
        domain.leases(runtime.dynamodb.get(), config.Tables.from_env(*TABLES)[config.LEASES])
    )
)


def acquire_lock(request: Request) -> Response:
    body = request.body
    held = locks.get().acquire(request.params["resource"], body["owner"], body["ttlSeconds"])
    return created(held, f"/locks/{held['resource']}")


def renew_lock(request: Request) -> Response:
    body = request.body
    renewed = locks.get().renew(
        request.params["resource"], body["owner"], body["fence"], body["ttlSeconds"]
    )
    return ok(renewed)


def release_lock(request: Request) -> Response:
    body = request.body
    locks.get().release(request.params["resource"], body["owner"], body["fence"])
    return Response(204)


OWNER = schema.string(1, 256)
FENCE = schema.integer(1, 2**53 - 1)
TTL = schema.number(config.LOCK_MIN_TTL_SECONDS, config.LOCK_MAX_TTL_SECONDS)

ROUTES = [
    Route(
        "POST",
        "/locks/{resource}",
        acquire_lock,
        "Acquire a lease; the fence grows with every acquisition and fences protected writes",
        body=schema.obj({"owner": OWNER, "ttlSeconds": TTL}),
        success=201,
        errors=("LOCKED",),
    ),
    Route(
        "PUT",
        "/locks/{resource}",
        renew_lock,
        "Renew the lease held by owner with fence",
        body=schema.obj({"owner": OWNER, "fence": FENCE, "ttlSeconds": TTL}),
        errors=("LOCK_LOST",),
    ),
    Route(
        "DELETE",
        "/locks/{resource}",
        release_lock,
        "Release the lease held by owner with fence (the fence keeps counting)",
        body=schema.obj({"owner": OWNER, "fence": FENCE}),
        success=204,
        errors=("LOCK_LOST",),
    ),
]

api: runtime.Lazy[Api] = runtime.Lazy(lambda: Api(ROUTES))


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api.get()(event, context)
