"""Wallet top-ups: a read-modify-write whose middle step charges a payment provider (seed 004).

Table layout: one item per wallet in the wallets table, partition key ``walletId``; attributes
``balance`` (integer, minor units), ``topUps`` (count), ``lastTopUpId``, ``fence`` (the lease fence
of the last write). The lease lives in the lease table under ``wallet/<walletId>``.

A top-up, in order::

    1. acquire the lease (waiting up to WALLET_LOCK_WAIT_MS; then 409 LOCKED)   <- FOR UPDATE
    2. read the wallet (strongly consistent)
    3. charge the provider                                                  <- the side effect
    4. TransactWriteItems [ConditionCheck lease owner+fence, Put wallet balance = read + amount]
    5. release the lease (also when 2-4 raised)

Only step 1 is ever repeated (by the waiting acquire), and nothing comes before it, so the charge
runs at most once per request and only for a request that holds the wallet. Seed 004's first
version retried the whole transaction on a conflict and charged again on every retry.

Step 4 is fenced: if this request was paused past its lease (a slow provider) and another top-up
took the wallet over, the write is refused (409 LOCK_LOST) and the charge is refunded, so neither
the successor's balance nor the provider's ledger is left wrong. Any other refused write (a
cancelled transaction: known not applied) is refunded too. A write that could not be sent at all
(the database stayed busy: 503) is not: whether it applied is not known for certain, and with an
``Idempotency-Key`` the client's retry records the same charge instead (see below).

A client's *retry* of a top-up is a different matter: the lease makes each request charge at most
once, but a retried request is a new request. With an ``Idempotency-Key`` (a
:class:`turnstile.idempotency.Claim`), the key goes to the provider as its own idempotency key, and
the stored answer commits in step 4's transaction. A retry after any failure, even a crash
between the charge and the write, then finds either the stored answer or the provider's first
charge: one charge, one credit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from service import config
from service.domain import locks
from service.domain.errors import NotFound, PaymentFailed
from service.domain.payments import PaymentProvider, ProviderError
from turnstile import codec, lease, retry, transact, versioned
from turnstile.idempotency import Claim, IdempotencyStore


def lease_resource(wallet_id: str) -> str:
    return f"wallet/{wallet_id}"


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "walletId": item["walletId"],
        "balance": item["balance"],
        "topUps": item["topUps"],
    }


@dataclass
class Wallets:
    client: Any
    table: str
    leases: lease.Leases
    provider: PaymentProvider
    idempotency: IdempotencyStore | None = None
    backoff: retry.Backoff = field(default_factory=config.call_backoff)
    lease_ms: int = config.WALLET_LEASE_MS
    wait_ms: int = config.WALLET_LOCK_WAIT_MS
    waits: retry.Backoff = field(
        default_factory=lambda: retry.Backoff(
            base=config.WALLET_WAIT_BASE_SECONDS, cap=config.WALLET_WAIT_CAP_SECONDS
        )
    )

    def get(self, wallet_id: str) -> dict[str, Any]:
        item = versioned.read(self.client, self.table, {"walletId": wallet_id}, self.backoff)
        if item is None:
            raise NotFound(f"no wallet {wallet_id!r}")
        return _public(item)

    def top_up(
        self,
        wallet_id: str,
        amount: int,
        *,
        remaining_ms: Callable[[], int] | None = None,
        claim: Claim | None = None,
    ) -> dict[str, Any]:
        top_up_id = uuid.uuid4().hex
        resource = lease_resource(wallet_id)
        try:
            with self.leases.hold(
                resource,
                f"top-up/{top_up_id}",
                self.lease_ms,
                wait_ms=self.wait_ms,
                waits=self.waits,
                remaining_ms=remaining_ms,
            ) as held:
                return self._locked_top_up(held, wallet_id, amount, top_up_id, claim)
        except lease.Held as exc:
            raise locks.locked(exc, self.leases.now_ms()) from exc

    def _locked_top_up(
        self, held: lease.Lease, wallet_id: str, amount: int, top_up_id: str, claim: Claim | None
    ) -> dict[str, Any]:
        key = {"walletId": wallet_id}
        current = versioned.read(self.client, self.table, key, self.backoff) or {
            **key,
            "balance": 0,
            "topUps": 0,
        }
        try:
            charge_id = self.provider.charge(
                wallet_id, amount, top_up_id, idempotency_key=claim.key if claim else None
            )
        except ProviderError as exc:
            raise PaymentFailed(f"the payment provider refused the charge: {exc}") from exc
        after = {
            **current,
            "balance": current["balance"] + amount,
            "topUps": current["topUps"] + 1,
            "lastTopUpId": top_up_id,
            "fence": held.fence,
        }
        receipt = {
            "topUpId": top_up_id,
            "walletId": wallet_id,
            "amount": amount,
            "balance": after["balance"],
            "fence": held.fence,
            "chargeId": charge_id,
        }
        items: list[dict[str, Any]] = [
            {"Put": {"TableName": self.table, "Item": codec.encode_item(after)}}
        ]
        if claim is not None:
            assert self.idempotency is not None, "a claim needs an idempotency store"
            items.append(self.idempotency.complete_op(claim, 201, receipt))
        try:
            self.leases.transact(held, items)
        except lease.Lost as exc:
            self.provider.refund(charge_id)
            raise locks.lock_lost(exc, held.fence) from exc
        except transact.Cancelled:
            # Another condition refused the write (the idempotency claim was taken over): nothing
            # was applied, so the charge is given back before the refusal goes up.
            self.provider.refund(charge_id)
            raise
        if claim is not None:
            claim.completed = True
        return receipt
