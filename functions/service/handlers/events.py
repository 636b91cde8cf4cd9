"""Events API (no write skew): events, synchronous registrations, async registration requests."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from service import catalog, policy, runtime
from service.api.bodies import events as models
from service.api.resolver import Id, Resolver, accepted, created, no_content, ok
from service.domain.events import Events
from service.domain.registration_requests import RegistrationRequests
from service.observability import observed

app = Resolver("events")

events: runtime.Lazy[Events] = runtime.Lazy(
    lambda: Events(
        client=runtime.dynamodb.get(),
        table=catalog.tables("events")["events"],
        hints=runtime.sharded_hints.get(),
        resizer=runtime.resizer.get(),
    )
)
requests: runtime.Lazy[RegistrationRequests] = runtime.Lazy(
    lambda: RegistrationRequests(
        client=runtime.dynamodb.get(),
        table=catalog.tables("events")["registration_requests"],
        events=events.get(),
    )
)


@app.declared
def create_event(body: models.CreateEventRequest) -> Response[Any]:
    event = events.get().create(body.eventId, body.name, body.capacity, body.shards, body.adaptive)
    return created(event, f"/events/{event['eventId']}", etag=event["version"])


@app.declared
def get_event(eventId: Id) -> Response[Any]:
    event = events.get().get(eventId)
    return ok(event, etag=event["version"])


@app.declared
def register(eventId: Id, body: models.RegistrationRequest) -> Response[Any]:
    user = policy.acting_for(app.caller(), body.userId)
    registration = events.get().register(eventId, user)
    return created(registration, f"/events/{eventId}/registrations/{registration['userId']}")


@app.declared
def unregister(eventId: Id, userId: Id) -> Response[Any]:
    policy.require_self_or_admin(app.caller(), userId)
    events.get().unregister(eventId, userId)
    return no_content()


@app.declared
def list_user_registrations(userId: Id) -> Response[Any]:
    policy.require_self_or_admin(app.caller(), userId)
    return ok({"items": events.get().registrations_of(userId)})


@app.declared
def request_registration(eventId: Id, body: models.RegistrationRequest) -> Response[Any]:
    user = policy.acting_for(app.caller(), body.userId)
    pending = requests.get().submit(eventId, user)
    return accepted(pending, f"/events/{eventId}/registration-requests/{pending['requestId']}")


@app.declared
def get_registration_request(eventId: Id, requestId: Id) -> Response[Any]:
    request = requests.get().get(eventId, requestId)
    # the request is its user's (the one it asks a seat for, whoever sent it)
    policy.require_owner(app.caller(), request["userId"], write=False, what="registration request")
    return ok(request)


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
