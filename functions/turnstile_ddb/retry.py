"""Retry policy: what may be retried safely, and how long to wait between attempts.

A DynamoDB call may be retried only when one of these holds:

* the request is known not to have been applied: throttling, ``TransactionConflict``
  cancellations, a refused connection;
* the request is idempotent by itself: reads, and ``TransactWriteItems`` carrying the same
  ``ClientRequestToken`` (DynamoDB answers a replay within ten minutes without applying it twice).

A plain ``UpdateItem`` that timed out after it was sent falls in neither group: it may have been
applied, and sending it again could apply it twice (a double decrement). botocore's own retry
loop treats read timeouts as transient, so the write client is built with botocore retries off
(see :func:`client_config`) and callers catch :class:`OutcomeUnknown` instead.

An idempotent request that timed out *is* resent; if the retries then run out (say the resends
were throttled), the first send may still have been applied. That is :class:`OutcomeUnknown`
too, never :class:`RetriesExhausted`: the latter promises that nothing was applied, and callers
answer it with "503 THROTTLED, retry" and give an ``Idempotency-Key`` back.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from turnstile_ddb import _checks, _contract, _core, errors, metrics
from turnstile_ddb.errors import OutcomeUnknown as OutcomeUnknown  # where callers have caught it
from turnstile_ddb.errors import RetriesExhausted as RetriesExhausted  # (defined with its kinds)

__all__ = [
    "MAYBE_APPLIED_ERRORS",
    "METRICS",
    "NOT_SENT_ERRORS",
    "THROTTLING_CODES",
    "Backoff",
    "OutcomeUnknown",
    "RetriesExhausted",
    "call",
    "client_config",
    "condition_failed",
    "error_code",
    "is_throttle",
    "retried_as",
]

# The metrics this module counts, under the pattern of the call it retries (``pattern=``).
METRICS: tuple[str, ...] = (
    "Throttle",
    "TransactionConflict",
    "CallRetry",
    "RetriesExhausted",
    "OutcomeUnknown",
)

T = TypeVar("T")

THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)
NOT_SENT_ERRORS = (ConnectTimeoutError, EndpointConnectionError)
MAYBE_APPLIED_ERRORS = (ReadTimeoutError, ConnectionClosedError)


def error_code(exc: BaseException) -> str:
    """The AWS error code of ``exc`` (a ``ClientError`` or an ``errors.AwsCause``), else ""."""
    if isinstance(exc, errors.AwsCause):
        return exc.code
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def condition_failed(exc: BaseException) -> bool:
    """A write refused by its ConditionExpression (final: resending would change nothing)."""
    return error_code(exc) == "ConditionalCheckFailedException"


def is_throttle(exc: BaseException) -> bool:
    return error_code(exc) in THROTTLING_CODES


def client_config(**overrides: object) -> Config:
    """botocore config for turnstile clients: botocore retries off, short timeouts.

    Retrying is this module's job, because only the caller knows whether a request is idempotent.
    """
    settings: dict[str, object] = {
        "retries": {"mode": "standard", "total_max_attempts": 1},
        "connect_timeout": 2,
        "read_timeout": 5,
        "max_pool_connections": 128,
    }
    settings.update(overrides)
    return Config(**settings)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with full jitter (sleep uniformly in [0, min(cap, base * 2**n)]).

    Full jitter spreads contending writers apart instead of waking them in lock-step.
    """

    attempts: int = 8
    base: float = 0.005
    cap: float = 0.2
    budget: float | None = None  # seconds from the first attempt after which no retry starts
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)
    rand: Callable[[], float] = field(default=random.random, compare=False, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, low in (("attempts", 1), ("base", 0), ("cap", 0), ("budget", 0)):
            _checks.at_least("Backoff", name, getattr(self, name), low)

    def spent(self, attempt: int, started: float) -> bool:
        """True when attempt number ``attempt`` was the last one allowed."""
        if attempt >= self.attempts:
            return True
        return self.budget is not None and self.clock() - started >= self.budget

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt number ``attempt + 1`` (attempt counts from 1)."""
        return self.rand() * min(self.cap, self.base * 2.0 ** (attempt - 1))

    def pause(self, attempt: int) -> None:
        self.sleep(self.delay(attempt))


@_contract.write
def call(
    operation: Callable[[], T],
    *,
    backoff: Backoff,
    idempotent: bool,
    retry_on: Callable[[BaseException], bool] = lambda exc: False,
    pattern: str = "dynamodb",
) -> T:
    """Run ``operation``, retrying what is safe to retry under ``backoff``.

    Throttling and refused connections are always retried. Timeouts after sending are retried
    only when ``idempotent``; otherwise they surface as :class:`OutcomeUnknown`. ``retry_on``
    adds caller-specific retryable errors (for example ``TransactionConflict``). When the budget
    runs out after any attempt that may have been applied, the answer is :class:`OutcomeUnknown`
    (a resent transaction whose first send landed is not "nothing was applied").

    Every retried failure counts under ``pattern`` (see :func:`retried_as`), and so do giving up
    (``RetriesExhausted``) and a write in doubt (``OutcomeUnknown``).
    """
    steps = retrying(
        _core.Invoke(operation),
        backoff=backoff,
        idempotent=idempotent,
        retry_on=retry_on,
        pattern=pattern,
    )
    answer: T = _core.run(None, steps)
    return answer


def retrying(
    attempt_effect: _core.Effect | Callable[[], _core.Steps[Any]],
    *,
    backoff: Backoff,
    idempotent: bool,
    retry_on: Callable[[BaseException], bool] = lambda exc: False,
    pattern: str = "dynamodb",
) -> _core.Steps[Any]:
    """:func:`call`'s protocol (:mod:`turnstile_ddb._core`): each attempt yields
    ``attempt_effect`` (usually a ``Call``) and the answer is the first one that succeeded. A
    function instead of an effect is a protocol run afresh for each attempt (a request whose
    values, a clock read, are taken anew on every resend)."""
    attempt = 0
    started = yield _core.Now(backoff.clock)
    maybe_applied = False
    while True:
        attempt += 1
        try:
            if callable(attempt_effect):
                return (yield from attempt_effect())
            return (yield attempt_effect)
        except MAYBE_APPLIED_ERRORS as exc:
            if not idempotent:
                metrics.count("OutcomeUnknown", pattern=pattern)
                raise OutcomeUnknown(str(exc)) from exc
            maybe_applied = True
            last: BaseException = exc
        except NOT_SENT_ERRORS as exc:
            last = exc
        except ClientError as exc:
            if not (is_throttle(exc) or retry_on(exc)):
                raise
            last = exc
        metrics.count(retried_as(last), pattern=pattern)
        if (yield from spent(backoff, attempt, started)):
            if maybe_applied:
                metrics.count("OutcomeUnknown", pattern=pattern)
                raise OutcomeUnknown(
                    f"gave up after {attempt} attempts, one of which may have been applied: {last}"
                ) from last
            metrics.count("RetriesExhausted", pattern=pattern)
            raise RetriesExhausted(attempt, last) from last
        yield from pause(backoff, attempt)


def spent(backoff: Backoff, attempt: int, started: float) -> _core.Steps[bool]:
    """:meth:`Backoff.spent` as a protocol step: the clock is read through the driver."""
    if attempt >= backoff.attempts:
        return True
    if backoff.budget is None:
        return False
    now: float = yield _core.Now(backoff.clock)
    return now - started >= backoff.budget


def pause(backoff: Backoff, attempt: int) -> _core.Steps[None]:
    """:meth:`Backoff.pause` as a protocol step: the driver sleeps."""
    yield _core.Sleep(backoff.delay(attempt), backoff.sleep)


def retried_as(exc: BaseException) -> str:
    """The metric a retried failure counts as: ``Throttle``, ``TransactionConflict`` (also a
    transaction cancelled for conflicts), or ``CallRetry`` (a timeout, a refused connection)."""
    code = error_code(exc)
    if code in THROTTLING_CODES:
        return "Throttle"
    if code == "TransactionConflictException":
        return "TransactionConflict"
    if code == "TransactionCanceledException" and isinstance(exc, ClientError):
        codes = {str(r.get("Code")) for r in exc.response.get("CancellationReasons") or []}
        return "TransactionConflict" if "TransactionConflict" in codes else "Throttle"
    return "CallRetry"
