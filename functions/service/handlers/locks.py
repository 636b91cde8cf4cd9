"""Locks API: acquire, renew and release leases with fencing tokens."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from service import catalog, policy, runtime
from service.api.bodies import locks as models
from service.api.resolver import Id, Resolver, created, no_content, ok
from service.domain import locks as domain
from service.observability import observed

app = Resolver("locks")

locks: runtime.Lazy[domain.Locks] = runtime.Lazy(
    lambda: domain.Locks(domain.leases(runtime.dynamodb.get(), catalog.tables("locks")["leases"]))
)


@app.declared
def acquire_lock(resource: Id, body: models.LockAcquireRequest) -> Response[Any]:
    owner = policy.lease_owner(app.caller(), body.owner)
    context = app.lambda_context
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    held = locks.get().acquire(
        resource, owner, body.ttlSeconds, wait_ms=body.waitMs, remaining_ms=remaining
    )
    return created(held, f"/locks/{held['resource']}")


@app.declared
def renew_lock(resource: Id, body: models.LockRenewRequest) -> Response[Any]:
    owner = policy.lease_owner(app.caller(), body.owner)
    return ok(locks.get().renew(resource, owner, body.fence, body.ttlSeconds))


@app.declared
def release_lock(resource: Id, body: models.LockReleaseRequest) -> Response[Any]:
    locks.get().release(resource, policy.lease_owner(app.caller(), body.owner), body.fence)
    return no_content()


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
