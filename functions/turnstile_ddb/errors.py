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

Each pattern's own exceptions (``lease.Held``, ``versioned.VersionMismatch``, ...) derive from
one of these, so ``except turnstile_ddb.Retryable`` catches every "try again later" at once while
``except lease.Held`` still reads the holder from the exception.

This module imports nothing, so importing it (or ``turnstile_ddb``) costs nothing.
"""

from __future__ import annotations

__all__ = ["NotFound", "OutcomeUnknown", "Refused", "Retryable", "TurnstileError"]


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
