"""Names and sizes that matter, in one place: the CDK stack, the Lambda code and the local runner
all read them from here, so what runs locally cannot drift from what is deployed.

Each Lambda gets one environment variable per table it may use, named by :func:`table_env`; the
stack sets them (``infra``) and the local runner copies them from the synthesized template.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # botocore stays out of deploy-time imports (infra reads this module)
    from turnstile_ddb import retry

# Logical table names. The CDK construct id is the capitalised name + "Table".
PRODUCTS = "products"
IDEMPOTENCY = "idempotency"
INVENTORY = "inventory"
INVENTORY_SUMMARY = "inventory_summary"

EVENTS = "events"
REGISTRATION_REQUESTS = "registration_requests"

# Events (no write skew): the GSI that lists a user's registrations, and how long a decided
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
# Response headers that are part of an answer: a replay repeats them.
IDEMPOTENCY_REPLAYED_HEADERS = ("Location", "ETag")
TTL_ATTRIBUTE = "expiresAt"

# Purchases (optimistic): lost races retried from the ALL_OLD image, with full-jitter backoff.
# Measured on the flash-sale workload (100 writers on one item, DynamoDB Local): a 50 ms cap left
# ~4.5 DynamoDB calls per request and runs that spent 37 of 40 attempts; widening the window to
# 800 ms spreads the writers so about one contends per version: ~2.3 calls, at most ~14 attempts.
# A purchase gives up (CONFLICT) after this many lost races, and on nothing else: no time budget.
# Lost races measure contention; seconds measure the path too. How many races a buyer loses
# before the stock is gone depends on how many buyers there are, not on how fast each call is
# (each attempt's image is older by one backoff window plus one call, and so is everyone's), while
# a clock reads every slow call as a lost race: the 10 s budget this replaced answered CONFLICT to
# purchases still racing for units that remained, once a loaded machine or the local HTTP bridge
# made 100 buyers take longer than 10 s to sell 100 units (measured on DynamoDB Local, 100 buyers:
# at most 15 attempts of one buyer, in a run whose slowest sale took 7 s). 32 attempts wait ~11 s
# in all on average, close to what the 10 s budget allowed on a fast path; past the function
# timeout only when nearly every wait draws the top of its window (at most ~21 s).
PURCHASE_CONFLICT_ATTEMPTS = 32
PURCHASE_CONFLICT_BASE_SECONDS = 0.01
PURCHASE_CONFLICT_CAP_SECONDS = 0.8
API_TIMEOUT_SECONDS = 15
# Sharded stock (flash sales past one item's ~1000 writes/s): shards per product, fixed at creation.
# One restock or PATCH transaction writes every shard plus the product item (100 items at most).
MAX_STOCK_SHARDS = 64
MAX_PURCHASE_QUANTITY = 1000

# Inventory (SKIP LOCKED style): units claimed one by one through a sparse index of claimable units.
# A sku's header item (sk "sku") is CREATING until its units exist; the creation worker's event
# filter (the stack's mapping, the local pump) lets only those headers through.
INVENTORY_HEADER_SK = "sku"
INVENTORY_CREATING = "CREATING"
INVENTORY_CREATION_FILTER: dict[str, Any] = {
    "dynamodb": {
        "Keys": {"sk": {"S": [INVENTORY_HEADER_SK]}},
        "NewImage": {"status": {"S": [INVENTORY_CREATING]}},
    }
}
INVENTORY_CLAIMABLE_INDEX = "claimable"
INVENTORY_MAX_UNITS = 100_000
# A sku's units are spread over pools (one partition key each, in the table and in the index):
# one pool per INVENTORY_POOL_UNITS units, at most INVENTORY_MAX_POOLS, unless the creation names N.
INVENTORY_POOL_UNITS = 1_000
INVENTORY_POOL_UNITS_ENV = (
    "TURNSTILE_INVENTORY_POOL_UNITS"  # overrides it (chaos: small skus, N > 1)
)
INVENTORY_MAX_POOLS = 16


def inventory_pool_units(env: Mapping[str, str] | None = None) -> int:
    """Units per pool when a creation names no N (read when a sku is created, not at import)."""
    raw = (os.environ if env is None else env).get(INVENTORY_POOL_UNITS_ENV, "").strip()
    return max(1, int(raw)) if raw else INVENTORY_POOL_UNITS


def inventory_create_pace(env: Mapping[str, str] | None = None) -> float | None:
    """The creation's pace the environment names (``INVENTORY_CREATE_PACE_ENV``): units a second,
    0 for unpaced; None when it names none. Read when an Inventory is built, not at import."""
    raw = (os.environ if env is None else env).get(INVENTORY_CREATE_PACE_ENV, "").strip()
    return max(0.0, float(raw)) if raw else None


INVENTORY_MAX_QUANTITY = 100  # one confirm transaction holds at most 100 items
INVENTORY_HOLD_SECONDS = 600
INVENTORY_MIN_HOLD_SECONDS = 0.1
INVENTORY_MAX_HOLD_SECONDS = 86_400
INVENTORY_CHUNK_UNITS = 10_000  # units the creation worker writes per step (one stream record)
INVENTORY_INLINE_UNITS = 1_000  # skus this small are created before POST /inventory answers
INVENTORY_CREATE_WRITERS = 4  # parallel 100-unit transactions while creating units (at most)
# Chunks one creation step writes at once (recorded together). One: steps are chained inside an
# invocation, so a smaller step only fills the worker's time more closely and leaves fewer unit
# records for the stream to get through when a chain stops (measured: 231 s vs 257 s, one run).
INVENTORY_CREATE_CHUNKS = 1
# 4,000 WCU/s at 2 WCU per transactional put: what a new on-demand table serves at first
INVENTORY_CREATE_UNITS_PER_SECOND = 2_000
# READY sku headers kept per process (service.domain.inventory), the most recently used first
INVENTORY_HEADER_CACHE_SKUS = 1_024
# Shard counts of products and of events kept per process (service.domain.products, .events), the
# most recently used: as many as turnstile_ddb.sharded.Hints keeps counters of. A forgotten one is
# learnt again from the first write or read, as a new process learns it.
SHARD_COUNTS_KEPT = 1_024
# Overrides the pace: units a second, or 0 for none. The local stack sets 0 (DynamoDB Local has no
# capacity limit: local.dynamodb_local.DynamoDBLocal.environment).
INVENTORY_CREATE_PACE_ENV = "TURNSTILE_INVENTORY_CREATE_UNITS_PER_SECOND"
# The creation worker starts another step only while its remaining time is this many times its
# longest step so far (its record is retried if it times out all the same).
INVENTORY_CREATE_STEP_MARGIN = 2.0
INVENTORY_RESERVE_ROUNDS = 12  # lost reservation writes before a retryable 503, never OUT_OF_STOCK
# While a sku is CREATING, a reservation that found too few offered units answers OUT_OF_STOCK with
# the creation's progress and this Retry-After: about one chunk's time at the paced rate (10,000
# units at 2,000 a second), when more units are offered.
INVENTORY_CREATING_RETRY_SECONDS = 5
# While a sku is CREATING, a reservation's index reads take pages of this many keys (most units
# the index lists may not be offered yet); each read of a pool still sends at most
# turnstile_ddb.claims.PAGES_PER_POOL Queries.
INVENTORY_CREATING_PAGE_KEYS = 100

# Throttling and transient errors on any single call.
CALL_ATTEMPTS = 6
CALL_BASE_SECONDS = 0.02
CALL_CAP_SECONDS = 0.5

# DynamoDB Streams consumers: the event source mapping in CDK and the local pump both use these.
STREAM_BATCH_SIZE = 100
STREAM_RETRY_ATTEMPTS = 5
STREAM_MAX_RECORD_AGE_SECONDS = 3600

# API Gateway stage throttling (steady requests/s and burst), shared by CDK and the README.
API_RATE_LIMIT = 200
API_BURST_LIMIT = 400


def table_env(name: str) -> str:
    """The environment variable that carries table ``name``'s physical name."""
    return f"{name.upper()}_TABLE"


def call_backoff() -> retry.Backoff:
    from turnstile_ddb import retry

    return retry.Backoff(attempts=CALL_ATTEMPTS, base=CALL_BASE_SECONDS, cap=CALL_CAP_SECONDS)


def registration_backoff() -> retry.Backoff:
    from turnstile_ddb import retry

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


# Leases (locks, wallets). expiresAt is epoch ms and decides. Lease items carry the fence, which
# must increase forever, so the lease table has no TTL: its items are never deleted.
LEASES = "leases"
WALLETS = "wallets"
LOCK_MIN_TTL_SECONDS = 0.1
LOCK_MAX_TTL_SECONDS = 3600
# POST /locks/{resource} with waitMs queues (turnstile_ddb.lease_queue). Bounded well inside API
# Gateway's 29 s integration timeout and the locks function's own timeout (LOCKS_TIMEOUT_SECONDS);
# inside Lambda the wait also ends LOCK_WAIT_MARGIN_MS before the invocation would.
LOCK_MAX_WAIT_MS = 20_000
LOCKS_TIMEOUT_SECONDS = 25
LOCK_WAIT_MARGIN_MS = 1_000
# Queue heartbeat (H) and expiry (L) of waiters: a waiter silent for L is passed over.
LOCK_QUEUE_HEARTBEAT_MS = 500
LOCK_QUEUE_EXPIRY_MS = 1_500
LOCK_QUEUE_POLL_MS = 50
# Wallet top-ups: the lease outlives the provider call; a request waits this long for the lease.
WALLET_LEASE_MS = 8_000
WALLET_LOCK_WAIT_MS = 3_000
WALLET_WAIT_BASE_SECONDS = 0.005
WALLET_WAIT_CAP_SECONDS = 0.1
MAX_TOP_UP = 1_000_000
