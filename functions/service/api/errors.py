"""Error codes and their HTTP statuses: the one table that maps them (used by the resolver's
exception handlers and by the OpenAPI documents).

Domain errors carry a stable code (``service.domain.errors``); the HTTP layer raises
:class:`HttpError` for what it refuses itself. A code missing here fails
``tests/unit/test_error_mapping.py``; in production it is logged and answered 400, never a 500.
"""

from __future__ import annotations

from typing import Any, Literal

STATUS: dict[str, int] = {
    "BAD_REQUEST": 400,
    "BAD_JSON": 400,
    "VALIDATION_ERROR": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "ALREADY_EXISTS": 409,
    "OUT_OF_STOCK": 409,
    "EVENT_FULL": 409,
    "ALREADY_REGISTERED": 409,
    "CONFLICT": 409,
    "IDEMPOTENCY_IN_PROGRESS": 409,
    "EXPIRED": 409,
    "ALREADY_CONFIRMED": 409,
    "LOCKED": 409,
    "LOCK_LOST": 409,
    "VERSION_MISMATCH": 412,
    "PAYLOAD_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "IDEMPOTENCY_KEY_REUSED": 422,
    "PRECONDITION_REQUIRED": 428,
    "INTERNAL": 500,
    "PAYMENT_FAILED": 502,
    "THROTTLED": 503,
    "HOLD_LAPSED": 503,
    "OUTCOME_UNKNOWN": 503,
}

UNMAPPED_STATUS = 400

# One sample answer per code, for the OpenAPI documents' examples.
EXAMPLES: dict[str, dict[str, Any]] = {
    "BAD_REQUEST": {"message": "Idempotency-Key must be 1-128 visible ASCII characters"},
    "BAD_JSON": {"message": "the body is not valid JSON"},
    "VALIDATION_ERROR": {"message": "body.quantity: Input should be a valid integer"},
    "UNAUTHORIZED": {"message": "send a valid ID token of the stack's user pool"},
    "FORBIDDEN": {"message": "only administrators may do this"},
    "NOT_FOUND": {"message": "no such item"},
    "METHOD_NOT_ALLOWED": {"message": "TRACE is not a method of /products"},
    "ALREADY_EXISTS": {"message": "it already exists"},
    "OUT_OF_STOCK": {"message": "only 2 left", "available": 2},
    "EVENT_FULL": {"message": "the event is full", "capacity": 100, "registered": 100},
    "ALREADY_REGISTERED": {"message": "this user is already registered"},
    "CONFLICT": {"message": "a concurrent request changed the same data; retry"},
    "IDEMPOTENCY_IN_PROGRESS": {
        "message": "the first request with this Idempotency-Key is still running; retry shortly"
    },
    "EXPIRED": {"message": "the hold expired"},
    "ALREADY_CONFIRMED": {"message": "the reservation is confirmed"},
    "LOCKED": {
        "message": "held by someone else",
        "reason": "HELD",
        "owner": "w-1",
        "expiresAt": 1767225600000,
        "queuePosition": 2,
    },
    "LOCK_LOST": {"message": "the lease is no longer yours"},
    "VERSION_MISMATCH": {"message": "the product is at another version", "currentVersion": 3},
    "PAYLOAD_TOO_LARGE": {"message": "the body must be at most 16384 bytes"},
    "UNSUPPORTED_MEDIA_TYPE": {"message": "send the body as application/json"},
    "IDEMPOTENCY_KEY_REUSED": {"message": "this Idempotency-Key was used for a different request"},
    "PRECONDITION_REQUIRED": {"message": 'send If-Match: "<version>" from the ETag you read'},
    "INTERNAL": {"message": "internal error"},
    "PAYMENT_FAILED": {"message": "the payment provider refused the charge"},
    "THROTTLED": {"message": "the database is busy; retry shortly"},
    "HOLD_LAPSED": {
        "message": "the reservation's hold ended before it could be answered; nothing is held "
        "for it: retry",
        "retryAfterSeconds": 1,
    },
    "OUTCOME_UNKNOWN": {
        "message": "the database did not confirm the write; it may or may not have been applied"
    },
}


# The details a code carries besides ``error`` and ``message``, each field's type and what it says
# (the OpenAPI document declares them as optional properties of each route's error body). A
# code whose details differ between functions has them in ``FUNCTION_DETAILS`` instead.
Detail = tuple[Any, str]
RETRY_AFTER: dict[str, Detail] = {
    "retryAfterSeconds": (int, "seconds to wait before retrying (the Retry-After header too)")
}
LEASE_HOLDER: dict[str, Detail] = {
    "owner": (str, "who holds the lease"),
    "expiresAt": (int, "when the holder's lease ends unless renewed, epoch milliseconds"),
    **RETRY_AFTER,
}
CURRENT_FENCE: dict[str, Detail] = {
    "currentFence": (int, "the fence of the lease held now, when one is"),
}
# Why a lock was refused (service.domain.locks.locked): held by someone, or free but promised to
# the callers queued for it (how many are waiting).
LOCK_REFUSAL: dict[str, Detail] = {
    "reason": (
        Literal["HELD", "QUEUED"],
        "HELD: someone holds it; QUEUED: free, but waiters come first",
    ),
    "waiting": (int, "QUEUED: how many callers are queued for the lock"),
}
DETAILS: dict[str, dict[str, Detail]] = {
    "VERSION_MISMATCH": {"currentVersion": (int, 'the version now: send it as If-Match: "<v>"')},
    "EVENT_FULL": {
        "capacity": (int, "the event's capacity"),
        "registered": (int, "how many are registered"),
    },
    "LOCKED": {**LOCK_REFUSAL, **LEASE_HOLDER},
    "LOCK_LOST": CURRENT_FENCE,
    "EXPIRED": {"units": (list[str], "the units the reservation held, when its hold was lost")},
    "HOLD_LAPSED": RETRY_AFTER,
    "THROTTLED": RETRY_AFTER,
}
FUNCTION_DETAILS: dict[tuple[str, str], dict[str, Detail]] = {
    ("products", "OUT_OF_STOCK"): {"available": (int, "how many units are left")},
    ("inventory", "OUT_OF_STOCK"): {
        "requested": (int, "the quantity asked for"),
        "status": (Literal["CREATING"], "while the sku is still being created (only then)"),
        "unitsCreated": (int, "while creating: how many units exist so far"),
        "units": (int, "while creating: how many units the sku will have"),
        **RETRY_AFTER,
    },
    ("locks", "LOCKED"): {
        **LOCK_REFUSAL,
        **LEASE_HOLDER,
        "queuePosition": (int, "with waitMs: how many were ahead when the wait ended"),
    },
    ("wallets", "LOCK_LOST"): {
        **CURRENT_FENCE,
        "chargeId": (str, "an earlier attempt's charge, refunded: send a new Idempotency-Key"),
    },
}


def details_of(function: str, code: str) -> dict[str, Detail]:
    """The details ``code`` carries on ``function``'s routes."""
    return FUNCTION_DETAILS.get((function, code), DETAILS.get(code, {}))


class HttpError(Exception):
    """A refusal decided by the HTTP layer itself (malformed request, missing header...)."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


def error_body(code: str, message: str, **details: Any) -> dict[str, Any]:
    return {"error": code, "message": message, **details}
