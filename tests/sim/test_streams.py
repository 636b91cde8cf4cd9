"""The stream path under the simulator (sim/streams.py): the stream faults do happen in the
default run, the consumers stay correct under them, and the properties can fail; and the model's
stream records (sim/model.py), which the differential test compares with DynamoDB Local's."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from botocore.exceptions import ClientError

from service.domain.registration_requests import REJECTED, Decision, RegistrationRequests
from sim.model import Model
from sim.run import Config, default_sizes, describe, run_seed
from turnstile_ddb import capacity, codec, retry

FAULTS = ("redelivered", "died", "bisected", "retried")
MIN_SEEDS, MAX_SEEDS = 6, 32


def _final(history: str) -> dict:
    last = history.rstrip("\n").rsplit("\n", 1)[1]
    assert last.startswith("# final ")
    return json.loads(last.removeprefix("# final "))["streams"]


@pytest.fixture(scope="module")
def default_runs():
    """The default configuration's seeds from 0, until each stream fault has happened at least
    once (at least MIN_SEEDS, at most MAX_SEEDS). The runs are deterministic, so the count is
    fixed for a given tree; a bisection needs a failure on a batch of two or more records, and
    is the rarest (seeds 12 and 14 of the first 16 once the resizing workload joined)."""
    runs, happened = [], Counter[str]()
    for seed in range(MAX_SEEDS):
        runs.append(run_seed(seed))
        happened.update(_final(runs[-1].history)["stream"])
        if len(runs) >= MIN_SEEDS and all(happened[fault] for fault in FAULTS):
            break
    return runs


def test_each_stream_fault_happens_in_the_default_run(default_runs):
    """Redelivered batches, invocations dying mid-batch, bisected batches and retried records
    all occur within MAX_SEEDS seeds of the default configuration, and the runs stay clean."""
    happened: Counter[str] = Counter()
    for result in default_runs:
        assert not result.report.violations, describe(result)
        happened.update(_final(result.history)["stream"])
    for fault in FAULTS:
        assert happened[fault] > 0, (fault, len(default_runs), happened)


def test_the_requests_fill_the_events_and_the_summary_consumer_writes(default_runs):
    """Not vacuous: requests are accepted and rejected (the events fill), and the summary
    consumer's transactions go through."""
    statuses: Counter[str] = Counter()
    summary_writes = 0
    for result in default_runs:
        statuses.update(_final(result.history)["requests"])
        summary_writes += sum(
            1
            for line in result.history.splitlines()
            if " pump-summary" in line and line.endswith("transact_write_items ok")
        )
    assert statuses["ACCEPTED"] > 0 and statuses["REJECTED"] > 0
    assert summary_writes > 0


def test_the_stream_workload_adds_a_modest_cost():
    """At most about 150 DynamoDB calls a seed on average (the seed budget of make test). Only
    the streams are left out of the other run: a kind missing from ``sizes_by_kind`` runs no
    client, so naming the streams alone would leave every registered workload out."""
    without = Config(sizes_by_kind={**default_sizes(), "streams": (0, 0)})
    added = [run_seed(seed).calls - run_seed(seed, without).calls for seed in range(4)]
    assert 0 < sum(added) / len(added) <= 150


@pytest.fixture
def decider_without_pending_check(monkeypatch):
    """A decider that never checks that the request is still PENDING: its acceptance's "still
    PENDING" element and its rejection are unconditioned, so a redelivered record decides its
    request again (a rejection rejected again; an accepted request, whose user now holds a seat,
    rejected as already registered)."""
    join = capacity.join

    def unguarded_join(client, counter, member, *, also=(), **kwargs):
        stripped = []
        for element in also:
            parts = dict(element["Update"])
            parts.pop("ConditionExpression")
            parts.pop("ReturnValuesOnConditionCheckFailure", None)
            values = dict(parts["ExpressionAttributeValues"])
            values.pop(":pending")
            stripped.append({"Update": {**parts, "ExpressionAttributeValues": values}})
        return join(client, counter, member, also=stripped, **kwargs)

    def unguarded_reject(self, event_id, request_id, reason):
        retry.call(
            lambda: self.client.update_item(
                TableName=self.table,
                Key=codec.encode_item(self._key(event_id, request_id)),
                UpdateExpression="SET #status = :rejected, #reason = :reason",
                ExpressionAttributeNames={"#status": "status", "#reason": "reason"},
                ExpressionAttributeValues=codec.values(rejected=REJECTED, reason=reason),
            ),
            backoff=self.backoff,
            idempotent=True,
        )
        return Decision(request_id, REJECTED, reason)

    monkeypatch.setattr(capacity, "join", unguarded_join)
    monkeypatch.setattr(RegistrationRequests, "_reject", unguarded_reject)


def test_a_redelivered_record_decided_twice_is_caught(decider_without_pending_check):
    for seed in range(10):
        result = run_seed(seed)
        found = {(v.pattern, v.check) for v in result.report.violations}
        if found:
            assert ("streams", "each request decided exactly once") in found, found
            return
    pytest.fail("no seed caught a request decided twice")


def _streamed_model(view: str = "NEW_AND_OLD_IMAGES") -> Model:
    model = Model()
    model.create_table(
        TableName="streamed",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": view},
    )
    return model


def _names(model: Model) -> list[tuple[str, str]]:
    return [
        (r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in model.stream_records("streamed")
    ]


def test_the_model_writes_a_record_per_change_and_none_for_a_write_that_changes_nothing():
    """The rules the differential test checks against DynamoDB Local, here without it."""
    model = _streamed_model()
    a, b = {"pk": {"S": "a"}}, {"pk": {"S": "b"}}
    model.put_item(TableName="streamed", Item={**a, "n": {"N": "1"}})  # INSERT
    model.put_item(TableName="streamed", Item={**a, "n": {"N": "1"}})  # the same item: none
    set_one = {"UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": {"N": "1"}}}
    model.update_item(TableName="streamed", Key=a, **set_one)  # the value it has: none
    with pytest.raises(ClientError):  # refused: none
        model.put_item(TableName="streamed", Item=a, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ClientError):  # cancelled: none for either element
        model.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "streamed", "Item": b}},
                {
                    "ConditionCheck": {
                        "TableName": "streamed",
                        "Key": a,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    model.transact_write_items(  # one record per element that changes its item
        TransactItems=[
            {"Put": {"TableName": "streamed", "Item": b}},
            {"Update": {"TableName": "streamed", "Key": a, "UpdateExpression": "REMOVE n"}},
        ]
    )
    model.delete_item(TableName="streamed", Key={"pk": {"S": "absent"}})  # no item: none
    model.delete_item(TableName="streamed", Key=b)
    assert _names(model) == [("INSERT", "a"), ("INSERT", "b"), ("MODIFY", "a"), ("REMOVE", "b")]
    records = model.stream_records("streamed")
    sequences = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    modify = records[2]["dynamodb"]
    assert modify["OldImage"] == {**a, "n": {"N": "1"}} and modify["NewImage"] == a
    assert model.stream_records("streamed", after=3) == records[3:]


def test_the_model_writes_the_images_its_view_type_asks_for():
    model = _streamed_model("KEYS_ONLY")
    model.put_item(TableName="streamed", Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    (record,) = model.stream_records("streamed")
    assert "NewImage" not in record["dynamodb"] and "OldImage" not in record["dynamodb"]
