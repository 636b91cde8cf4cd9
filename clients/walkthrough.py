"""Every route of the API, once, through the generated Python client (``make clients`` builds the
``turnstile_client`` package from the OpenAPI document; docs/clients.md shows this program).

    python -m clients.walkthrough URL ADMIN_TOKEN USER_TOKEN

``URL`` is the API's base URL (``http://127.0.0.1:3000`` for ``make local``); the tokens are ID
tokens of an administrator (catalogue writes) and of an ordinary user (``make token``). Every name
it creates carries a fresh random suffix, so it can run again against the same stack. It prints one
line per call (the status, the operation) and fails on the first answer that is not the expected
success, showing the error body.

Only the generated package and the standard library are imported: this is what a service calling
turnstile writes. Ids the server chooses are read from the headers it declares (``Location``,
``ETag``), which the client types ``str``.
"""

from __future__ import annotations

import sys
import uuid
from http import HTTPStatus
from typing import TypeVar

from turnstile_client import AuthenticatedClient
from turnstile_client.api.events import (
    create_event,
    get_event,
    get_registration_request,
    register,
    request_registration,
    unregister,
    user_registrations,
)
from turnstile_client.api.inventory import (
    confirm,
    count_inventory,
    create_inventory,
    get_inventory,
    release,
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
    Acquire,
    ErrorBody,
    NewEvent,
    NewInventory,
    NewProduct,
    ProductChanges,
    Purchase,
    Registration,
    Release,
    Renew,
    Reservation,
    Restock,
    TopUp,
)
from turnstile_client.types import Response

T = TypeVar("T")


class WalkError(AssertionError):
    """An answer that is not the success the walkthrough expects."""


class Walk:
    """The calls made so far: ``(operation, status)``, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def ok(self, operation: str, response: Response[T | ErrorBody], status: HTTPStatus) -> T:
        """The success body of ``response``, which must have ``status``."""
        self._record(operation, response, status)
        parsed = response.parsed
        if isinstance(parsed, ErrorBody) or parsed is None:
            raise WalkError(f"{operation}: no success body: {response.content!r}")
        return parsed

    def done(self, operation: str, response: Response[T], status: HTTPStatus) -> None:
        """``response`` must have ``status`` (a 204: no body to read)."""
        self._record(operation, response, status)

    def _record(self, operation: str, response: Response[T], status: HTTPStatus) -> None:
        if response.status_code != status:
            raise WalkError(
                f"{operation}: {response.status_code}, not {status}: {response.content!r}"
            )
        self.calls.append((operation, int(status)))
        print(f"{int(status)} {operation}", flush=True)


def last_segment(response: Response[T]) -> str:
    """The last path segment of the ``Location`` the server answered (the id it chose)."""
    return response.headers["location"].rsplit("/", 1)[1]


def walk(url: str, admin_token: str, user_token: str) -> Walk:
    """Call every route once, as an administrator and a user would, in a sensible order."""
    # --8<-- [start:walk]
    admin = AuthenticatedClient(base_url=url, token=admin_token, raise_on_unexpected_status=True)
    user = AuthenticatedClient(base_url=url, token=user_token, raise_on_unexpected_status=True)
    suffix = uuid.uuid4().hex[:12]
    w = Walk()
    created, gone = HTTPStatus.CREATED, HTTPStatus.NO_CONTENT

    # Products: the ETag read names the version a change applies to (If-Match).
    lamp = f"lamp-{suffix}"
    new_product = NewProduct(product_id=lamp, name="Desk lamp", stock=10)
    w.ok("create_product", create_product.sync_detailed(client=admin, body=new_product), created)
    read = get_product.sync_detailed(lamp, client=user)
    w.ok("get_product", read, HTTPStatus.OK)
    changes = ProductChanges(name="Brass desk lamp")
    changed = update_product.sync_detailed(
        lamp, client=admin, body=changes, if_match=read.headers["etag"]
    )
    w.ok("update_product", changed, HTTPStatus.OK)
    w.ok("restock", restock.sync_detailed(lamp, client=admin, body=Restock(units=5)), HTTPStatus.OK)
    bought = purchase.sync_detailed(
        lamp, client=user, body=Purchase(quantity=2), idempotency_key=f"order-{suffix}"
    )
    w.ok("purchase", bought, created)

    # --8<-- [end:walk]
    # Events: a registration, its listing, its removal; a request decided in the background.
    talk = f"talk-{suffix}"
    new_event = NewEvent(event_id=talk, name="Concurrency talk", capacity=100)
    w.ok("create_event", create_event.sync_detailed(client=admin, body=new_event), created)
    w.ok("get_event", get_event.sync_detailed(talk, client=user), HTTPStatus.OK)
    registered = register.sync_detailed(talk, client=user, body=Registration())
    w.ok("register", registered, created)
    me = last_segment(registered)
    w.ok("user_registrations", user_registrations.sync_detailed(me, client=user), HTTPStatus.OK)
    w.done("unregister", unregister.sync_detailed(talk, me, client=user), gone)  # 204
    asked = request_registration.sync_detailed(talk, client=user, body=Registration())
    w.ok("request_registration", asked, HTTPStatus.ACCEPTED)
    request = get_registration_request.sync_detailed(talk, last_segment(asked), client=user)
    w.ok("get_registration_request", request, HTTPStatus.OK)

    # Locks: the fence the lease was granted with renews and releases it.
    lock = f"report-{suffix}"
    acquired = acquire_lock.sync_detailed(lock, client=user, body=Acquire(ttl_seconds=30))
    fence: int = w.ok("acquire_lock", acquired, created)["fence"]
    renewal = Renew(fence=fence, ttl_seconds=30)
    w.ok("renew_lock", renew_lock.sync_detailed(lock, client=user, body=renewal), HTTPStatus.OK)
    out = Release(fence=fence)
    w.done("release_lock", release_lock.sync_detailed(lock, client=user, body=out), gone)  # 204

    # Wallets: a top-up sent twice with one Idempotency-Key runs once.
    wallet = f"wallet-{suffix}"
    for _ in range(2):
        topped = top_up_wallet.sync_detailed(
            wallet, client=user, body=TopUp(amount=500), idempotency_key=f"top-up-{suffix}"
        )
        w.ok("top_up_wallet", topped, created)
    if topped.headers.get("idempotent-replayed") != "true":
        raise WalkError("top_up_wallet: the second top-up with the same key was not a replay")
    w.ok("get_wallet", get_wallet.sync_detailed(wallet, client=user), HTTPStatus.OK)

    # Inventory: one reservation confirmed, one released.
    chair = f"chair-{suffix}"
    stocked = create_inventory.sync_detailed(client=admin, body=NewInventory(sku=chair, units=5))
    w.ok("create_inventory", stocked, created)
    w.ok("get_inventory", get_inventory.sync_detailed(chair, client=user), HTTPStatus.OK)
    w.ok("count_inventory", count_inventory.sync_detailed(chair, client=admin), HTTPStatus.OK)
    one = Reservation(quantity=1)
    held = [reserve.sync_detailed(chair, client=user, body=one) for _ in range(2)]
    for reservation in held:
        w.ok("reserve", reservation, created)
    kept, dropped = (last_segment(reservation) for reservation in held)
    w.ok("confirm", confirm.sync_detailed(chair, kept, client=user), HTTPStatus.OK)
    w.done("release", release.sync_detailed(chair, dropped, client=user), gone)  # 204
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
