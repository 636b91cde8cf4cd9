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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from service.lru import LRU

MAX_CALLS = 10_000  # calls recorded (tests read a few; the deployed demo reads none)
MAX_KEYS = 10_000  # idempotency keys remembered: far more top-ups than one runs between two tries


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
    barrier); ``delay_seconds`` makes it slow; ``fail`` decides per call whether to refuse.

    It lives as long as its execution environment (the deployed demo's too), so it keeps the
    ``max_calls`` most recent calls and the ``max_keys`` most recently used idempotency keys: a
    real provider forgets keys too (after a day, say), and this one's keys were never shared
    between environments anyway. A refund of a charge already forgotten is recorded with the
    charge id alone."""

    delay_seconds: float = 0.0
    before_charge: Callable[[str, int, str], None] | None = None
    fail: Callable[[str, int, str], bool] | None = None
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    max_calls: int = MAX_CALLS
    max_keys: int = MAX_KEYS
    _calls: deque[Call] = field(init=False, repr=False)
    _by_key: LRU[str, str] = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._calls = deque(maxlen=self.max_calls)
        self._by_key = LRU(self.max_keys)

    def charge(
        self, wallet_id: str, amount: int, reference: str, *, idempotency_key: str | None = None
    ) -> str:
        if idempotency_key is not None:
            with self._lock:
                known = self._by_key.get(idempotency_key)
                if known is not None:
                    return known
        if self.before_charge is not None:
            self.before_charge(wallet_id, amount, reference)
        if self.delay_seconds:
            self.sleep(self.delay_seconds)
        if self.fail is not None and self.fail(wallet_id, amount, reference):
            raise ProviderError("the payment provider declined the charge")
        with self._lock:
            known = None if idempotency_key is None else self._by_key.get(idempotency_key)
            if known is not None:
                return known  # a concurrent call with the key won
            charge_id = f"ch_{uuid.uuid4().hex}"
            self._calls.append(Call("charge", wallet_id, amount, reference, charge_id))
            if idempotency_key is not None:
                self._by_key.put(idempotency_key, charge_id)
        return charge_id

    def refund(self, charge_id: str) -> None:
        with self._lock:
            original = next(
                (
                    c
                    for c in reversed(self._calls)
                    if c.charge_id == charge_id and c.kind == "charge"
                ),
                Call("charge", "", 0, "", charge_id),  # forgotten: older than max_calls calls
            )
            self._calls.append(
                Call("refund", original.wallet_id, original.amount, original.reference, charge_id)
            )

    def calls(self, kind: str | None = None) -> list[Call]:
        with self._lock:
            return [call for call in self._calls if kind is None or call.kind == kind]
