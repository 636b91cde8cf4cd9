"""Every route of the API, once, through the generated Python client (``make clients`` builds the
``turnstile_client`` package from the OpenAPI document; docs/clients.md shows this program).

    python -m clients.walkthrough URL ADMIN_TOKEN USER_TOKEN

``URL`` is the API's base URL (``http://127.0.0.1:3000`` for ``make local``); the tokens are ID
tokens of an administrator (catalogue writes) and of an ordinary user (``make token``). Every name
it creates carries a fresh random suffix, so it can run again against the same stack. It prints one
line per call (the status, the operation) and fails on the first answer that is not the expected
success, showing the error body.

Only the generated package and the standard library are imported: this is what a service calling
turnstile writes. Every answer is a typed model (``Product``, ``AcquiredLease``, ...) or the
route's error model; :meth:`Walk.ok` names the model a success must be, and the header a client
needs, ``ETag`` for ``If-Match``, is a ``str``.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import MutableMapping
from http import HTTPStatus
from typing import Protocol, TypeVar

from turnstile_client import AuthenticatedClient
from turnstile_client.api.events import (
    create_event,
    get_event,
    get_registration_request,
    list_user_registrations,
    register,
    request_registration,
    unregister,
)
from turnstile_client.api.inventory import (
    confirm_reservation,
    count_inventory,
    create_inventory,
    get_inventory,
    release_reservation,
    reserve,
)
from turnstile_client.api.locks import acquire_lock, release_lock, renew_lock
from turnstile_client.api.products import (
    create_product,
    get_product,
    purchase,
    restock,
    update_product,
)
from turnstile_client.api.wallets import get_wallet, top_up_wallet
from turnstile_client.models import (
    AcquiredLease,
    ConfirmedReservation,
    CreateEventRequest,
    CreateInventoryRequest,
    CreateProductRequest,
    Event,
    EventRegistration,
    HeldReservation,
    InventoryCount,
    InventorySummary,
    Lease,
    LockAcquireRequest,
    LockReleaseRequest,
    LockRenewRequest,
    Product,
    PurchaseReceipt,
    PurchaseRequest,
    RegistrationRequest,
    RegistrationRequestReceipt,
    RegistrationRequestState,
    ReservationRequest,
    RestockRequest,
    SkuProgress,
    TopUpReceipt,
    TopUpRequest,
    UpdateProductRequest,
    UserRegistrations,
    Wallet,
)

T = TypeVar("T")


class Answer(Protocol):
    """What the walkthrough reads of any operation's ``Response[...]``."""

    @property
    def status_code(self) -> HTTPStatus: ...
    @property
    def content(self) -> bytes: ...
    @property
    def headers(self) -> MutableMapping[str, str]: ...
    @property
    def parsed(self) -> object: ...


class WalkError(AssertionError):
    """An answer that is not the success the walkthrough expects."""


class Walk:
    """The calls made so far: ``(operation, status)``, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def ok(self, operation: str, response: Answer, status: HTTPStatus, body: type[T]) -> T:
        """The success body of ``response``, which must have ``status`` and be a ``body``."""
        self.done(operation, response, status)
        parsed = response.parsed
        if not isinstance(parsed, body):
            raise WalkError(f"{operation}: not a {body.__name__}: {response.content!r}")
        return parsed

    def done(self, operation: str, response: Answer, status: HTTPStatus) -> None:
        """``response`` must have ``status`` (alone: a 204, no body to read)."""
        if response.status_code != status:
            raise WalkError(
                f"{operation}: {response.status_code}, not {status}: {response.content!r}"
            )
        self.calls.append((operation, int(status)))
        print(f"{int(status)} {operation}", flush=True)


def check(operation: str, holds: bool, what: str) -> None:
    if not holds:
        raise WalkError(f"{operation}: {what}")


def last_segment(response: Answer) -> str:
    """The last path segment of the ``Location`` the server answered (the id it chose)."""
    return response.headers["location"].rsplit("/", 1)[1]


def walk(url: str, admin_token: str, user_token: str) -> Walk:
    """Call every route once, as an administrator and a user would, in a sensible order."""
    # --8<-- [start:walk]
    admin = AuthenticatedClient(base_url=url, token=admin_token, raise_on_unexpected_status=True)
    user = AuthenticatedClient(base_url=url, token=user_token, raise_on_unexpected_status=True)
    suffix = uuid.uuid4().hex[:12]
    w = Walk()
    ok, created, gone = HTTPStatus.OK, HTTPStatus.CREATED, HTTPStatus.NO_CONTENT

    # Products: the ETag read names the version a change applies to (If-Match).
    lamp = f"lamp-{suffix}"
    new_product = CreateProductRequest(product_id=lamp, name="Desk lamp", stock=10)
    made = create_product.sync_detailed(client=admin, body=new_product)
    check("create_product", w.ok("create_product", made, created, Product).version == 1, "v1")
    read = get_product.sync_detailed(lamp, client=user)
    w.ok("get_product", read, ok, Product)
    changes = UpdateProductRequest(name="Brass desk lamp")
    changed = update_product.sync_detailed(
        lamp, client=admin, body=changes, if_match=read.headers["etag"]
    )
    renamed = w.ok("update_product", changed, ok, Product)
    check("update_product", renamed.name == "Brass desk lamp", "the name did not change")
    restocked = restock.sync_detailed(lamp, client=admin, body=RestockRequest(units=5))
    check("restock", w.ok("restock", restocked, ok, Product).stock == 15, "stock is not 15")
    order = PurchaseRequest(quantity=2)
    bought = purchase.sync_detailed(lamp, client=user, body=order, idempotency_key=suffix)
    receipt = w.ok("purchase", bought, created, PurchaseReceipt)
    check("purchase", receipt.remaining_stock == 13, "13 should be left")

    # Events: a registration, its listing, its removal; a request decided in the background.
    talk = f"talk-{suffix}"
    new_event = CreateEventRequest(event_id=talk, name="Concurrency talk", capacity=100)
    w.ok("create_event", create_event.sync_detailed(client=admin, body=new_event), created, Event)
    w.ok("get_event", get_event.sync_detailed(talk, client=user), ok, Event)
    registered = register.sync_detailed(talk, client=user, body=RegistrationRequest())
    me = w.ok("register", registered, created, EventRegistration).user_id
    mine = list_user_registrations.sync_detailed(me, client=user)
    listed = w.ok("list_user_registrations", mine, ok, UserRegistrations)
    check("list_user_registrations", [r.event_id for r in listed.items] == [talk], "not listed")
    w.done("unregister", unregister.sync_detailed(talk, me, client=user), gone)  # 204
    asked = request_registration.sync_detailed(talk, client=user, body=RegistrationRequest())
    ticket = w.ok("request_registration", asked, HTTPStatus.ACCEPTED, RegistrationRequestReceipt)
    state = get_registration_request.sync_detailed(talk, ticket.request_id, client=user)
    w.ok("get_registration_request", state, ok, RegistrationRequestState)

    # Locks: the fence the lease was granted with renews and releases it.
    lock = f"report-{suffix}"
    asking = LockAcquireRequest(ttl_seconds=30)
    acquired = acquire_lock.sync_detailed(lock, client=user, body=asking)
    fence = w.ok("acquire_lock", acquired, created, AcquiredLease).fence
    renewal = LockRenewRequest(fence=fence, ttl_seconds=30)
    renewed = renew_lock.sync_detailed(lock, client=user, body=renewal)
    check("renew_lock", w.ok("renew_lock", renewed, ok, Lease).fence == fence, "another fence")
    out = LockReleaseRequest(fence=fence)
    w.done("release_lock", release_lock.sync_detailed(lock, client=user, body=out), gone)  # 204

    # Wallets: a top-up sent twice with one Idempotency-Key runs once.
    wallet = f"wallet-{suffix}"
    for _ in range(2):
        topped = top_up_wallet.sync_detailed(
            wallet, client=user, body=TopUpRequest(amount=500), idempotency_key=f"top-up-{suffix}"
        )
        w.ok("top_up_wallet", topped, created, TopUpReceipt)
    replayed = topped.headers.get("idempotent-replayed") == "true"
    check("top_up_wallet", replayed, "the second top-up with the same key was not a replay")
    balance = w.ok("get_wallet", get_wallet.sync_detailed(wallet, client=user), ok, Wallet).balance
    check("get_wallet", balance == 500, f"one top-up of 500, not {balance}")

    # Inventory: one reservation confirmed, one released.
    chair = f"chair-{suffix}"
    units = CreateInventoryRequest(sku=chair, units=5)
    stocked = create_inventory.sync_detailed(client=admin, body=units)
    w.ok("create_inventory", stocked, created, SkuProgress)
    summary = get_inventory.sync_detailed(chair, client=user)
    w.ok("get_inventory", summary, ok, InventorySummary)
    counted = count_inventory.sync_detailed(chair, client=admin)
    check(
        "count_inventory", w.ok("count_inventory", counted, ok, InventoryCount).available == 5, "5"
    )
    one = ReservationRequest(quantity=1)
    held = [reserve.sync_detailed(chair, client=user, body=one) for _ in range(2)]
    kept, dropped = (w.ok("reserve", r, created, HeldReservation).reservation_id for r in held)
    confirmed = confirm_reservation.sync_detailed(chair, kept, client=user)
    w.ok("confirm_reservation", confirmed, ok, ConfirmedReservation)
    let_go = "release_reservation"
    w.done(let_go, release_reservation.sync_detailed(chair, dropped, client=user), gone)  # 204
    # --8<-- [end:walk]
    return w


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    url, admin_token, user_token = args
    done = walk(url, admin_token, user_token)
    print(f"{len({name for name, _ in done.calls})} operations, {len(done.calls)} calls")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
