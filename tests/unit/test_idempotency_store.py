"""turnstile_ddb.idempotency on moto (API shape): claims, replays, takeover of an abandoned
claim."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from turnstile_ddb import idempotency
from turnstile_ddb.idempotency import Claim, IdempotencyStore, Replay


@pytest.fixture
def store(moto_ddb: Any, moto_tables: Any) -> tuple[IdempotencyStore, list[float]]:
    now = [1000.0]
    return (
        IdempotencyStore(
            client=moto_ddb, table=moto_tables["idempotency"], lock_ms=30_000, clock=lambda: now[0]
        ),
        now,
    )


def test_first_claims_then_replays_the_stored_answer(store):
    s, _ = store
    claim = s.begin("k1", "fp-a")
    assert isinstance(claim, Claim)
    with pytest.raises(idempotency.StillRunning):
        s.begin("k1", "fp-a")
    assert s.complete(claim, 201, {"ok": True})
    assert s.begin("k1", "fp-a") == Replay(201, {"ok": True})


def test_a_different_request_under_the_key_is_refused(store):
    s, _ = store
    s.begin("k2", "fp-a")
    with pytest.raises(idempotency.KeyReused):
        s.begin("k2", "fp-b")


def test_an_abandoned_claim_is_taken_over_only_by_the_same_request(store):
    # Given a claim whose holder died, and its lock has lapsed
    s, now = store
    first = s.begin("k3", "fp-a")
    assert isinstance(first, Claim)
    now[0] += 31
    # When a different request arrives under the key, it is refused, not let in
    with pytest.raises(idempotency.KeyReused):
        s.begin("k3", "fp-b")
    # And the same request takes the claim over; the dead holder can no longer complete it
    second = s.begin("k3", "fp-a")
    assert isinstance(second, Claim) and second.token != first.token
    assert not s.complete(first, 201, {"late": True})
    assert s.complete(second, 201, {"ok": True})
    assert s.begin("k3", "fp-a") == Replay(201, {"ok": True})


def test_a_replay_repeats_only_the_headers_the_caller_named(store):
    # Given a store that keeps Location with an answer (the library itself names no header)
    s, _ = store
    keeping = dataclasses.replace(s, replayed_headers=("Location",))
    claim = keeping.begin("k-headers", "fp-a")
    assert isinstance(claim, Claim)
    # When the answer is stored with more headers than that
    keeping.complete(claim, 201, {"ok": 1}, {"Location": "/things/1", "X-Trace": "abc"})
    # Then the replay carries exactly the named one
    assert keeping.begin("k-headers", "fp-a") == Replay(201, {"ok": 1}, {"Location": "/things/1"})
    # And a store naming none keeps none
    plain = s.begin("k-plain", "fp-a")
    assert isinstance(plain, Claim)
    s.complete(plain, 200, {}, {"Location": "/x"})
    assert s.begin("k-plain", "fp-a") == Replay(200, {}, {})


def test_the_key_attribute_is_the_tables_own(moto_ddb):
    # Given a table keyed by "pk" rather than "id"
    moto_ddb.create_table(
        TableName="keyed-by-pk",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    s = IdempotencyStore(client=moto_ddb, table="keyed-by-pk", key_attr="pk")
    # When a key is begun, completed and released elsewhere, every call addresses "pk"
    claim = s.begin("k", "fp")
    assert isinstance(claim, Claim)
    assert s.complete(claim, 201, {"n": 1})
    assert s.begin("k", "fp") == Replay(201, {"n": 1})
    with pytest.raises(idempotency.KeyReused):
        s.begin("k", "other")
    stored = moto_ddb.get_item(TableName="keyed-by-pk", Key={"pk": {"S": "k"}})["Item"]
    assert stored["status"] == {"S": "COMPLETED"}
