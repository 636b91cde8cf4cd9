"""A client retrying a top-up with its Idempotency-Key is charged once and credited once, even when
the first attempt charged the provider and then failed to record it."""

from __future__ import annotations

from typing import Any

from service.domain.payments import FakeProvider
from service.handlers import wallets
from tests.helpers import Faults, balance, invoke, top_up
from turnstile_ddb import retry


def use(wired: Any, client: Any, provider: FakeProvider) -> None:
    wired(client)
    wallets.provider.set(provider)


def test_a_retried_top_up_is_replayed_not_charged_again(wired, ddb, unique):
    provider = FakeProvider()
    use(wired, ddb, provider)
    first = invoke(wallets.handler, top_up(unique, 40, key=f"t-{unique}"))
    again = invoke(wallets.handler, top_up(unique, 40, key=f"t-{unique}"))
    assert first[0] == again[0] == 201 and again[2] == first[2]
    assert len(provider.calls("charge")) == 1
    assert balance(unique) == 40


def test_without_a_key_a_retry_is_a_new_top_up(wired, ddb, unique):
    """The contrast: the lease stops repeats inside one request, not a client's second request."""
    provider = FakeProvider()
    use(wired, ddb, provider)
    invoke(wallets.handler, top_up(unique, 40, key=None))
    invoke(wallets.handler, top_up(unique, 40, key=None))
    assert len(provider.calls("charge")) == 2
    assert balance(unique) == 80


def test_a_retry_after_the_charge_was_made_but_not_recorded_charges_once(
    wired, ddb, dynamodb_local, unique
):
    # Given a provider, and a database that rejects the top-up's final transaction for a while
    provider = FakeProvider()
    failing = dynamodb_local.client(config=retry.client_config())
    Faults(failing).throttle("TransactWriteItems", 100)
    use(wired, failing, provider)
    # When the first attempt charges the provider and then cannot record the top-up
    first = invoke(wallets.handler, top_up(unique, 25, key=f"o-{unique}"))
    assert (first[0], first[2]["error"]) == (503, "THROTTLED")
    assert len(provider.calls("charge")) == 1
    # And the client retries with the same key once the database is back
    use(wired, ddb, provider)
    retried = invoke(wallets.handler, top_up(unique, 25, key=f"o-{unique}"))
    # Then the provider returned its first charge instead of charging again; credited once
    assert retried[0] == 201
    assert len(provider.calls("charge")) == 1
    assert retried[2]["chargeId"] == provider.calls("charge")[0].charge_id
    assert balance(unique) == 25


def test_a_top_up_whose_write_is_refused_gives_the_charge_back(wired, ddb, unique, monkeypatch):
    from turnstile_ddb import transact

    # Given a top-up whose final transaction is cancelled by a condition other than the lease
    provider = FakeProvider()
    use(wired, ddb, provider)
    service = wallets.wallets.get()

    def refused(*args: Any, **kwargs: Any) -> None:
        raise transact.Cancelled([transact.Reason("ConditionalCheckFailed", "claim taken", None)])

    monkeypatch.setattr(service.leases, "transact", refused)
    # When it runs
    status, _, body = invoke(wallets.handler, top_up(unique, 30, key=None))
    # Then the client is told it conflicted, and the provider got its charge back
    assert (status, body["error"]) == (409, "CONFLICT")
    assert len(provider.calls("charge")) == 1 and len(provider.calls("refund")) == 1
