"""Idempotency: a client retries a request; the side effect happens once, the answer is replayed.

``begin`` puts the key's record with ``attribute_not_exists(id)``; whoever wins runs the request
and stores its answer (``token = :token AND status = :in_progress``). A retry finds the stored
answer; the same key with a different request is refused.
"""

from __future__ import annotations

from _local import client, create_table

from turnstile_ddb import idempotency

ddb = client()
store = idempotency.IdempotencyStore(ddb, create_table(ddb, "idempotency", "id"))
charges: list[int] = []


def charge(key: str, amount: int) -> object:
    started = store.begin(key, idempotency.fingerprint("charge", amount))
    if isinstance(started, idempotency.Replay):
        return started.answer
    charges.append(amount)  # the side effect
    answer = {"charged": amount, "charge": len(charges)}
    store.complete(started, answer)
    return answer


first = charge("key-1", 30)
again = charge("key-1", 30)
print(f"first answer {first}, retried answer {again}, {len(charges)} charge(s)")
assert first == again and charges == [30]
try:
    charge("key-1", 99)
    raise SystemExit("a reused key must be refused")
except idempotency.KeyReused:
    print("the same key with another amount is refused")
