"""The stream path under the simulator (sim/streams.py): the stream faults do happen in the
default run, the consumers stay correct under them, and the properties can fail."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from service.domain.registration_requests import REJECTED, Decision, RegistrationRequests
from sim.run import Config, describe, run_seed
from turnstile_ddb import capacity, codec, retry

SEEDS = range(6)


def _final(history: str) -> dict:
    last = history.rstrip("\n").rsplit("\n", 1)[1]
    assert last.startswith("# final ")
    return json.loads(last.removeprefix("# final "))["streams"]


@pytest.fixture(scope="module")
def default_runs():
    return [run_seed(seed) for seed in SEEDS]


def test_each_stream_fault_happens_in_the_default_run(default_runs):
    """Redelivered batches, invocations dying mid-batch, bisected batches and retried records
    all occur within a few seeds of the default configuration, and the runs stay clean."""
    happened: Counter[str] = Counter()
    for result in default_runs:
        assert not result.report.violations, describe(result)
        happened.update(_final(result.history)["stream"])
    assert happened["redelivered"] > 0
    assert happened["died"] > 0
    assert happened["bisected"] > 0
    assert happened["retried"] > 0


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
    """At most about 150 DynamoDB calls a seed on average (the seed budget of make test)."""
    without = Config(sizes_by_kind={"streams": (0, 0)})
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
