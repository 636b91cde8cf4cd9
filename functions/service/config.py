"""Names and sizes that matter, in one place: the CDK stack, the Lambda code and the local runner
all read them from here, so what runs locally cannot drift from what is deployed.

Each Lambda gets one environment variable per table it may use, named by :func:`table_env`; the
stack sets them (``infra``) and the local runner copies them from the synthesized template.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from turnstile import retry

# Logical table names. The CDK construct id is the capitalised name + "Table".
PRODUCTS = "products"
IDEMPOTENCY = "idempotency"
EVENTS = "events"
REGISTRATION_REQUESTS = "registration_requests"

# Events (seed 001): the GSI that lists a user's registrations, and how long a decided
# registration request stays readable before TTL cleans it up (cleanup only, never correctness).
EVENTS_BY_USER_INDEX = "byUser"
MAX_EVENT_CAPACITY = 100_000
REGISTRATION_REQUEST_KEEP_SECONDS = 7 * 24 * 3600
# Every registration transaction touches the event item, so on a popular event they collide
# (TransactionConflict): retried with full-jitter backoff, same ClientRequestToken each time.
REGISTRATION_ATTEMPTS = 10
REGISTRATION_BASE_SECONDS = 0.01
REGISTRATION_CAP_SECONDS = 0.3

# Requests.
MAX_BODY_BYTES = 16 * 1024
IDEMPOTENCY_LOCK_MS = 30_000
IDEMPOTENCY_KEEP_SECONDS = 24 * 3600
TTL_ATTRIBUTE = "expiresAt"

# Purchases (seed 000): lost races retried from the ALL_OLD image, with full-jitter backoff.
PURCHASE_CONFLICT_ATTEMPTS = 40
PURCHASE_CONFLICT_BASE_SECONDS = 0.002
PURCHASE_CONFLICT_CAP_SECONDS = 0.05
MAX_PURCHASE_QUANTITY = 1000

# Throttling and transient errors on any single call.
CALL_ATTEMPTS = 6
CALL_BASE_SECONDS = 0.02
CALL_CAP_SECONDS = 0.5

# DynamoDB Streams consumers: the event source mapping in CDK and the local pump both use these.
STREAM_BATCH_SIZE = 100
STREAM_RETRY_ATTEMPTS = 5
STREAM_MAX_RECORD_AGE_SECONDS = 3600
STREAM_MAX_BATCHING_WINDOW_SECONDS = 0

# API Gateway stage throttling (steady requests/s and burst), shared by CDK and the README.
API_RATE_LIMIT = 200
API_BURST_LIMIT = 400


def table_env(name: str) -> str:
    """The environment variable that carries table ``name``'s physical name."""
    return f"{name.upper()}_TABLE"


def call_backoff() -> retry.Backoff:
    return retry.Backoff(attempts=CALL_ATTEMPTS, base=CALL_BASE_SECONDS, cap=CALL_CAP_SECONDS)


def registration_backoff() -> retry.Backoff:
    return retry.Backoff(
        attempts=REGISTRATION_ATTEMPTS,
        base=REGISTRATION_BASE_SECONDS,
        cap=REGISTRATION_CAP_SECONDS,
    )


@dataclass(frozen=True)
class Tables:
    """Physical table names for one function, read once at cold start."""

    names: Mapping[str, str]

    @classmethod
    def from_env(cls, *wanted: str, env: Mapping[str, str] | None = None) -> Tables:
        source = os.environ if env is None else env
        missing = [table_env(name) for name in wanted if table_env(name) not in source]
        if missing:
            raise RuntimeError(f"missing environment variables: {', '.join(missing)}")
        return cls({name: source[table_env(name)] for name in wanted})

    def __getitem__(self, name: str) -> str:
        return self.names[name]
