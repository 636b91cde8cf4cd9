"""Every HTTP route, declared once.

A declaration names the function that serves the route, its method and path template, the model of
its body, its success status, the model of its success body and the headers that success sends,
the error codes its domain can answer, whether it honours ``Idempotency-Key`` and the headers it
reads. Who may call it is ``service.policy.ACCESS``.
From these:

* each function's Powertools resolver registers its routes (``service.api.resolver.declared``)
  and documents them in its OpenAPI document;
* the CDK stack builds the API Gateway resources, methods and request models (``infra.api``);
* the local bridge knows which function answers which path (``local.bridge``).

Only pydantic and ``service.config`` are imported here: deploy-time code reads the routes without
loading boto3, Powertools or the domains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel

from service.api import models

# The HTTP API's version: the OpenAPI document's ``info.version``. It follows semantic versioning
# for clients generated from the document (MAJOR: an operationId, schema name, field or enum value
# removed or renamed, a field made required...), and CHANGELOG.md records each change under a
# heading naming the version that brings it, "### Changed (HTTP API 2.0.0)": the newest such
# heading names this version (tests/unit/test_openapi_document.py).
API_VERSION = "2.0.0"


@dataclass(frozen=True)
class Route:
    function: str  # the catalog's function name
    method: str
    path: str  # API Gateway's template: /products/{productId}
    operation: str  # operationId, and the name of the Python function that serves the route
    summary: str
    body_name: str | None = None  # the model of its body (``service.api.models.HOMES``)
    status: int = 200
    errors: tuple[str, ...] = ()
    idempotent: bool = False
    headers: tuple[str, ...] = ()
    returns: tuple[str, ...] = ()  # ids its success body carries that other routes take
    answer_name: str | None = None  # its success body's model (``service.api.answers.<function>``)
    sends: tuple[str, ...] = ()  # headers its success sends (ETag, Location)

    @property
    def body(self) -> type[BaseModel] | None:
        """The model of the route's body, imported from its function's module on first use."""
        return models.body(self.body_name) if self.body_name is not None else None

    @property
    def answer(self) -> type[BaseModel] | None:
        """The model of the route's success body (None for a 204), imported on first use."""
        return models.answer(self.function, self.answer_name) if self.answer_name else None

    @property
    def creates(self) -> bool:
        """A create operation: its answer names something other routes act on (OpenAPI links)."""
        return self.method == "POST" and self.status in (201, 202)

    @property
    def params(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)

    @property
    def rule(self) -> str:
        """The path in Powertools' syntax: /products/<productId>."""
        return re.sub(r"{(\w+)}", r"<\1>", self.path)


ROUTES: tuple[Route, ...] = (
    # Products: optimistic concurrency
    Route(
        "products",
        "POST",
        "/products",
        "create_product",
        "Create a product at version 1",
        body_name="CreateProductRequest",
        status=201,
        errors=("ALREADY_EXISTS",),
        idempotent=True,
        answer_name="Product",
        sends=("ETag", "Location"),
    ),
    Route(
        "products",
        "GET",
        "/products/{productId}",
        "get_product",
        "Read a product (strongly consistent); ETag carries its version",
        errors=("NOT_FOUND",),
        answer_name="Product",
        sends=("ETag",),
    ),
    Route(
        "products",
        "PATCH",
        "/products/{productId}",
        "update_product",
        "Change name and/or stock if the product is still at the If-Match version",
        body_name="UpdateProductRequest",
        errors=("NOT_FOUND", "VERSION_MISMATCH", "PRECONDITION_REQUIRED"),
        headers=("If-Match",),
        answer_name="Product",
        sends=("ETag",),
    ),
    Route(
        "products",
        "POST",
        "/products/{productId}/restocks",
        "restock",
        "Add units to the stock, exactly, whatever sells meanwhile (sharded or not)",
        body_name="RestockRequest",
        errors=("NOT_FOUND", "CONFLICT"),
        answer_name="Product",
        sends=("ETag",),
    ),
    Route(
        "products",
        "POST",
        "/products/{productId}/purchases",
        "purchase",
        "Buy quantity units; strategy atomic (one conditional write) or versioned (version check)",
        body_name="PurchaseRequest",
        status=201,
        errors=("NOT_FOUND", "OUT_OF_STOCK", "CONFLICT"),
        idempotent=True,
        answer_name="PurchaseReceipt",
        sends=("ETag",),
    ),
    # Locks: leases with fencing tokens
    Route(
        "locks",
        "POST",
        "/locks/{resource}",
        "acquire_lock",
        "Acquire a lease; the fence grows with every acquisition and fences protected writes",
        body_name="LockAcquireRequest",
        status=201,
        errors=("LOCKED",),
        answer_name="AcquiredLease",
        sends=("Location",),
    ),
    Route(
        "locks",
        "PUT",
        "/locks/{resource}",
        "renew_lock",
        "Renew the lease held by owner with fence",
        body_name="LockRenewRequest",
        errors=("LOCK_LOST",),
        answer_name="Lease",
    ),
    Route(
        "locks",
        "DELETE",
        "/locks/{resource}",
        "release_lock",
        "Release the lease held by owner with fence (the fence keeps counting)",
        body_name="LockReleaseRequest",
        status=204,
        errors=("LOCK_LOST",),
    ),
    # Wallets: a FOR UPDATE-style critical section with an external call
    Route(
        "wallets",
        "POST",
        "/wallets/{walletId}/top-ups",
        "top_up_wallet",
        "Charge the payment provider and credit the wallet, under the wallet's lease",
        body_name="TopUpRequest",
        status=201,
        errors=("LOCKED", "LOCK_LOST", "PAYMENT_FAILED"),
        idempotent=True,
        answer_name="TopUpReceipt",
        sends=("Location",),
    ),
    Route(
        "wallets",
        "GET",
        "/wallets/{walletId}",
        "get_wallet",
        "Read a wallet's balance (strongly consistent)",
        errors=("NOT_FOUND",),
        answer_name="Wallet",
    ),
    # Inventory: item-level reservation, SKIP LOCKED style
    Route(
        "inventory",
        "POST",
        "/inventory",
        "create_inventory",
        "Create a sku: 201 at once with status CREATING (READY for up to 1000 units) and "
        "Location; the units are created in resumable chunks, progress on GET /inventory/{sku}",
        body_name="CreateInventoryRequest",
        status=201,
        errors=("ALREADY_EXISTS",),
        answer_name="SkuProgress",
        sends=("Location",),
    ),
    Route(
        "inventory",
        "GET",
        "/inventory/{sku}",
        "get_inventory",
        "Counts kept from the table's stream (consistency: eventual; holds that lapsed unclaimed "
        "still count as reserved)",
        errors=("NOT_FOUND",),
        answer_name="InventorySummary",
    ),
    Route(
        "inventory",
        "GET",
        "/inventory/{sku}/exact",
        "count_inventory",
        "Exact counts from the units themselves, for administrators: a consistent Query of "
        "every unit of the sku (never a scan), about its units x item size in read units",
        errors=("NOT_FOUND",),
        answer_name="InventoryCount",
    ),
    Route(
        "inventory",
        "POST",
        "/inventory/{sku}/reservations",
        "reserve",
        "Hold quantity units, all or none, skipping units others hold (SKIP LOCKED)",
        body_name="ReservationRequest",
        status=201,
        errors=("NOT_FOUND", "OUT_OF_STOCK", "HOLD_LAPSED"),
        returns=("reservationId",),
        answer_name="HeldReservation",
        sends=("Location",),
    ),
    Route(
        "inventory",
        "POST",
        "/inventory/{sku}/reservations/{reservationId}/confirm",
        "confirm_reservation",
        "Turn the hold into a sale, only while it is valid and still this reservation's",
        errors=("NOT_FOUND", "EXPIRED"),
        answer_name="ConfirmedReservation",
    ),
    Route(
        "inventory",
        "DELETE",
        "/inventory/{sku}/reservations/{reservationId}",
        "release_reservation",
        "Release the reservation's units (free again)",
        status=204,
        errors=("NOT_FOUND", "ALREADY_CONFIRMED"),
    ),
    # Events: capacity without write skew
    Route(
        "events",
        "POST",
        "/events",
        "create_event",
        "Create an event with a capacity; nobody registered yet",
        body_name="CreateEventRequest",
        status=201,
        errors=("ALREADY_EXISTS",),
        idempotent=True,
        answer_name="Event",
        sends=("ETag", "Location"),
    ),
    Route(
        "events",
        "GET",
        "/events/{eventId}",
        "get_event",
        "Read an event (strongly consistent): capacity, registered, version",
        errors=("NOT_FOUND",),
        answer_name="Event",
        sends=("ETag",),
    ),
    Route(
        "events",
        "POST",
        "/events/{eventId}/registrations",
        "register",
        "Register a user: one transaction on the event counter and the registration",
        body_name="RegistrationRequest",
        status=201,
        errors=("NOT_FOUND", "EVENT_FULL", "ALREADY_REGISTERED", "CONFLICT"),
        idempotent=True,
        returns=("userId",),
        answer_name="EventRegistration",
        sends=("Location",),
    ),
    Route(
        "events",
        "DELETE",
        "/events/{eventId}/registrations/{userId}",
        "unregister",
        "Cancel a registration; the seat is free again",
        status=204,
        errors=("NOT_FOUND",),
    ),
    Route(
        "events",
        "GET",
        "/users/{userId}/registrations",
        "list_user_registrations",
        "A user's registrations (from a GSI: eventually consistent)",
        answer_name="UserRegistrations",
    ),
    Route(
        "events",
        "POST",
        "/events/{eventId}/registration-requests",
        "request_registration",
        "Ask for a seat; decided asynchronously, in order, by the stream consumer",
        body_name="RegistrationRequest",
        status=202,
        errors=("NOT_FOUND",),
        idempotent=True,
        returns=("requestId",),
        answer_name="RegistrationRequestReceipt",
        sends=("Location",),
    ),
    Route(
        "events",
        "GET",
        "/events/{eventId}/registration-requests/{requestId}",
        "get_registration_request",
        "Read a registration request: PENDING, ACCEPTED or REJECTED (with reason)",
        errors=("NOT_FOUND",),
        answer_name="RegistrationRequestState",
    ),
)


def links(route: Route) -> dict[str, dict[str, object]]:
    """OpenAPI links from a create operation's success to every route that takes ids it knows:
    its path's (``$request.path``), its answer's (``returns``: ``$response.body``) and its body's
    (``$request.body``), in that order. What a stateful fuzzer follows, and a reader too."""
    if not route.creates:
        return {}
    fields = set(route.body.model_fields) if route.body is not None else set()
    sources: dict[str, str] = {}
    for name in sorted(fields):
        sources[name] = f"$request.body#/{name}"
    for name in route.returns:
        sources[name] = f"$response.body#/{name}"
    for name in route.params:
        sources[name] = f"$request.path.{name}"
    found: dict[str, dict[str, object]] = {}
    for target in ROUTES:
        if target is route or not target.params or not set(target.params) <= set(sources):
            continue
        found[target.operation] = {
            "operationId": target.operation,
            "parameters": {name: sources[name] for name in target.params},
        }
    return found


def partition_of(path: str) -> str:
    """The idempotency-record partition of a route's path: its first segment
    (``/wallets/{walletId}/top-ups`` -> ``wallets``).

    Every route under one first segment is served by one function, so a partition names the
    function that owns its records: ``service.api.keyed`` keys each record
    ``turnstile_ddb.record_keys.record_id(partition, scope)``, and the stack grants each function's
    role exactly its own partitions (``dynamodb:LeadingKeys``)."""
    return path.strip("/").split("/", 1)[0]


def of(function: str) -> tuple[Route, ...]:
    return tuple(route for route in ROUTES if route.function == function)
