"""Wallets API (seed 004): top-ups that charge a payment provider inside a lease (FOR UPDATE)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from service import config, runtime
from service.api import schema
from service.api.http import Api, Request, Response, Route, created, ok
from service.domain import locks
from service.domain.payments import FakeProvider, PaymentProvider
from service.domain.wallets import Wallets

TABLES = (config.LEASES, config.WALLETS, config.IDEMPOTENCY)

provider: runtime.Lazy[PaymentProvider] = runtime.Lazy(FakeProvider)
wallets: runtime.Lazy[Wallets] = runtime.Lazy(lambda: _wallets(config.Tables.from_env(*TABLES)))


def _wallets(tables: config.Tables) -> Wallets:
    client = runtime.dynamodb.get()
    return Wallets(
        client=client,
        table=tables[config.WALLETS],
        leases=locks.leases(client, tables[config.LEASES]),
        provider=provider.get(),
        idempotency=runtime.idempotency.get(),
    )


# The Lambda context of the invocation this thread serves: a lease must not outlive it.
_invocation = threading.local()


def _remaining_ms() -> Callable[[], int] | None:
    context = getattr(_invocation, "context", None)
    return getattr(context, "get_remaining_time_in_millis", None)


def top_up_wallet(request: Request) -> Response:
    wallet_id = request.params["walletId"]

    def answer(receipt: dict[str, Any]) -> Response:
        return created(receipt, f"/wallets/{wallet_id}")

    if request.claim is not None:  # the answer commits with the credit: so do its headers
        request.claim.headers_for = lambda receipt: answer(receipt).headers
    receipt = wallets.get().top_up(
        wallet_id, request.body["amount"], remaining_ms=_remaining_ms(), claim=request.claim
    )
    return answer(receipt)


def get_wallet(request: Request) -> Response:
    return ok(wallets.get().get(request.params["walletId"]))


ROUTES = [
    Route(
        "POST",
        "/wallets/{walletId}/top-ups",
        top_up_wallet,
        "Charge the payment provider and credit the wallet, under the wallet's lease",
        body=schema.obj({"amount": schema.integer(1, config.MAX_TOP_UP)}),
        success=201,
        errors=("LOCKED", "LOCK_LOST", "PAYMENT_FAILED"),
        idempotent=True,
    ),
    Route(
        "GET",
        "/wallets/{walletId}",
        get_wallet,
        "Read a wallet's balance (strongly consistent)",
        errors=("NOT_FOUND",),
    ),
]

api: runtime.Lazy[Api] = runtime.Lazy(lambda: Api(ROUTES, runtime.idempotency.get))


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    _invocation.context = context
    try:
        return api.get()(event, context)
    finally:
        _invocation.context = None
