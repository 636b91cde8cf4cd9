"""The payment provider a wallet top-up charges: an external side effect that must happen exactly
once per accepted request.

There is no real provider behind turnstile. :class:`FakeProvider` stands in for one, locally, in
tests and in the deployed demo: it records every call (thread-safe), and can be made slow, gated on
an event, or failing, so tests can pause a holder mid-critical-section or watch a provider outage.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class ProviderError(Exception):
    """The provider refused or could not be reached; nothing was charged."""


class PaymentProvider(Protocol):
    def charge(
        self, wallet_id: str, amount: int, reference: str, *, idempotency_key: str | None = None
    ) -> str:
        """Charge ``amount`` for ``wallet_id``; ``reference`` is our request id. Returns the
        provider's charge id. Raises :class:`ProviderError` when nothing was charged.

        ``idempotency_key``: as real payment APIs offer, a second charge under the same key returns
        the first charge instead of charging again (for a client's retry of one request)."""
        ...

    def refund(self, charge_id: str) -> None:
        """Give a charge back (compensation when the charge could not be recorded)."""
        ...


@dataclass(frozen=True)
class Call:
    kind: str  # "charge" or "refund"
    wallet_id: str
    amount: int
    reference: str
    charge_id: str


@dataclass
class FakeProvider:
    """Records every call. ``before_charge`` runs inside each charge (block on an event, wait at a
    barrier); ``delay_seconds`` makes it slow; ``fail`` decides per call whether to refuse."""

    delay_seconds: float = 0.0
    before_charge: Callable[[str, int, str], None] | None = None
    fail: Callable[[str, int, str], bool] | None = None
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    _calls: list[Call] = field(default_factory=list, repr=False)
    _by_key: dict[str, str] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def charge(
        self, wallet_id: str, amount: int, reference: str, *, idempotency_key: str | None = None
    ) -> str:
        if idempotency_key is not None:
            with self._lock:
                if idempotency_key in self._by_key:
                    return self._by_key[idempotency_key]
        if self.before_charge is not None:
            self.before_charge(wallet_id, amount, reference)
        if self.delay_seconds:
            self.sleep(self.delay_seconds)
        if self.fail is not None and self.fail(wallet_id, amount, reference):
            raise ProviderError("the payment provider declined the charge")
        with self._lock:
            if idempotency_key is not None and idempotency_key in self._by_key:
                return self._by_key[idempotency_key]  # a concurrent call with the key won
            charge_id = f"ch_{uuid.uuid4().hex}"
            self._calls.append(Call("charge", wallet_id, amount, reference, charge_id))
            if idempotency_key is not None:
                self._by_key[idempotency_key] = charge_id
        return charge_id

    def refund(self, charge_id: str) -> None:
        with self._lock:
            original = next(c for c in self._calls if c.charge_id == charge_id)
            self._calls.append(
                Call("refund", original.wallet_id, original.amount, original.reference, charge_id)
            )

    def calls(self, kind: str | None = None) -> list[Call]:
        with self._lock:
            return [call for call in self._calls if kind is None or call.kind == kind]
