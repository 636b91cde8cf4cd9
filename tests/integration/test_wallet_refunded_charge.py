"""Regression for a chaos nemesis finding (run seed 7), fixed by the charge# markers.

A keyed top-up charges the provider, loses its lease while charging, refunds the charge, and dies
before its answer is stored. The client's retry under the same key gets the provider's first
charge back for that key (as real payment APIs do); before the fix it credited it although it was
refunded: a credit without a standing charge. Now the retry is refused and nothing is credited.

Time is a clock the test moves (the leases' and the idempotency store's injected ``clock``), so
"the charge outlasts the lease" and "the claim lapses" are steps of the test, not sleeps.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from botocore.awsrequest import AWSPreparedRequest

from service import config, runtime
from service.domain import locks
from service.domain.payments import FakeProvider
from service.domain.wallets import Wallets, lease_resource
from service.handlers import wallets as wallet_handler
from tests.helpers import invoke, proxy_event
from turnstile_ddb import retry
from turnstile_ddb.idempotency import IdempotencyStore

pytestmark = pytest.mark.integration


class Died(BaseException):
    """The function instance stopped here (not an Exception: nothing may handle it)."""


def top_up(wallet_id: str, amount: int, key: str) -> dict:
    return proxy_event(
        "POST",
        "/wallets/{walletId}/top-ups",
        f"/wallets/{wallet_id}/top-ups",
        body=json.dumps({"amount": amount}),
        headers={"Content-Type": "application/json", "Idempotency-Key": key},
        params={"walletId": wallet_id},
    )


def test_a_retry_never_credits_a_charge_its_first_attempt_refunded(
    wired, tables, dynamodb_local, unique
):
    client = dynamodb_local.client(config=retry.client_config())
    wired(client)
    now = [time.time()]  # the one clock of this test: it moves only when the test says so
    leases = dataclasses.replace(locks.leases(client, tables[config.LEASES]), clock=lambda: now[0])
    dying = {"now": False}

    def die_after_refund(request: AWSPreparedRequest, **_: object) -> None:
        if dying["now"]:
            dying["now"] = False
            raise Died("the instance died after refunding")

    client.meta.events.register("before-send.dynamodb", die_after_refund)

    def slow_first_charge(wallet_id: str, amount: int, reference: str) -> None:
        if not provider.calls():
            now[0] += 0.4  # past the 200 ms lease: another request takes the wallet meanwhile
            leases.release(leases.acquire(lease_resource(wallet_id), "intruder", 1000))

    provider = FakeProvider(before_charge=slow_first_charge)
    real_refund = provider.refund

    def refund_then_die(charge_id: str) -> None:
        real_refund(charge_id)
        dying["now"] = True  # the next DynamoDB call (the lease release) never comes back

    provider.refund = refund_then_die  # type: ignore[method-assign]
    store = IdempotencyStore(
        client=client,
        table=tables[config.IDEMPOTENCY],
        backoff=config.call_backoff(),
        lock_ms=300,
        keep_seconds=60,
        clock=lambda: now[0],
    )
    runtime.idempotency.set(store)
    wallet_handler.wallets.set(
        Wallets(
            client=client,
            table=tables[config.WALLETS],
            leases=leases,
            provider=provider,
            idempotency=store,
            lease_ms=200,
        )
    )
    key = f"w-{unique}"
    with pytest.raises(Died):
        wallet_handler.handler(top_up(unique, 25, key), None)
    assert [call.kind for call in provider.calls()] == ["charge", "refund"]
    now[0] += 0.5  # the first attempt's claim (300 ms) lapses; the client retries with its key
    status, _, body = invoke(wallet_handler.handler, top_up(unique, 25, key))
    refunded = {call.charge_id for call in provider.calls("refund")}
    assert status != 201 or body["chargeId"] not in refunded, body  # the bug: 201, refunded
    assert (status, body["error"]) == (409, "LOCK_LOST"), body
    wallet = client.get_item(
        TableName=tables[config.WALLETS], Key={"walletId": {"S": unique}}, ConsistentRead=True
    ).get("Item")
    assert wallet is None or wallet["balance"]["N"] == "0"
