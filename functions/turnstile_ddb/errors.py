"""Every exception turnstile raises, in one hierarchy.

What a caller must decide after a failure is which of three things happened, so that is what the
types say::

    TurnstileError
    ├── Refused          the database decided no: nothing was written, and the same request
    │   │                will be refused again until the data changes (a condition failed)
    │   └── NotFound     the item the operation needs does not exist
    ├── Retryable        nothing was written, and a later attempt may succeed (contention,
    │   │                throttling, a lease held by someone else, a budget spent)
    │   └── RetriesExhausted   every attempt allowed failed: LostEveryRace (concurrent
    │                          writes won each one), StayedThrottled (throttled each time)
    └── OutcomeUnknown   a write was sent and no answer came back: it may or may not have
                         been applied; only a read (or an idempotent resend) can tell

An error of the AWS SDK (a botocore ``ClientError`` or ``BotoCoreError``) never leaves a public
function raw: it is wrapped in the kind that says what to do, :class:`AwsRefused` (invalid,
forbidden, a missing table, a condition no pattern interpreted), :class:`AwsRetryable`
(throttled, not sent, a read that failed) or :class:`AwsOutcomeUnknown` (a write timed out or met
a server error), each carrying the original as ``.cause`` and its error code as ``.code``. Two
refusals name what the call was about: :class:`TableNotFound` (the table) and :class:`KeyMismatch`
(the key attribute the library used, and ``key_attr=`` to pass).

Each pattern's own exceptions (``lease.Held``, ``versioned.VersionMismatch``, ...) derive from
one of these, so ``except turnstile_ddb.Retryable`` catches every "try again later" at once while
``except lease.Held`` still reads the holder from the exception.

This module imports nothing, so importing it (or ``turnstile_ddb``) costs nothing.
"""

from __future__ import annotations

__all__ = [
    "AwsCause",
    "AwsOutcomeUnknown",
    "AwsRefused",
    "AwsRetryable",
    "KeyMismatch",
    "LostEveryRace",
    "NotFound",
    "OutcomeUnknown",
    "Refused",
    "RetriesExhausted",
    "Retryable",
    "StayedThrottled",
    "TableNotFound",
    "TurnstileError",
]


class TurnstileError(Exception):
    """The base of every exception turnstile raises."""


class Refused(TurnstileError):
    """A condition decided no: nothing was written. Retrying unchanged gets the same answer."""


class NotFound(Refused):
    """The item the operation needs does not exist: nothing was written."""


class Retryable(TurnstileError):
    """Nothing was written, and a later attempt may succeed (contention, throttling, a held lease,
    a spent retry budget)."""


class RetriesExhausted(Retryable):
    """Every attempt the policy allowed failed with a retryable error: nothing was written.
    ``attempts``: how many were made; ``last``: the last failure (None when none was raised, as
    for a hold that lapsed before any attempt). Also ``turnstile_ddb.retry.RetriesExhausted``."""

    def __init__(self, attempts: int, last: BaseException | None) -> None:
        super().__init__(f"gave up after {attempts} attempts: {last}")
        self.attempts = attempts
        self.last = last

    def _say(self, message: str) -> None:
        """Replace the generic message with what happened (for the kinds below)."""
        self.args = (message,)


class LostEveryRace(RetriesExhausted):
    """Every one of ``attempts`` writes lost to concurrent writes (``what`` says whose and to
    what): nothing was written, and a later attempt, with less contention, may succeed."""

    def __init__(self, attempts: int, what: str, last: BaseException | None = None) -> None:
        super().__init__(attempts, last)
        self.what = what
        self._say(f"{what}: each of {attempts} attempt(s) lost to a concurrent write")


class StayedThrottled(RetriesExhausted):
    """Every one of ``attempts`` attempts was throttled (``what`` says where): nothing was
    written; retry later, or give the table more capacity."""

    def __init__(self, attempts: int, what: str, last: BaseException | None = None) -> None:
        super().__init__(attempts, last)
        self.what = what
        self._say(f"{what} stayed throttled through {attempts} attempt(s)")


class OutcomeUnknown(TurnstileError):
    """A write was sent but no answer came back: it may or may not have been applied."""


class AwsCause:
    """What the errors wrapping an AWS SDK error carry (a mixin, not an exception of its own).

    - ``cause``: the botocore exception (also the ``__cause__`` of the raise);
    - ``code``: its error code (``"ValidationException"``, ``"AccessDeniedException"``, ...), or,
      for an error raised without an answer, the botocore class name (``"ReadTimeoutError"``);
    - ``aws_message``: the message AWS sent ("" when none came);
    - ``operation``: the DynamoDB operation (``"UpdateItem"``), "" when botocore does not say.
    """

    cause: BaseException
    code: str
    aws_message: str
    operation: str

    def _wrap(self, cause: BaseException, code: str, aws_message: str, operation: str) -> str:
        self.cause = cause
        self.code = code
        self.aws_message = aws_message
        self.operation = operation
        return f"{operation or 'DynamoDB'}: {code}: {aws_message or cause}"


class AwsRefused(AwsCause, Refused):
    """AWS refused the request and will refuse it again unchanged: invalid
    (``ValidationException``), forbidden (``AccessDeniedException``), a missing table
    (``ResourceNotFoundException``), a condition the pattern did not interpret
    (``ConditionalCheckFailedException``), any error code turnstile does not classify, or an SDK
    error raised before sending (no credentials, invalid parameters). Nothing was written."""

    def __init__(
        self, cause: BaseException, code: str, aws_message: str = "", operation: str = ""
    ) -> None:
        super().__init__(self._wrap(cause, code, aws_message, operation))


class AwsRetryable(AwsCause, Retryable):
    """Nothing was written and a later attempt may succeed: throttling, a transaction conflict, a
    connection never made, or a read that timed out or met a server error."""

    def __init__(
        self, cause: BaseException, code: str, aws_message: str = "", operation: str = ""
    ) -> None:
        super().__init__(self._wrap(cause, code, aws_message, operation))


class AwsOutcomeUnknown(AwsCause, OutcomeUnknown):
    """A write was sent and no answer came back (a read timeout, a closed connection), or DynamoDB
    answered with a server error (``InternalServerError``): it may or may not have been applied."""

    def __init__(
        self, cause: BaseException, code: str, aws_message: str = "", operation: str = ""
    ) -> None:
        super().__init__(self._wrap(cause, code, aws_message, operation))


class _TableRefusal(AwsRefused):
    """An AWS refusal about the table ``table`` ("" when the call did not name one): its message
    says what that means (``_SAYS``, formatted with the error's attributes and ``aws``, AWS's own
    words) before AWS's words."""

    _SAYS: str  # set by each subclass

    def __init__(
        self,
        cause: BaseException,
        code: str,
        aws_message: str = "",
        operation: str = "",
        *,
        table: str = "",
    ) -> None:
        super().__init__(cause, code, aws_message, operation)
        self.table = table
        self.args = (self._SAYS.format(aws=self.args[0], **vars(self)),)


class TableNotFound(_TableRefusal):
    """``ResourceNotFoundException``: the table ``table`` does not exist in this account and
    region (or is not ACTIVE yet). ``table`` is "" when the call did not name one; several
    tables of a transaction are named together."""

    _SAYS = "table {table!r} not found in this account and region: {aws}"


class KeyMismatch(_TableRefusal):
    """A ``ValidationException`` about the key: the key the library sent (attribute
    ``key_attr`` of ``table``) is not the table's key. Pass the table's own partition key as
    ``key_attr=`` (``Leases``, ``IdempotencyStore``, ``ShardedCounter``) or a key of its schema."""

    _SAYS = (
        "table {table!r} is not keyed by {key_attr!r}, the key attribute this call used: "
        "pass key_attr=<the table's partition key> ({aws})"
    )

    def __init__(
        self,
        cause: BaseException,
        code: str,
        aws_message: str = "",
        operation: str = "",
        *,
        table: str = "",
        key_attr: str = "",
    ) -> None:
        self.key_attr = key_attr
        super().__init__(cause, code, aws_message, operation, table=table)
