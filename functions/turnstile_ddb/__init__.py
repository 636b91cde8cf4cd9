"""turnstile-ddb (import ``turnstile_ddb``): concurrency-control primitives for Amazon DynamoDB.

Each pattern is one module, readable top to bottom, with every condition expression it
issues written out in its docstring. Nothing here knows about API Gateway or Lambda events;
every function takes an injected low-level boto3 DynamoDB client.

- ``retry``: which failures may be retried, and jittered backoff.
- ``codec``: plain Python values <-> DynamoDB attribute values.
- ``versioned``: optimistic read-decide-write guarded by a version number, and the read-free
  writes that move the version (``decrement``, ``increment``, ``bump``).
- ``creation``: create an item only if its key is free.
- ``idempotency``: first-answer-wins records for client retries (``record_keys``: their keys,
  without boto3, for deploy-time IAM policies).
- ``transact``: TransactWriteItems with a ClientRequestToken and decoded cancellation reasons.
- ``capacity``: a counter item as materialized lock for a bounded membership (no write skew).
- ``slots``: pre-created slot rows claimed by conditional update (capacity without write skew).
- ``lease``: lease locks with fencing tokens, fenced writes, a FOR UPDATE-style critical section.
- ``lease_queue``: fair (FIFO) waiting for a lease, heartbeats, bounded waits.
- ``claims``: units as items, reserved in one transaction each.
- ``sharded``: a counter split over shards, past one key's write ceiling.
- ``adaptive``: a sharded counter's shard count that follows its load (a window, a policy, a
  resizer under a lease).
- ``cdk`` (extra ``turnstile-ddb[cdk]``): a table per primitive with its exact grant.
- ``consumption``: a client that counts its DynamoDB calls and the capacity units each consumed.
- ``aio`` (extra ``turnstile-ddb[async]``): the primitives ported so far as coroutines taking an
  aiobotocore client; both front doors run one protocol per primitive (``_core``).
- ``metrics``: where every primitive reports what contention cost it (conflicts, retries, waits).
- ``errors``: the one exception hierarchy (``TurnstileError``: ``Refused``, ``Retryable``,
  ``OutcomeUnknown``).

Importing ``turnstile_ddb`` loads only the exception hierarchy (no boto3, no botocore); each pattern
module loads when it is imported by name (``from turnstile_ddb import lease``).
"""

from __future__ import annotations

from turnstile_ddb.errors import NotFound, OutcomeUnknown, Refused, Retryable, TurnstileError

__version__ = "1.0.0"

__all__ = [
    "NotFound",
    "OutcomeUnknown",
    "Refused",
    "Retryable",
    "TurnstileError",
    "__version__",
]
