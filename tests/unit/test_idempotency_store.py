"""turnstile_ddb.idempotency on moto (API shape): in-progress records, replays of an opaque
answer (and of records written by turnstile-ddb 0.3), takeover of an abandoned record."""

from __future__ import annotations

from typing import Any

import pytest

from turnstile_ddb import codec, idempotency
from turnstile_ddb.idempotency import IdempotencyStore, InProgress, RecordNames, Replay


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
    assert isinstance(claim, InProgress)
    with pytest.raises(idempotency.StillRunning):
        s.begin("k1", "fp-a")
    assert s.complete(claim, {"ok": True})
    assert s.begin("k1", "fp-a") == Replay({"ok": True})


def test_a_different_request_under_the_key_is_refused(store):
    s, _ = store
    s.begin("k2", "fp-a")
    with pytest.raises(idempotency.KeyReused):
        s.begin("k2", "fp-b")


def test_an_abandoned_claim_is_taken_over_only_by_the_same_request(store):
    # Given a claim whose holder died, and its lock has lapsed
    s, now = store
    first = s.begin("k3", "fp-a")
    assert isinstance(first, InProgress)
    now[0] += 31
    # When a different request arrives under the key, it is refused, not let in
    with pytest.raises(idempotency.KeyReused):
        s.begin("k3", "fp-b")
    # And the same request takes the claim over; the dead holder can no longer complete it
    second = s.begin("k3", "fp-a")
    assert isinstance(second, InProgress) and second.token != first.token
    assert not s.complete(first, {"late": True})
    assert s.complete(second, {"ok": True})
    assert s.begin("k3", "fp-a") == Replay({"ok": True})


def test_the_answer_is_opaque_and_replays_as_it_was_stored(store):
    # Given an answer of the caller's own shape (the library knows no protocol)
    s, _ = store
    begun = s.begin("k-opaque", "fp-a")
    assert isinstance(begun, InProgress)
    answer = {"outcome": "made", "ids": [1, 2], "note": None}
    # When it is stored, then a retry replays exactly it
    assert s.complete(begun, answer)
    assert s.begin("k-opaque", "fp-a") == Replay(answer)


def test_a_record_written_by_version_0_3_still_replays(store, moto_ddb, moto_tables):
    # Given a COMPLETED record as turnstile-ddb 0.3 wrote it: statusCode, body and headers
    s, _ = store
    old = {
        "id": "k-old",
        "status": "COMPLETED",
        "fingerprint": "fp-a",
        "token": "t",
        "statusCode": 201,
        "body": '{"ok":1}',
        "headers": '{"Location":"/things/1"}',
        "expiresAt": 2_000,
    }
    moto_ddb.put_item(TableName=moto_tables["idempotency"], Item=codec.encode_item(old))
    # When the same request comes again, then it replays the old answer, as a mapping of those
    # attributes with their JSON decoded
    assert s.begin("k-old", "fp-a") == Replay(
        {"statusCode": 201, "body": {"ok": 1}, "headers": {"Location": "/things/1"}}
    )
    # And a record that had no headers replays without them
    bare = {k: v for k, v in old.items() if k != "headers"}
    moto_ddb.put_item(
        TableName=moto_tables["idempotency"], Item=codec.encode_item({**bare, "id": "k-bare"})
    )
    assert s.begin("k-bare", "fp-a") == Replay({"statusCode": 201, "body": {"ok": 1}})


def test_the_records_attribute_names_are_the_callers(store, moto_ddb, moto_tables):
    # Given a store that names the record's attributes its own way
    s, _ = store
    named = IdempotencyStore(
        client=moto_ddb,
        table=moto_tables["idempotency"],
        clock=s.clock,
        names=RecordNames(
            status="st", locked_until="until", token="tk", fingerprint="fp", answer="result"
        ),
    )
    # When a key is begun, found running, completed and replayed
    begun = named.begin("k-named", "fp-a")
    assert isinstance(begun, InProgress)
    with pytest.raises(idempotency.StillRunning):
        named.begin("k-named", "fp-a")
    assert named.complete(begun, [1])
    assert named.begin("k-named", "fp-a") == Replay([1])
    # Then the record holds exactly those names
    stored = moto_ddb.get_item(TableName=moto_tables["idempotency"], Key={"id": {"S": "k-named"}})[
        "Item"
    ]
    assert set(stored) == {"id", "st", "tk", "fp", "result", "expiresAt"}
    # And a released key is free again under the same names
    again = named.begin("k-named-2", "fp-a")
    assert isinstance(again, InProgress)
    named.release(again)
    assert isinstance(named.begin("k-named-2", "fp-a"), InProgress)


def test_answer_of_shapes_a_result_when_asked_to():
    begun = InProgress(key="k", token="t", locked_until=0)
    assert begun.answer_of({"id": 1}) == {"id": 1}
    begun.answer_for = lambda result: {"code": 201, "body": result}
    assert begun.answer_of({"id": 1}) == {"code": 201, "body": {"id": 1}}


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
    assert isinstance(claim, InProgress)
    assert s.complete(claim, {"n": 1})
    assert s.begin("k", "fp") == Replay({"n": 1})
    with pytest.raises(idempotency.KeyReused):
        s.begin("k", "other")
    stored = moto_ddb.get_item(TableName="keyed-by-pk", Key={"pk": {"S": "k"}})["Item"]
    assert stored["status"] == {"S": "COMPLETED"}
