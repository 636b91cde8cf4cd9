"""Domain errors carry a stable code; ``service.api.errors`` maps codes to HTTP statuses once."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    code = "DOMAIN_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(DomainError):
    code = "NOT_FOUND"


class AlreadyExists(DomainError):
    code = "ALREADY_EXISTS"


class OutOfStock(DomainError):
    code = "OUT_OF_STOCK"


class Conflict(DomainError):
    code = "CONFLICT"


class VersionMismatch(DomainError):
    code = "VERSION_MISMATCH"


class Locked(DomainError):
    code = "LOCKED"


class LockLost(DomainError):
    code = "LOCK_LOST"


class PaymentFailed(DomainError):
    code = "PAYMENT_FAILED"


class Expired(DomainError):
    code = "EXPIRED"


class AlreadyConfirmed(DomainError):
    code = "ALREADY_CONFIRMED"


class EventFull(DomainError):
    code = "EVENT_FULL"


class AlreadyRegistered(DomainError):
    code = "ALREADY_REGISTERED"


class Unauthorized(DomainError):
    """No verified caller: missing, malformed, expired, forged or foreign token (HTTP 401)."""

    code = "UNAUTHORIZED"


class Forbidden(DomainError):
    """A verified caller who may not do this (HTTP 403); see ``service.policy``."""

    code = "FORBIDDEN"
