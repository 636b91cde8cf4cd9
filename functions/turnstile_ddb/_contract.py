"""The error contract at the library's edge: no botocore exception leaves a public function raw.

Every public function that talks to DynamoDB is decorated with :func:`write` (it may write) or
:func:`read` (it only reads). Inside, the library catches botocore's ``ClientError`` where it
means something (a condition that failed, a cancelled transaction, a throttle to retry) exactly as
before; whatever still escapes the *outermost* public call is turned by :func:`classify` into the
kind of :class:`~turnstile_ddb.errors.TurnstileError` that says what the caller must do, with the
original kept as ``.cause`` and its error code as ``.code``.

A missing table and a key the table does not have are named: the call's own arguments say which
table it was about (a ``table`` argument, or the ``.table`` of the object it works on: a
``Leases``, a ``UnitTable``, a ``ShardedCounter``, ...) and which key attribute it used
(``.key_attr``, or the names of a ``key`` argument), so the error is
:class:`~turnstile_ddb.errors.TableNotFound` or :class:`~turnstile_ddb.errors.KeyMismatch` (both
still ``AwsRefused``) instead of DynamoDB's "Requested resource not found".

Only the outermost call converts (a context variable marks "already inside the library"), so a
pattern that calls another one (``lease_queue`` calling ``Leases.renew``) still reads the raw
``ClientError`` it expects. Exceptions that are not the SDK's (``ValueError`` for a bad argument,
a bug) pass through unchanged: they are programming errors, not outcomes.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

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

# DynamoDB's (and DynamoDB Local's) words for a key that is not the table's key.
_KEY_MESSAGES = ("key element does not match the schema", "required keys", "missing the key")

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


def _subject(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, str]:
    """The table a call was about and the key attribute(s) it used, from its arguments ("" when
    they do not say): a ``table`` argument or an argument's ``.table``; an argument's
    ``.key_attr`` or the names of a ``key`` argument. Several tables are joined by ", "."""
    try:
        bound = inspect.signature(function).bind_partial(*args, **kwargs).arguments
    except TypeError:
        return "", ""
    tables: list[str] = []
    key_attr = ""
    for name, value in bound.items():
        owner = getattr(value, "leases", value)  # a LeaseQueue works on its Leases' table
        table = value if name == "table" else getattr(owner, "table", None)
        if isinstance(table, str) and table not in tables:
            tables.append(table)
        if not key_attr and isinstance(getattr(owner, "key_attr", None), str):
            key_attr = owner.key_attr
        if not key_attr and name == "key" and isinstance(value, Mapping):
            key_attr = ", ".join(str(k) for k in value)
    return ", ".join(tables), key_attr


def _named(
    error: BaseException, function: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
) -> BaseException:
    """``error`` as :class:`errors.TableNotFound` / :class:`errors.KeyMismatch` when it is one
    of those refusals (named from the call's arguments, :func:`_subject`); else unchanged."""
    if type(error) is not errors.AwsRefused:
        return error
    parts = (error.cause, error.code, error.aws_message, error.operation)
    if error.code == "ResourceNotFoundException":
        return errors.TableNotFound(*parts, table=_subject(function, args, kwargs)[0])
    said = error.aws_message.lower()
    if error.code == "ValidationException" and any(m in said for m in _KEY_MESSAGES):
        table, key_attr = _subject(function, args, kwargs)
        return errors.KeyMismatch(*parts, table=table, key_attr=key_attr)
    return error


@contextlib.contextmanager
def _outermost(
    writes: bool, function: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
) -> Iterator[None]:
    """Around one public call: when it is the outermost, the SDK errors escaping it leave
    classified (and named); a call made inside another lets them through raw."""
    if _inside.get():
        yield
        return
    token = _inside.set(True)
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise _named(classify(exc, writes=writes), function, args, kwargs) from exc
    finally:
        _inside.reset(token)


def _edge(writes: bool) -> Callable[[Callable[P, R]], Callable[P, R]]:
    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            with _outermost(writes, function, args, kwargs):
                return function(*args, **kwargs)

        return guarded

    return decorate


def _async_edge(
    writes: bool,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """:func:`_edge` for a coroutine function (the ``turnstile_ddb.aio`` front doors): the same
    classification, the same "outermost call only" marker (each asyncio task has its own)."""

    def decorate(
        function: Callable[P, Coroutine[Any, Any, R]],
    ) -> Callable[P, Coroutine[Any, Any, R]]:
        @functools.wraps(function)
        async def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            with _outermost(writes, function, args, kwargs):
                return await function(*args, **kwargs)

        return guarded

    return decorate


write = _edge(writes=True)
"""Decorate a public function that may write: its escaping SDK errors are classified."""

read = _edge(writes=False)
"""Decorate a public function that only reads: a timeout or server error is retryable."""

write_async = _async_edge(writes=True)
""":func:`write` for a coroutine function."""

read_async = _async_edge(writes=False)
""":func:`read` for a coroutine function."""
