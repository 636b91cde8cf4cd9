"""Locks API (seed 003): acquire, renew and release leases with fencing tokens."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from service import catalog, runtime
from service.api import models
from service.api.resolver import Id, Resolver, created, no_content, ok
from service.domain import locks as domain
from service.observability import observed

app = Resolver("locks")

locks: runtime.Lazy[domain.Locks] = runtime.Lazy(
    lambda: domain.Locks(domain.leases(runtime.dynamodb.get(), catalog.tables("locks")["leases"]))
)


@app.declared
def acquire_lock(resource: Id, body: models.Acquire) -> Response[Any]:
    held = locks.get().acquire(resource, body.owner, body.ttlSeconds)
    return created(held, f"/locks/{held['resource']}")


@app.declared
def renew_lock(resource: Id, body: models.Renew) -> Response[Any]:
    return ok(locks.get().renew(resource, body.owner, body.fence, body.ttlSeconds))


@app.declared
def release_lock(resource: Id, body: models.Release) -> Response[Any]:
    locks.get().release(resource, body.owner, body.fence)
    return no_content()


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
