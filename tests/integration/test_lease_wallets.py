"""The FOR UPDATE flow (wallet top-ups) against DynamoDB Local: the provider charge runs once per
accepted top-up, and a retry-the-whole-transaction version, for contrast, charges again."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from service.domain import locks
from service.domain.errors import Locked, LockLost
from service.domain.payments import FakeProvider
from service.domain.wallets import Wallets
from turnstile_ddb import retry, versioned

THREADS = 20


class Clock:
    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


def wallets(ddb: Any, tables: Any, provider: FakeProvider, **overrides: Any) -> Wallets:
    return Wallets(
        client=ddb,
        table=tables["wallets"],
        leases=locks.leases(ddb, tables["leases"]),
        provider=provider,
        **overrides,
    )


def run_at_once(count: int, action: Any) -> list[Any]:
    """Run ``action(n)`` on ``count`` threads released together; results or exceptions."""
    start = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(n: int) -> None:
        start.wait()
        try:
            results[n] = action(n)
        except Exception as exc:  # noqa: BLE001 - recorded for the assertions
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_retrying_the_whole_transaction_repeats_the_charge(ddb, tables, unique):
    # Given an emulated SELECT ... FOR UPDATE: read, charge, version-checked write, and on a
    # conflict the whole thing again; and a provider where the first THREADS charges meet at a
    # barrier, so every request has read the same version before anyone writes
    meet = threading.Barrier(THREADS)
    seen = iter(range(10**6))
    lock = threading.Lock()

    def rendezvous(*_: Any) -> None:
        with lock:
            first_round = next(seen) < THREADS
        if first_round:
            meet.wait(timeout=60)

    provider = FakeProvider(before_charge=rendezvous)
    wallet_id = f"naive-{unique}"

    def top_up_retrying_whole(n: int) -> int:
        reference = uuid.uuid4().hex

        def decide(item: dict[str, Any] | None) -> dict[str, Any]:
            provider.charge(wallet_id, 1, reference)  # the side effect inside the retried part
            return {"balance": (item or {}).get("balance", 0) + 1}

        versioned.update_versioned(
            ddb,
            table=tables["wallets"],
            key={"walletId": wallet_id},
            decide=decide,
            backoff=retry.Backoff(),
            conflicts=retry.Backoff(attempts=200, base=0.001, cap=0.02),
        )
        return n

    # When THREADS top-ups of 1 run at once
    results = run_at_once(THREADS, top_up_retrying_whole)

    # Then each top-up committed once, yet the provider was charged far more often:
    # all but one lost the first race and charged again on the retry
    assert results == list(range(THREADS))
    stored = versioned.read(ddb, tables["wallets"], {"walletId": wallet_id}, retry.Backoff())
    assert stored is not None and stored["balance"] == THREADS
    assert len(provider.calls("charge")) >= 2 * THREADS - 1


def test_lease_version_charges_exactly_once_per_accepted_top_up(ddb, tables, unique):
    # Given the lease-guarded top-up and a provider that records every call
    provider = FakeProvider()
    service = wallets(ddb, tables, provider, wait_ms=60_000)
    wallet_id = f"lease-{unique}"

    # When THREADS top-ups of different amounts run at once
    results = run_at_once(THREADS, lambda n: service.top_up(wallet_id, n + 1))

    # Then every one was accepted, charged once, and the balance is the sum of the charges
    assert all(isinstance(r, dict) for r in results), results
    charges = provider.calls("charge")
    assert sorted(c.reference for c in charges) == sorted(r["topUpId"] for r in results)
    assert provider.calls("refund") == []
    assert service.get(wallet_id) == {
        "walletId": wallet_id,
        "balance": sum(c.amount for c in charges),
        "topUps": THREADS,
    }
    assert sum(c.amount for c in charges) == sum(range(1, THREADS + 1))
    # And fences strictly increased in commit order
    assert sorted(r["balance"] for r in results) == [
        r["balance"] for r in sorted(results, key=lambda r: r["fence"])
    ]


def test_paused_top_up_is_refused_and_refunded_when_another_took_over(ddb, tables, unique):
    # Given top-up A is inside its lease, paused in a slow provider call (an event gate)
    wallet_id = f"paused-{unique}"
    inside, resume = threading.Event(), threading.Event()

    def gate(wallet: str, amount: int, reference: str) -> None:
        if amount == 100:
            inside.set()
            assert resume.wait(timeout=60)

    provider = FakeProvider(before_charge=gate)
    slow = wallets(ddb, tables, provider)
    outcome: dict[str, Any] = {}

    def run_a() -> None:
        try:
            outcome["a"] = slow.top_up(wallet_id, 100)
        except LockLost as exc:
            outcome["a"] = exc

    a = threading.Thread(target=run_a)
    a.start()
    assert inside.wait(timeout=60)
    # When B, whose clock is past A's lease (as if A's pause outlasted it), tops up 5
    late = Wallets(
        client=ddb,
        table=tables["wallets"],
        leases=locks.leases(ddb, tables["leases"]),
        provider=provider,
    )
    late.leases.clock = Clock(offset=60)
    b = late.top_up(wallet_id, 5)
    resume.set()
    a.join()

    # Then A's write is refused (LOCK_LOST), its charge is refunded, and B's top-up stands
    assert isinstance(outcome["a"], LockLost)
    assert b["fence"] == 2 and b["balance"] == 5
    assert slow.get(wallet_id) == {"walletId": wallet_id, "balance": 5, "topUps": 1}
    kinds = sorted((c.kind, c.amount) for c in provider.calls())
    assert kinds == [("charge", 5), ("charge", 100), ("refund", 100)]


def test_top_up_on_a_held_wallet_gives_up_without_charging(ddb, tables, unique):
    # Given someone holds the wallet's lease
    provider = FakeProvider()
    service = wallets(ddb, tables, provider, wait_ms=0)
    wallet_id = f"held-{unique}"
    service.leases.acquire(f"wallet/{wallet_id}", "someone", 30_000)
    # When a top-up comes in and may not wait
    with pytest.raises(Locked) as refused:
        service.top_up(wallet_id, 10)
    # Then it is refused with the holder and a retry hint, and nothing was charged or written
    assert refused.value.details["owner"] == "someone"
    assert refused.value.details["retryAfterSeconds"] >= 1
    assert provider.calls() == []
    with pytest.raises(Exception, match="no wallet"):
        service.get(wallet_id)
