"""The lease queue's quiet failures are counted: a leave that could not be written, and a
heartbeat renewal that failed (throttled, unanswered), each in a metric of its own.

Fakes of the DynamoDB client and of ``Leases.renew``; no thread, no network, no real wait."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from turnstile_ddb import lease, metrics, retry
from turnstile_ddb.lease_queue import Heartbeat, LeaseQueue, _Wait


@pytest.fixture
def counted() -> Iterator[metrics.Tally]:
    tally = metrics.Tally()
    metrics.add_sink(tally)
    yield tally
    metrics.remove_sink(tally)


class _Client:
    """Answers every TransactWriteItems with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def transact_write_items(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        raise self.error


def _leave(client: _Client) -> None:
    backoff = retry.Backoff(attempts=2, sleep=lambda _: None)
    queue = LeaseQueue(lease.Leases(client=client, table="leases", backoff=backoff))  # type: ignore[arg-type]
    queue._leave(_Wait("r", "w", ticket=3, queued_at=0.0, item={"head": 1, "tickets": 3}))


def test_a_leave_that_could_not_be_written_is_counted(counted):
    # Given a table that answers every transaction with a throttle
    client = _Client(ClientError({"Error": {"Code": "ThrottlingException"}}, "TransactWriteItems"))
    # When a waiter whose deadline passed leaves
    _leave(client)
    # Then the leave failed quietly (the waiter is answered its timeout all the same) but counted
    assert client.calls == 2
    assert counted.get("lease", "LeaseLeaveFailed") == 1


def test_a_leave_with_no_answer_is_counted(counted):
    # Given a table that cannot be reached
    client = _Client(EndpointConnectionError(endpoint_url="http://ddb"))
    # When a waiter leaves
    _leave(client)
    # Then the failure is counted
    assert counted.get("lease", "LeaseLeaveFailed") == 1


def test_a_leave_refused_because_the_ticket_was_passed_over_is_not_a_failure(counted):
    # Given a head already past the ticket: the leave's condition refuses it
    refusal = ClientError(
        {
            "Error": {"Code": "TransactionCanceledException"},
            "CancellationReasons": [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}],
        },
        "TransactWriteItems",
    )
    # When the waiter leaves
    _leave(_Client(refusal))
    # Then nothing failed: there was nothing to leave
    assert counted.get("lease", "LeaseLeaveFailed") == 0


class _Leases:
    """Renewals: throttled twice, then the lease is found taken over."""

    def __init__(self) -> None:
        self.calls = 0

    def renew(self, held: Any, ttl_ms: int) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise retry.RetriesExhausted(8, TimeoutError("throttled"))
        if self.calls == 2:
            raise EndpointConnectionError(endpoint_url="http://ddb")
        raise lease.LeaseLost("r", None)


def test_a_heartbeat_renewal_that_fails_is_counted_each_time(counted):
    # Given a heartbeat whose renewals fail twice, then find the lease taken over
    leases = _Leases()
    beat = Heartbeat(
        leases,  # type: ignore[arg-type]
        "held",  # type: ignore[arg-type]
        period_ms=500,
        ttl_ms=1500,
        sleep=lambda _: None,
        start=lambda loop: loop,  # the loop runs as the exit's "join", on this thread
    )
    # When it runs until it stops
    beat._run()
    # Then each failed renewal was counted, and the loss was seen
    assert leases.calls == 3 and beat.lost.is_set() and beat.renewals == 0
    assert counted.get("lease", "LeaseHeartbeatFailed") == 2
