"""Wallets API: top-ups that charge a payment provider inside a lease (FOR UPDATE)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from service import catalog, policy, runtime
from service.api.bodies import wallets as models
from service.api.resolver import Id, Resolver, created, ok
from service.domain import locks
from service.domain.payments import FakeProvider, PaymentProvider
from service.domain.wallets import Wallets
from service.observability import observed

app = Resolver("wallets")

provider: runtime.Lazy[PaymentProvider] = runtime.Lazy(FakeProvider)


def _wallets() -> Wallets:
    tables = catalog.tables("wallets")
    client = runtime.dynamodb.get()
    return Wallets(
        client=client,
        table=tables["wallets"],
        leases=locks.leases(client, tables["leases"]),
        provider=provider.get(),
        idempotency=runtime.idempotency.get(),
    )


wallets: runtime.Lazy[Wallets] = runtime.Lazy(_wallets)


@app.declared
def top_up_wallet(walletId: Id, body: models.TopUpRequest) -> Response[Any]:
    def answer(receipt: dict[str, Any]) -> Response[Any]:
        return created(receipt, f"/wallets/{walletId}")

    caller = app.caller()
    claim = app.claim(answer)  # the answer commits with the credit
    # A lease taken here must not outlive this invocation: Lambda's context says how long it has.
    receipt = wallets.get().top_up(
        walletId,
        body.amount,
        remaining_ms=getattr(app.lambda_context, "get_remaining_time_in_millis", None),
        claim=claim,
        owner=lambda current: policy.wallet_owner(caller, current),
    )
    return answer(receipt)


@app.declared
def get_wallet(walletId: Id) -> Response[Any]:
    wallet = wallets.get().get(walletId)
    policy.require_owner(app.caller(), wallet.get("owner"), write=False, what="wallet")
    return ok(wallet)


@observed
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
