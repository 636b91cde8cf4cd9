"""The error contract at the library's edge: no botocore exception leaves a public function raw.

Every public function that talks to DynamoDB is decorated with :func:`write` (it may write) or
:func:`read` (it only reads). Inside, the library catches botocore's ``ClientError`` where it
means something (a condition that failed, a cancelled transaction, a throttle to retry) exactly as
before; whatever still escapes the *outermost* public call is turned by :func:`classify` into the
kind of :class:`~turnstile_ddb.errors.TurnstileError` that says what the caller must do, with the
original kept as ``.cause`` and its error code as ``.code``.

Only the outermost call converts (a context variable marks "already inside the library"), so a
pattern that calls another one (``lease_queue`` calling ``Leases.renew``) still reads the raw
``ClientError`` it expects. Exceptions that are not the SDK's (``ValueError`` for a bad argument,
a bug) pass through unchanged: they are programming errors, not outcomes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    ReadTimeoutError,
)

from turnstile_ddb import errors

P = ParamSpec("P")
R = TypeVar("R")

# Nothing is written by these: a server error or a timeout on them is only worth retrying.
READ_OPERATIONS = frozenset(
    {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "DescribeTable"}
)
# Nothing was written, and a later attempt may succeed.
RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
        "TransactionConflictException",
        "TransactionInProgressException",
    }
)
# DynamoDB answered, but with a failure of its own: a write may or may not have been applied.
SERVER_ERROR_CODES = frozenset({"InternalServerError", "ServiceUnavailable"})

_inside: ContextVar[bool] = ContextVar("turnstile_ddb_inside", default=False)


def classify(exc: BaseException, *, writes: bool = True) -> BaseException:
    """The library error for ``exc``: a botocore error becomes ``AwsRefused``, ``AwsRetryable`` or
    ``AwsOutcomeUnknown``; anything else (a ``TurnstileError`` already, a bug) is returned as is.

    ``writes`` says whether the failed call may have written: a timeout or a server error on a call
    that only reads is retryable, on one that writes its outcome is unknown.
    """
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", ""))
        operation = str(getattr(exc, "operation_name", "") or "")
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code in RETRYABLE_CODES:
            return errors.AwsRetryable(exc, code, message, operation)
        if code in SERVER_ERROR_CODES or status >= 500:
            if writes and operation not in READ_OPERATIONS:
                return errors.AwsOutcomeUnknown(exc, code, message, operation)
            return errors.AwsRetryable(exc, code, message, operation)
        return errors.AwsRefused(exc, code, message, operation)
    if isinstance(exc, BotoCoreError):
        code = type(exc).__name__
        if isinstance(exc, ConnectTimeoutError | EndpointConnectionError):
            return errors.AwsRetryable(exc, code)  # never sent
        if isinstance(exc, ReadTimeoutError | ConnectionClosedError | HTTPClientError):
            if writes:
                return errors.AwsOutcomeUnknown(exc, code)
            return errors.AwsRetryable(exc, code)
        return errors.AwsRefused(exc, code)  # raised before sending: credentials, parameters
    return exc


def _edge(writes: bool) -> Callable[[Callable[P, R]], Callable[P, R]]:
    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            if _inside.get():
                return function(*args, **kwargs)
            token = _inside.set(True)
            try:
                return function(*args, **kwargs)
            except (ClientError, BotoCoreError) as exc:
                raise classify(exc, writes=writes) from exc
            finally:
                _inside.reset(token)

        return guarded

    return decorate


write = _edge(writes=True)
"""Decorate a public function that may write: its escaping SDK errors are classified."""

read = _edge(writes=False)
"""Decorate a public function that only reads: a timeout or server error is retryable."""
