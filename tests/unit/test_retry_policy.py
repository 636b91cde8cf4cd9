"""turnstile_ddb.retry: what is retried, what is not, and how long it waits."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError

from tests.helpers import Faults
from turnstile_ddb import errors, retry


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "UpdateItem")


def flaky(*failures: BaseException):
    """An operation that raises each of ``failures`` in turn, then returns "done"."""
    pending = list(failures)
    calls = []

    def operation() -> str:
        calls.append(1)
        if pending:
            raise pending.pop(0)
        return "done"

    return operation, calls


def no_sleep(attempts: int = 5) -> retry.Backoff:
    return retry.Backoff(attempts=attempts, sleep=lambda _: None)


def test_throttling_is_retried_until_it_passes():
    operation, calls = flaky(
        client_error("ThrottlingException"), client_error("ProvisionedThroughputExceededException")
    )
    assert retry.call(operation, backoff=no_sleep(), idempotent=False) == "done"
    assert len(calls) == 3


def test_a_condition_failure_is_never_retried():
    operation, calls = flaky(client_error("ConditionalCheckFailedException"))
    with pytest.raises(errors.AwsRefused) as raised:
        retry.call(operation, backoff=no_sleep(), idempotent=True)
    assert len(calls) == 1
    assert retry.condition_failed(raised.value)


def test_a_timeout_after_sending_a_plain_write_is_outcome_unknown_not_a_resend():
    operation, calls = flaky(ReadTimeoutError(endpoint_url="http://x"))
    with pytest.raises(retry.OutcomeUnknown):
        retry.call(operation, backoff=no_sleep(), idempotent=False)
    assert len(calls) == 1


def test_a_timeout_on_an_idempotent_call_is_resent():
    operation, calls = flaky(ReadTimeoutError(endpoint_url="http://x"))
    assert retry.call(operation, backoff=no_sleep(), idempotent=True) == "done"
    assert len(calls) == 2


def test_a_request_that_never_left_is_resent_even_when_not_idempotent():
    operation, calls = flaky(ConnectTimeoutError(endpoint_url="http://x"))
    assert retry.call(operation, backoff=no_sleep(), idempotent=False) == "done"
    assert len(calls) == 2


def test_the_budget_is_bounded():
    operation, calls = flaky(*[client_error("ThrottlingException")] * 10)
    with pytest.raises(retry.RetriesExhausted) as raised:
        retry.call(operation, backoff=no_sleep(attempts=4), idempotent=False)
    assert len(calls) == 4 and raised.value.attempts == 4


def test_full_jitter_stays_inside_the_capped_exponential_window():
    top = retry.Backoff(base=0.01, cap=0.05, rand=lambda: 0.999999)
    assert [round(top.delay(n), 4) for n in range(1, 6)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    assert retry.Backoff(rand=lambda: 0.0).delay(3) == 0.0


def test_a_time_budget_ends_retries_before_the_attempt_budget():
    now = [0.0]
    backoff = retry.Backoff(attempts=100, budget=1.0, clock=lambda: now[0])
    assert not backoff.spent(1, started=0.0)
    now[0] = 1.5
    assert backoff.spent(2, started=0.0)


def test_a_turnstile_client_sends_a_throttled_request_once():
    # botocore would resend a throttled call (and a call whose reply was lost: a second
    # decrement); turnstile's clients leave every resend to turnstile_ddb.retry.
    client = boto3.session.Session().client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: the hook answers first
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=retry.client_config(),
    )
    faults = Faults(client)
    faults.throttle("UpdateItem", times=5)
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        client.update_item(
            TableName="t",
            Key={"id": {"S": "1"}},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )
    assert faults.sent == {"UpdateItem": 1}


def test_call_stops_at_the_time_budget_before_the_attempt_budget():
    now = [0.0]

    def advance(seconds: float) -> None:
        now[0] += 1.0  # each pause "takes" a second

    backoff = retry.Backoff(attempts=100, budget=2.5, sleep=advance, clock=lambda: now[0])
    operation, calls = flaky(*[client_error("ThrottlingException")] * 50)
    with pytest.raises(retry.RetriesExhausted):
        retry.call(operation, backoff=backoff, idempotent=False)
    assert len(calls) == 4  # attempts at t=0, 1, 2, 3: the budget is spent after the fourth
