# ruff: noqa: E501 - the table of calls reads best one call a line
"""The error contract: every public function that talks to DynamoDB, driven into each class of
AWS error, raises a ``TurnstileError`` of the kind that says what to do, never a botocore error.

A ``before-send`` hook on a real boto3 client answers every request with the error (nothing is
sent anywhere), so the SDK parses it exactly as it parses DynamoDB's own answers.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from turnstile_ddb import (
    _contract,
    capacity,
    claims,
    creation,
    errors,
    idempotency,
    lease,
    lease_queue,
    retry,
    sharded,
    slots,
    transact,
    versioned,
)
from turnstile_ddb.deprecation import TurnstileDeprecationWarning

# code -> (HTTP status DynamoDB answers it with)
AWS_ERRORS = {
    "ValidationException": 400,
    "ResourceNotFoundException": 400,
    "AccessDeniedException": 400,
    "ProvisionedThroughputExceededException": 400,
    "ThrottlingException": 400,
    "InternalServerError": 500,
    "ConditionalCheckFailedException": 400,
}
CONNECTION_ERRORS = {"EndpointConnectionError", "ReadTimeoutError"}


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


@functools.cache
def failing_client(failure: str) -> Any:
    """A DynamoDB client whose every request meets ``failure`` (an AWS error code or a botocore
    connection error's class name). One per failure: building a client costs a model load."""
    client = boto3.session.Session().client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: the hook answers first
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=retry.client_config(),
    )

    def before_send(request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        if failure == "EndpointConnectionError":
            raise EndpointConnectionError(endpoint_url=request.url)
        if failure == "ReadTimeoutError":
            raise ReadTimeoutError(endpoint_url=request.url)
        body = json.dumps(
            {"__type": f"com.amazonaws.dynamodb.v20120810#{failure}", "message": "injected"}
        ).encode()
        headers = HTTPHeaders.from_dict({"Content-Type": "application/x-amz-json-1.0"})
        return AWSResponse(request.url, AWS_ERRORS[failure], headers, _Raw(body))

    # (the stubs type every handler as returning None; a before-send handler's answer is the
    # response botocore uses instead of sending)
    client.meta.events.register("before-send.dynamodb", before_send)  # type: ignore[arg-type]
    return client


def quick() -> retry.Backoff:
    return retry.Backoff(attempts=2, sleep=lambda _: None)


class FakeTime:
    """A clock that moves 50 ms each time it is read, and a sleep that moves it: bounded waits end
    without waiting."""

    def __init__(self) -> None:
        self.now = 1_767_225_600.0

    def __call__(self) -> float:
        self.now += 0.05
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


UNITS = claims.UnitTable(table="units", index="byTicket", key_attrs=("sku", "sk"))
COUNTER = sharded.ShardedCounter(
    table="products", key_attr="productId", base="p1", shards=2, count_attr="stock"
)
# A take meeting a failed condition with no item at shard 0 knows the counter is gone (Missing);
# at another shard, a resize may have dropped it and it reads again: one shard, one answer.
ONE_SHARD = sharded.ShardedCounter(
    table="products", key_attr="productId", base="p1", shards=1, count_attr="stock"
)
ROW = capacity.CapacityRow(table="events", key={"eventId": "e1"})
MEMBER = capacity.Member(
    table="events", key={"eventId": "e1", "userId": "u1"}, item={"eventId": "e1", "userId": "u1"}
)
HELD = lease.Lease(
    resource="r1",
    owner="o1",
    fence=1,
    expires_at_ms=1_767_225_660_000,
    acquired_at=1_767_225_600_000,
)
UNIT_KEY = {"sku": "s1", "sk": "u#1"}
ITEM = {"Put": {"TableName": "t", "Item": {"id": {"S": "1"}}}}


def leases(client: Any, clock: FakeTime) -> lease.Leases:
    return lease.Leases(client=client, table="leases", backoff=quick(), clock=clock)


def store(client: Any) -> idempotency.IdempotencyStore:
    return idempotency.IdempotencyStore(client=client, table="idem", backoff=quick())


def in_progress() -> idempotency.InProgress:
    return idempotency.InProgress(
        key="k1", token="t1", locked_until=1_767_225_660_000, fingerprint="f1"
    )


# name -> (reads only?, the call)
CALLS: dict[str, tuple[bool, Callable[[Any, FakeTime], object]]] = {
    "retry.call": (False, lambda c, t: retry.call(lambda: c.get_item(TableName="t", Key={}), backoff=quick(), idempotent=False)),
    "versioned.read": (True, lambda c, t: versioned.read(c, "t", {"id": "1"}, quick())),
    "versioned.update_if_version": (False, lambda c, t: versioned.update_if_version(c, table="t", key={"id": "1"}, expected=1, changes={"a": 1}, backoff=quick())),
    "versioned.update_versioned": (False, lambda c, t: versioned.update_versioned(c, table="t", key={"id": "1"}, decide=lambda item: {"a": 1}, backoff=quick(), conflicts=quick())),
    "versioned.decrement": (False, lambda c, t: versioned.decrement(c, table="t", key={"id": "1"}, attr="stock", amount=1, backoff=quick())),
    "versioned.increment": (False, lambda c, t: versioned.increment(c, table="t", key={"id": "1"}, attr="stock", amount=1, backoff=quick())),
    "versioned.bump": (False, lambda c, t: versioned.bump(c, table="t", key={"id": "1"}, changes={"a": 1}, backoff=quick())),
    "creation.create_if_absent": (False, lambda c, t: creation.create_if_absent(c, table="t", item={"id": "1"}, key_attr="id", backoff=quick())),
    "creation.create_if_absent(token)": (False, lambda c, t: creation.create_if_absent(c, table="t", item={"id": "1"}, key_attr="id", backoff=quick(), token="r1")),
    "transact.transact_write": (False, lambda c, t: transact.transact_write(c, [ITEM], backoff=quick())),
    "capacity.join": (False, lambda c, t: capacity.join(c, ROW, MEMBER, backoff=quick())),
    "capacity.leave": (False, lambda c, t: capacity.leave(c, ROW, MEMBER, backoff=quick())),
    "slots.create": (False, lambda c, t: slots.create(c, "slots", [{"id": "1"}], backoff=quick())),
    "slots.book": (False, lambda c, t: slots.book(c, "slots", {"id": "1"}, "h1", backoff=quick())),
    "slots.book_any": (False, lambda c, t: slots.book_any(c, "slots", [{"id": "1"}], "h1", backoff=quick())),
    "slots.release": (False, lambda c, t: slots.release(c, "slots", {"id": "1"}, "h1", backoff=quick())),
    "idempotency.IdempotencyStore.begin": (False, lambda c, t: store(c).begin("k1", "f1")),
    "idempotency.IdempotencyStore.complete": (False, lambda c, t: store(c).complete(in_progress(), {"ok": True})),
    "idempotency.IdempotencyStore.release": (False, lambda c, t: store(c).release(in_progress())),
    "idempotency.IdempotencyStore(names)": (False, lambda c, t: idempotency.IdempotencyStore(client=c, table="idem", backoff=quick(), names=idempotency.RecordNames(answer="a")).begin("k1", "f1")),
    "lease.Leases.acquire": (False, lambda c, t: leases(c, t).acquire("r1", "o1", 1000)),
    "lease.Leases.acquire_wait": (False, lambda c, t: leases(c, t).acquire_wait("r1", "o1", 1000, wait_ms=200, waits=quick())),
    "lease.Leases.renew": (False, lambda c, t: leases(c, t).renew(HELD, 1000)),
    "lease.Leases.release": (False, lambda c, t: leases(c, t).release(HELD)),
    "lease.Leases.transact": (False, lambda c, t: leases(c, t).transact(HELD, [ITEM])),
    "lease.Leases.hold": (False, lambda c, t: leases(c, t).hold("r1", "o1", 1000, wait_ms=200, waits=quick()).__enter__()),
    "lease.fenced_update": (False, lambda c, t: lease.fenced_update(c, table="t", key={"id": "1"}, fence=1, changes={"a": 1}, backoff=quick())),
    "lease_queue.LeaseQueue.acquire": (False, lambda c, t: lease_queue.LeaseQueue(leases(c, t), sleep=t.sleep, monotonic=t).acquire("r1", "o1", wait_ms=300)),
    "claims.confirm": (False, lambda c, t: claims.confirm(c, UNITS, [UNIT_KEY], holder="h1", now_ms=1, backoff=quick())),
    "claims.reserve": (False, lambda c, t: claims.reserve(c, UNITS, pools=["s1"], quantity=1, holder=lambda k: "h1", now_ms=1, until_ms=2, options=claims.ReserveOptions(backoff=quick(), rounds=2))),
    "claims.holders_units": (True, lambda c, t: claims.holders_units(c, UNITS, UNIT_KEY, backoff=quick())),
    "claims.release": (False, lambda c, t: claims.release(c, UNITS, [UNIT_KEY], holder="h1", backoff=quick(), rounds=1)),
    "sharded.read_items": (True, lambda c, t: sharded.read_items(c, COUNTER, quick())),
    "sharded.read_all": (True, lambda c, t: sharded.read_all(c, COUNTER, quick())),
    "sharded.take": (False, lambda c, t: sharded.take(c, ONE_SHARD, 1, sharded.TakeOptions(backoff=quick(), hints=sharded.Hints(), rounds=1))),
    "sharded.join": (False, lambda c, t: sharded.join(c, COUNTER, MEMBER, sharded.TakeOptions(backoff=quick(), rounds=1))),
    "sharded.leave": (False, lambda c, t: sharded.leave(c, COUNTER, MEMBER, sharded.TakeOptions(backoff=quick()))),
    "sharded.set_total": (False, lambda c, t: sharded.set_total(c, COUNTER, 4, backoff=quick(), attempts=1)),
    "sharded.add": (False, lambda c, t: sharded.add(c, COUNTER, 1, backoff=quick())),
}  # fmt: skip


# What each call makes of a failed condition (ConditionalCheckFailedException on every request):
# the pattern's own refusal where it reads its condition, None where a failed condition is an
# answer, AwsRefused where the request meets a condition it never sets (a read, a transaction:
# DynamoDB cancels those with TransactionCanceledException instead).
CONDITION_ANSWERS: dict[str, type[BaseException] | None] = {
    "capacity.join": errors.AwsRefused,
    "capacity.leave": errors.AwsRefused,
    "claims.confirm": errors.AwsRefused,
    "claims.holders_units": errors.AwsRefused,
    "claims.release": errors.AwsRefused,
    "claims.reserve": errors.AwsRefused,
    "creation.create_if_absent": creation.AlreadyExists,
    "creation.create_if_absent(token)": creation.AlreadyExists,
    "idempotency.IdempotencyStore(names)": idempotency.KeyReused,
    "idempotency.IdempotencyStore.begin": idempotency.KeyReused,
    "idempotency.IdempotencyStore.complete": None,
    "idempotency.IdempotencyStore.release": None,
    "lease.Leases.acquire": lease.Held,
    "lease.Leases.acquire_wait": lease.Held,
    "lease.Leases.hold": lease.Held,
    "lease.Leases.release": lease.LeaseLost,
    "lease.Leases.renew": lease.LeaseLost,
    "lease.Leases.transact": errors.AwsRefused,
    "lease.fenced_update": lease.StaleFence,
    "lease_queue.LeaseQueue.acquire": errors.AwsRefused,
    "retry.call": errors.AwsRefused,
    "sharded.add": errors.AwsRefused,
    "sharded.read_all": errors.AwsRefused,
    "sharded.read_items": errors.AwsRefused,
    "sharded.join": errors.AwsRefused,
    "sharded.leave": errors.AwsRefused,
    "sharded.set_total": errors.AwsRefused,
    "sharded.take": sharded.Missing,
    "slots.book": slots.NoSuchSlot,
    "slots.book_any": slots.NoSuchSlot,
    "slots.create": None,
    "slots.release": slots.NotHolder,
    "transact.transact_write": errors.AwsRefused,
    "versioned.bump": versioned.NoSuchItem,
    "versioned.decrement": versioned.NoSuchItem,
    "versioned.increment": versioned.NoSuchItem,
    "versioned.read": errors.AwsRefused,
    "versioned.update_if_version": versioned.VersionMismatch,
    "versioned.update_versioned": errors.AwsRefused,
}


def raised_by(call: Callable[[Any, FakeTime], object], client: Any) -> BaseException | None:
    """What ``call`` raises, run on a thread so that a call that never ends fails the test."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call(client, FakeTime())
        except BaseException as exc:  # noqa: BLE001 - what is raised is what the test reads
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=20)
    assert outcome, "the call did not end"
    return outcome[0]


def expected_kind(failure: str, exc: BaseException, reads_only: bool) -> tuple[type, ...]:
    """The kinds a call may answer ``failure`` with; which of them depends on the step it met it
    at (a read before a write makes a server error retryable, a pattern reads a condition)."""
    if failure in ("ValidationException", "ResourceNotFoundException", "AccessDeniedException"):
        return (errors.AwsRefused,)
    if failure in ("ProvisionedThroughputExceededException", "ThrottlingException"):
        return (errors.Retryable,)  # retried, then RetriesExhausted (or AwsRetryable)
    if failure == "EndpointConnectionError":
        return (errors.Retryable,)  # never sent: nothing written
    if failure == "ConditionalCheckFailedException":
        return (errors.TurnstileError,)  # each pattern's own answer: CONDITION_ANSWERS
    # InternalServerError, ReadTimeoutError: a read is worth retrying, a write is in doubt
    if reads_only:
        return (errors.Retryable, errors.OutcomeUnknown)  # a resent read that then ran out
    if isinstance(exc, errors.AwsCause) and exc.operation in _contract.READ_OPERATIONS:
        return (errors.Retryable,)
    return (errors.OutcomeUnknown, errors.Retryable)


@pytest.mark.parametrize(
    ("name", "failure"),
    list(itertools.product(sorted(CALLS), [*AWS_ERRORS, *sorted(CONNECTION_ERRORS)])),
)
def test_every_public_call_answers_every_aws_failure_with_its_kind(name: str, failure: str) -> None:
    # Given a public function and a client that meets this failure on every request
    reads_only, call = CALLS[name]
    # When it is called
    exc = raised_by(call, failing_client(failure))
    # Then it raises a TurnstileError of the kind that says what to do, never the SDK's error
    assert_kind(name, failure, exc, reads_only, CONDITION_ANSWERS[name])


def assert_kind(
    name: str,
    failure: str,
    exc: BaseException | None,
    reads_only: bool,
    condition_answer: type[BaseException] | None,
) -> None:
    if failure == "ConditionalCheckFailedException":
        assert (type(exc) if exc is not None else None) is condition_answer, f"{name}: {exc!r}"
        if exc is None:
            return
    assert exc is not None, f"{name} answered {failure} without raising"
    assert not isinstance(exc, ClientError | BotoCoreError), f"{name} let {exc!r} out raw"
    assert isinstance(exc, errors.TurnstileError), f"{name}: {exc!r}"
    assert isinstance(exc, expected_kind(failure, exc, reads_only)), f"{name}: {exc!r}"
    if isinstance(exc, errors.AwsCause):
        assert isinstance(exc.cause, ClientError | BotoCoreError)
        assert exc.__cause__ is exc.cause
        assert exc.code == failure


@pytest.mark.parametrize("failure", [*AWS_ERRORS, *sorted(CONNECTION_ERRORS)])
def test_the_deprecated_raw_acquisition_write_keeps_the_contract_and_says_it_is_deprecated(
    failure: str,
) -> None:
    # Given Leases.take, deprecated since 1.0.0 (use Leases.acquire or LeaseQueue.acquire, both
    # in CALLS above) but public until 2.0.0: a client that meets this failure on every request
    def take(client: Any, clock: FakeTime) -> object:
        written = "attribute_not_exists(#owner)"
        return leases(client, clock).take("r1", "o1", 2, 1, written)

    # When it is called, then it warns, and answers the failure as every public call does
    with pytest.warns(TurnstileDeprecationWarning, match="Leases.take"):
        exc = raised_by(take, failing_client(failure))
    assert_kind("lease.Leases.take", failure, exc, False, errors.AwsRefused)


def test_the_table_of_condition_answers_covers_every_call() -> None:
    assert sorted(CONDITION_ANSWERS) == sorted(CALLS)


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        ("ValidationException", errors.AwsRefused),
        ("ResourceNotFoundException", errors.AwsRefused),
        ("AccessDeniedException", errors.AwsRefused),
        ("ConditionalCheckFailedException", errors.AwsRefused),
        ("ProvisionedThroughputExceededException", errors.AwsRetryable),
        ("ThrottlingException", errors.AwsRetryable),
        ("InternalServerError", errors.AwsOutcomeUnknown),
    ],
)
def test_an_aws_error_is_wrapped_with_its_cause_code_and_operation(
    failure: str, kind: type[errors.AwsRefused | errors.AwsRetryable | errors.AwsOutcomeUnknown]
) -> None:
    # Given a write sent once, straight through the client (no retry loop to turn it into
    # RetriesExhausted)
    client = failing_client(failure)

    @_contract.write
    def put() -> None:
        client.put_item(TableName="t", Item={"id": {"S": "1"}})

    # When it fails, then the AWS error is wrapped in its kind, which carries what AWS said
    with pytest.raises(kind) as raised:
        put()
    wrapped = raised.value
    assert isinstance(wrapped, errors.AwsCause)
    assert wrapped.code == failure
    assert wrapped.operation == "PutItem"
    assert wrapped.aws_message == "injected"
    assert isinstance(wrapped.cause, ClientError)
    assert retry.error_code(wrapped) == failure


def test_a_server_error_or_timeout_on_a_read_is_retryable_not_in_doubt() -> None:
    for failure in ("InternalServerError", "ReadTimeoutError"):
        client = failing_client(failure)

        @_contract.read
        def get(client: Any = client) -> None:
            client.get_item(TableName="t", Key={"id": {"S": "1"}})

        with pytest.raises(errors.AwsRetryable):
            get()


def test_inside_the_library_a_pattern_still_reads_the_raw_error() -> None:
    # Given a public function that calls another one and reads its raw ClientError
    client = failing_client("ConditionalCheckFailedException")
    seen: list[BaseException] = []

    @_contract.write
    def outer() -> None:
        try:
            retry.call(
                lambda: client.put_item(TableName="t", Item={}), backoff=quick(), idempotent=True
            )
        except ClientError as exc:
            seen.append(exc)
            raise

    # Then the inner call let the raw error through, and only the outermost one wrapped it
    with pytest.raises(errors.AwsRefused):
        outer()
    assert len(seen) == 1 and retry.condition_failed(seen[0])


def test_an_argument_error_is_not_an_outcome_and_passes_through() -> None:
    @_contract.write
    def wrong() -> None:
        raise ValueError("quantity must be positive")

    with pytest.raises(ValueError, match="positive"):
        wrong()
