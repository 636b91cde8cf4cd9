"""Every exception turnstile raises, in one hierarchy.

What a caller must decide after a failure is which of three things happened, so that is what the
types say::

    TurnstileError
    ├── Refused          the database decided no: nothing was written, and the same request
    │   │                will be refused again until the data changes (a condition failed)
    │   └── NotFound     the item the operation needs does not exist
    ├── Retryable        nothing was written, and a later attempt may succeed (contention,
    │                    throttling, a lease held by someone else, a budget spent)
    └── OutcomeUnknown   a write was sent and no answer came back: it may or may not have
                         been applied; only a read (or an idempotent resend) can tell

An error of the AWS SDK (a botocore ``ClientError`` or ``BotoCoreError``) never leaves a public
function raw: it is wrapped in the kind that says what to do, :class:`AwsRefused` (invalid,
forbidden, a missing table, a condition no pattern interpreted), :class:`AwsRetryable`
(throttled, not sent, a read that failed) or :class:`AwsOutcomeUnknown` (a write timed out or met
a server error), each carrying the original as ``.cause`` and its error code as ``.code``.

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
    "NotFound",
    "OutcomeUnknown",
    "Refused",
    "Retryable",
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
