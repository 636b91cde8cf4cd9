"""Events API (seed 001): events, synchronous registrations, asynchronous registration requests."""

from __future__ import annotations

from typing import Any

from service import config, runtime
from service.api import schema
from service.api.http import Api, Request, Response, Route, accepted, created, no_content, ok
from service.domain.events import Events
from service.domain.registration_requests import RegistrationRequests

TABLES = (config.EVENTS, config.REGISTRATION_REQUESTS, config.IDEMPOTENCY)


def _tables() -> config.Tables:
    return config.Tables.from_env(*TABLES)


events: runtime.Lazy[Events] = runtime.Lazy(
    lambda: Events(client=runtime.dynamodb.get(), table=_tables()[config.EVENTS])
)
requests: runtime.Lazy[RegistrationRequests] = runtime.Lazy(
    lambda: RegistrationRequests(
        client=runtime.dynamodb.get(),
        table=_tables()[config.REGISTRATION_REQUESTS],
        events=events.get(),
    )
)


def create_event(request: Request) -> Response:
    body = request.body
    event = events.get().create(
        body["eventId"], body["name"], body["capacity"], body.get("shards", 1)
    )
    return created(event, f"/events/{event['eventId']}", etag=event["version"])


def get_event(request: Request) -> Response:
    event = events.get().get(request.params["eventId"])
    return ok(event, etag=event["version"])


def register(request: Request) -> Response:
    event_id = request.params["eventId"]
    registration = events.get().register(event_id, request.body["userId"])
    return created(registration, f"/events/{event_id}/registrations/{registration['userId']}")


def unregister(request: Request) -> Response:
    events.get().unregister(request.params["eventId"], request.params["userId"])
    return no_content()


def user_registrations(request: Request) -> Response:
    return ok({"items": events.get().registrations_of(request.params["userId"])})


def request_registration(request: Request) -> Response:
    event_id = request.params["eventId"]
    pending = requests.get().submit(event_id, request.body["userId"])
    return accepted(pending, f"/events/{event_id}/registration-requests/{pending['requestId']}")


def get_registration_request(request: Request) -> Response:
    return ok(requests.get().get(request.params["eventId"], request.params["requestId"]))


USER = schema.obj({"userId": schema.identifier()})

ROUTES = [
    Route(
        "POST",
        "/events",
        create_event,
        "Create an event with a capacity; nobody registered yet",
        body=schema.obj(
            {
                "eventId": schema.identifier(),
                "name": schema.string(1, 200),
                "capacity": schema.integer(1, config.MAX_EVENT_CAPACITY),
            },
            {"shards": schema.integer(1, config.MAX_STOCK_SHARDS)},
        ),
        success=201,
        errors=("ALREADY_EXISTS",),
        idempotent=True,
    ),
    Route(
        "GET",
        "/events/{eventId}",
        get_event,
        "Read an event (strongly consistent): capacity, registered, version",
        errors=("NOT_FOUND",),
    ),
    Route(
        "POST",
        "/events/{eventId}/registrations",
        register,
        "Register a user: one transaction on the event counter and the registration",
        body=USER,
        success=201,
        errors=("NOT_FOUND", "EVENT_FULL", "ALREADY_REGISTERED", "CONFLICT"),
        idempotent=True,
    ),
    Route(
        "DELETE",
        "/events/{eventId}/registrations/{userId}",
        unregister,
        "Cancel a registration; the seat is free again",
        success=204,
        errors=("NOT_FOUND",),
    ),
    Route(
        "GET",
        "/users/{userId}/registrations",
        user_registrations,
        "A user's registrations (from a GSI: eventually consistent)",
    ),
    Route(
        "POST",
        "/events/{eventId}/registration-requests",
        request_registration,
        "Ask for a seat; decided asynchronously, in order, by the stream consumer",
        body=USER,
        success=202,
        errors=("NOT_FOUND",),
        idempotent=True,
    ),
    Route(
        "GET",
        "/events/{eventId}/registration-requests/{requestId}",
        get_registration_request,
        "Read a registration request: PENDING, ACCEPTED or REJECTED (with reason)",
        errors=("NOT_FOUND",),
    ),
]

api: runtime.Lazy[Api] = runtime.Lazy(lambda: Api(ROUTES, runtime.idempotency.get))


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api.get()(event, context)
