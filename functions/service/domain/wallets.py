"""Wallet top-ups: a read-modify-write whose middle step charges a payment provider.

Table layout: one item per wallet in the wallets table, partition key ``walletId``; attributes
``balance`` (integer, minor units), ``topUps`` (count), ``lastTopUpId``, ``fence`` (the lease fence
of the last write), ``owner`` (the ``sub`` of whoever made its first top-up, see
docs/identity.md). The lease lives in the lease table under ``wallet/<walletId>``.

One item per provider charge in the same table, ``walletId = charge#<chargeId>`` (``#`` never
appears in a wallet id): ``status`` CREDITED (with the ``receipt`` of the credit) or REFUNDED. It
is put with ``attribute_not_exists(walletId)``, in the credit's own transaction or before a
refund, so whichever comes first decides the charge's fate for good: a charge is credited at most
once, and never refunded once credited (nor credited once refunded).

A top-up, in order::

    1. acquire the lease (waiting up to WALLET_LOCK_WAIT_MS; then 409 LOCKED)   <- FOR UPDATE
    2. read the wallet (strongly consistent)
    3. charge the provider                                                  <- the side effect
    4. TransactWriteItems [ConditionCheck lease owner+fence+not released+not expired,
                           Put wallet balance = read + amount,
                           Put charge#<id> CREDITED  (attribute_not_exists),
                           Update the Idempotency-Key record with the answer (with a key)]
    5. release the lease (also when 2-4 raised)

Only step 1 is ever repeated (by the waiting acquire), and nothing comes before it, so the charge
runs at most once per request and only for a request that holds the wallet. An emulated
SELECT ... FOR UPDATE that retries the whole transaction on a conflict charges on every retry.

Step 4 is fenced: if this request was paused past its lease (a slow provider) and another top-up
took the wallet over, the write is refused (409 LOCK_LOST) and the charge is refunded, so neither
the successor's balance nor the provider's ledger is left wrong. Any other refused write (a
cancelled transaction: known not applied) is refunded too. A refund first puts ``charge#<id>``
REFUNDED; if that finds the charge CREDITED (a retry of this very request committed it while this
attempt was paused), nothing is refunded and the committed receipt is the answer. A write that
could not be sent at all (the database stayed busy: 503) is not refunded: with an
``Idempotency-Key`` the client's retry records the same charge instead (see below).

A client's *retry* of a top-up is a different matter: the lease makes each request charge at most
once, but a retried request is a new request. With an ``Idempotency-Key`` (its
:class:`turnstile_ddb.idempotency.InProgress` record), a provider key derived from the key *and the
request's fingerprint* goes to the provider (a different amount under the same key is a different
charge), and the stored answer commits in step 4's transaction. A retry after any failure, even a
crash between the charge and the write, or after the key's record expired, then finds either the
stored answer, or the provider's first charge and its ``charge#`` item: one charge, one credit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from service import config
from service.domain import locks
from service.domain.errors import LockLost, NotFound, PaymentFailed
from service.domain.payments import PaymentProvider, ProviderError
from turnstile_ddb import (
    codec,
    creation,
    idempotency,
    lease,
    metrics,
    retry,
    transact,
    versioned,
)
from turnstile_ddb.idempotency import IdempotencyStore, InProgress

WALLET_KEY = "walletId"  # the table's partition key
CREDITED = "CREDITED"
REFUNDED = "REFUNDED"


def lease_resource(wallet_id: str) -> str:
    return f"wallet/{wallet_id}"


def charge_key(charge_id: str) -> dict[str, str]:
    """The ``charge#<id>`` item that records what became of one provider charge."""
    return {WALLET_KEY: f"charge#{charge_id}"}


def provider_key(claim: InProgress) -> str:
    """The provider's idempotency key: the client's key bound to the request's fingerprint, so
    the same key with another body (after its record expired) can never reuse a charge."""
    return idempotency.fingerprint(claim.key, claim.fingerprint)


# Given a wallet's recorded owner (None before its first top-up), the owner to record; raises to
# refuse the caller.
OwnerRule = Callable[[str | None], str]


def _public(item: dict[str, Any]) -> dict[str, Any]:
    shown = {"walletId": item["walletId"], "balance": item["balance"], "topUps": item["topUps"]}
    if "owner" in item:
        shown["owner"] = item["owner"]
    return shown


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
        item = versioned.read(self.client, self.table, {WALLET_KEY: wallet_id}, self.backoff)
        if item is None:
            raise NotFound(f"no wallet {wallet_id!r}")
        return _public(item)

    def top_up(
        self,
        wallet_id: str,
        amount: int,
        *,
        remaining_ms: Callable[[], int] | None = None,
        claim: InProgress | None = None,
        owner: OwnerRule | None = None,
    ) -> dict[str, Any]:
        """``owner`` gets the wallet's recorded owner (None before its first top-up) and returns
        the owner to record, or raises to refuse (``service.policy.wallet_owner``). It is asked
        twice: on a plain read first, so a refused caller writes nothing (not even the lease),
        and again under the lease, where the answer is final (a first top-up by someone else may
        have landed in between)."""
        if owner is not None:
            found = versioned.read(self.client, self.table, {WALLET_KEY: wallet_id}, self.backoff)
            owner((found or {}).get("owner"))
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
                return self._locked_top_up(held, wallet_id, amount, top_up_id, claim, owner)
        except lease.Held as exc:
            raise locks.locked(exc, self.leases.now_ms()) from exc

    def _locked_top_up(
        self,
        held: lease.Lease,
        wallet_id: str,
        amount: int,
        top_up_id: str,
        claim: InProgress | None,
        owner: OwnerRule | None,
    ) -> dict[str, Any]:
        key = {WALLET_KEY: wallet_id}
        current = versioned.read(self.client, self.table, key, self.backoff) or {
            **key,
            "balance": 0,
            "topUps": 0,
        }
        if owner is not None:  # before the charge: a refused caller is never charged
            current = {**current, "owner": owner(current.get("owner"))}
        try:
            charge_id = self.provider.charge(
                wallet_id, amount, top_up_id, idempotency_key=provider_key(claim) if claim else None
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
        charge = {
            **charge_key(charge_id),
            "status": CREDITED,
            "wallet": wallet_id,
            "amount": amount,
            "topUpId": top_up_id,
            "receipt": json.dumps(receipt, separators=(",", ":")),
        }
        items: list[dict[str, Any]] = [
            {"Put": {"TableName": self.table, "Item": codec.encode_item(after)}},
            creation.put_new_op(self.table, charge, WALLET_KEY),
        ]
        if claim is not None:
            if self.idempotency is None:
                raise RuntimeError("a claim needs an idempotency store (Wallets(idempotency=...))")
            items.append(self.idempotency.complete_op(claim, claim.answer_of(receipt)))
        try:
            self.leases.transact(held, items)
        except lease.LeaseLost as exc:
            settled = self._refund_unless_credited(charge_id, wallet_id, amount, top_up_id)
            if settled is not None:
                return settled
            raise locks.lock_lost(exc, held.fence) from exc
        except transact.Cancelled as exc:
            if exc.failed_at(1):
                # This charge already has its fate (the key's record expired and the
                # provider handed back its first charge): credit it never twice
                return self._settled(exc.reasons[1].item or {})
            # Another condition refused the write (the idempotency claim was taken over): nothing
            # was applied, so the charge is given back before the refusal goes up.
            settled = self._refund_unless_credited(charge_id, wallet_id, amount, top_up_id)
            if settled is not None:
                return settled
            raise
        if claim is not None:
            claim.completed = True
        return receipt

    def _settled(self, charge: dict[str, Any]) -> dict[str, Any]:
        """The answer for a charge whose ``charge#`` item exists already."""
        metrics.count("ChargeAlreadySettled", pattern="wallets")
        if charge.get("status") == CREDITED:
            return dict(json.loads(charge["receipt"]))
        raise LockLost(
            "an earlier attempt of this request was refunded its charge; "
            "send a new Idempotency-Key to top up again",
            chargeId=str(charge.get("walletId", "")).removeprefix("charge#"),
        )

    def _refund_unless_credited(
        self, charge_id: str, wallet_id: str, amount: int, top_up_id: str
    ) -> dict[str, Any] | None:
        """Refund ``charge_id`` unless a committed credit holds it.

        Marks the charge REFUNDED first (``attribute_not_exists``: refused if it was credited
        meanwhile), then refunds. Returns the committed receipt when the charge is credited, so
        a late first attempt whose retry committed answers with that receipt, refunding nothing.
        """
        marker = {
            **charge_key(charge_id),
            "status": REFUNDED,
            "wallet": wallet_id,
            "amount": amount,
            "topUpId": top_up_id,
        }
        try:
            # The marker carries this attempt's top-up id as its token: a resend after a lost
            # reply finds its own marker (created, resent) and goes on to refund.
            creation.create_if_absent(
                self.client,
                table=self.table,
                item=marker,
                key_attr=WALLET_KEY,
                backoff=self.backoff,
                pattern="dynamodb",
                token=top_up_id,
            )
        except creation.AlreadyExists as exc:
            current = exc.current or {}
            if current.get("status") == CREDITED:
                metrics.count("RefundRefused", pattern="wallets")
                return dict(json.loads(current["receipt"]))
            return None  # another attempt marked it and refunds it: never refund twice
        self.provider.refund(charge_id)
        return None
