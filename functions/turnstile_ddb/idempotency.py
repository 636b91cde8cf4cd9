"""First answer wins: records that let a client retry a POST safely (``Idempotency-Key``).

One item per key. A key made by :func:`record_id` (``<partition>#<scope>``) lets IAM confine each
writer to the records of its own partitions (``dynamodb:LeadingKeys`` like ``<partition>#*``): one
writer can then neither read nor overwrite another's stored answers. ``begin`` claims the key with
a conditional put::

    PutItem  ConditionExpression:
        attribute_not_exists(#id)
        OR (#status = :in_progress AND #lockedUntil < :now AND #fingerprint = :fingerprint)
        ReturnValuesOnConditionCheckFailure: ALL_OLD

so exactly one request runs the operation, and an abandoned claim is taken over only by the same
request (a different body under the key must never inherit, say, the first request's charge). A
request that finds the key taken reads the ALL_OLD image from the failure itself and either
replays the stored answer (COMPLETED), refuses a different request under the same key (the
fingerprint differs), or says the first request is still running.

The answer is stored by an update that only the claim's owner can make::

    UpdateItem  SET #status = :completed, #code = :code, #body = :body, #headers = :headers
                REMOVE #lockedUntil
                ConditionExpression: #token = :token AND #status = :in_progress

The answer is its status, body and the headers a replay must repeat (the store's
``replayed_headers``: which ones is the caller's business, an HTTP service passes e.g. ``Location``
and ``ETag``); a replay returns all three. The record's key attribute is ``key_attr`` (``id``).

:meth:`IdempotencyStore.complete_op` returns that update as a ``TransactWriteItems`` element, so a
domain write and the stored answer can commit together: then a crash after the commit replays the
answer, a crash before it leaves a claim that expires (``lockedUntil``) and is taken over, and a
late first attempt can no longer commit because its token is no longer the record's. That makes the
operation exactly-once. Operations that complete outside a transaction are at-most-once per claim:
if the process dies between the write and ``complete``, a retry after ``lockedUntil`` runs again.

``release`` gives a key back when the request changed nothing (a refusal, a throttle), so that
only answers with an effect are stored and a rejected request leaves nothing behind::

    DeleteItem  ConditionExpression: #token = :token AND #status = :in_progress

It is retried like any idempotent call (a resend finds the item gone or not its own: same end
state); if it still fails, the claim simply lapses at ``lockedUntil``.

``expiresAt`` (epoch seconds; the store's ``expiry_attr``) is the TTL attribute: it only cleans
up; the conditions decide. The table's key and TTL attributes are the store's ``key_attr`` and
``expiry_attr``, so a table made by ``turnstile_ddb.cdk.IdempotencyTable`` with other names works
too::

    store = IdempotencyStore(client, "answers", key_attr="pk", expiry_attr="ttl")
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _contract, codec, errors, metrics, retry
from turnstile_ddb.record_keys import record_id as record_id  # re-exported (deploy-safe)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "COMPLETED",
    "IN_PROGRESS",
    "Claim",
    "IdempotencyStore",
    "KeyReused",
    "Replay",
    "StillRunning",
    "fingerprint",
    "record_id",
]

PATTERN = "idempotency"  # metrics: IdempotentReplay, IdempotencyInProgress, IdempotencyKeyReused
IN_PROGRESS = "IN_PROGRESS"
COMPLETED = "COMPLETED"

_NAMES = {
    "#id": "id",
    "#status": "status",
    "#lockedUntil": "lockedUntil",
    "#token": "token",
    "#code": "statusCode",
    "#body": "body",
    "#fingerprint": "fingerprint",
    "#headers": "headers",
}


class KeyReused(errors.Refused):
    """The key was first used for a different request."""


class StillRunning(errors.Retryable):
    """The first request with this key has not finished yet."""

    def __init__(self, retry_after_ms: int) -> None:
        super().__init__("a request with this Idempotency-Key is still in progress")
        self.retry_after_ms = retry_after_ms


@dataclass
class Claim:
    """This request owns the key until ``locked_until`` (epoch ms) or until it completes."""

    key: str
    token: str
    locked_until: int
    completed: bool = False
    fingerprint: str = ""
    # How an answer committed inside a domain transaction (complete_op) gets its replayed
    # headers: set by whoever builds the HTTP answer from the body (None: no headers).
    headers_for: Callable[[Any], Mapping[str, str]] | None = None


@dataclass(frozen=True)
class Replay:
    """The stored first answer."""

    status_code: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


def fingerprint(*parts: Any) -> str:
    """A stable hash of what makes two requests "the same request"."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class IdempotencyStore:
    client: DynamoDBClient
    table: str
    backoff: retry.Backoff = field(default_factory=retry.Backoff)
    lock_ms: int = 30_000
    keep_seconds: int = 24 * 3600
    clock: Callable[[], float] = time.time
    key_attr: str = "id"  # the table's partition key
    expiry_attr: str = "expiresAt"  # the table's TTL attribute (epoch seconds)
    replayed_headers: tuple[str, ...] = ()  # headers stored with an answer and replayed with it

    def _names(self, *placeholders: str) -> dict[str, str]:
        return {k: self.key_attr if k == "#id" else _NAMES[k] for k in placeholders}

    @_contract.write
    def begin(self, key: str, request_fingerprint: str) -> Claim | Replay:
        now_ms = int(self.clock() * 1000)
        claim = Claim(
            key=key,
            token=uuid.uuid4().hex,
            locked_until=now_ms + self.lock_ms,
            fingerprint=request_fingerprint,
        )
        item = {
            self.key_attr: key,
            "status": IN_PROGRESS,
            "fingerprint": request_fingerprint,
            "token": claim.token,
            "lockedUntil": claim.locked_until,
            self.expiry_attr: int(self.clock()) + self.keep_seconds,
        }
        try:
            retry.call(
                lambda: self.client.put_item(
                    TableName=self.table,
                    Item=codec.encode_item(item),
                    ConditionExpression=(
                        "attribute_not_exists(#id) OR (#status = :in_progress "
                        "AND #lockedUntil < :now AND #fingerprint = :fingerprint)"
                    ),
                    ExpressionAttributeNames=self._names(
                        "#id", "#status", "#lockedUntil", "#fingerprint"
                    ),
                    ExpressionAttributeValues=codec.values(
                        in_progress=IN_PROGRESS, now=now_ms, fingerprint=request_fingerprint
                    ),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
                backoff=self.backoff,
                idempotent=False,
                pattern=PATTERN,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            return self._existing(codec.old_item(exc) or {}, request_fingerprint, now_ms)
        return claim

    def _existing(self, old: dict[str, Any], request_fingerprint: str, now_ms: int) -> Replay:
        if old.get("fingerprint") != request_fingerprint:
            metrics.count("IdempotencyKeyReused", pattern=PATTERN)
            raise KeyReused(old.get(self.key_attr))
        if old.get("status") == COMPLETED:
            metrics.count("IdempotentReplay", pattern=PATTERN)
            return Replay(
                status_code=int(old["statusCode"]),
                body=json.loads(old["body"]),
                headers=json.loads(old.get("headers") or "{}"),
            )
        metrics.count("IdempotencyInProgress", pattern=PATTERN)
        raise StillRunning(max(0, int(old.get("lockedUntil", now_ms)) - now_ms))

    def complete_op(
        self,
        claim: Claim,
        status_code: int,
        body: Any,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The guarded "store the answer" update, as one ``TransactWriteItems`` element."""
        if headers is None:
            headers = claim.headers_for(body) if claim.headers_for else {}
        kept = {name: headers[name] for name in self.replayed_headers if name in headers}
        return {
            "Update": {
                "TableName": self.table,
                "Key": codec.encode_item({self.key_attr: claim.key}),
                "UpdateExpression": (
                    "SET #status = :completed, #code = :code, #body = :body, "
                    "#headers = :headers REMOVE #lockedUntil"
                ),
                "ConditionExpression": "#token = :token AND #status = :in_progress",
                "ExpressionAttributeNames": self._names(
                    "#status", "#code", "#body", "#headers", "#lockedUntil", "#token"
                ),
                "ExpressionAttributeValues": codec.values(
                    completed=COMPLETED,
                    code=status_code,
                    body=json.dumps(body, separators=(",", ":")),
                    headers=json.dumps(kept, separators=(",", ":")),
                    token=claim.token,
                    in_progress=IN_PROGRESS,
                ),
            }
        }

    @_contract.write
    def complete(
        self,
        claim: Claim,
        status_code: int,
        body: Any,
        headers: Mapping[str, str] | None = None,
    ) -> bool:
        """Store the answer outside a transaction; False if the claim was lost meanwhile."""
        if claim.completed:
            return True
        update = self.complete_op(claim, status_code, body, headers)["Update"]
        try:
            retry.call(
                lambda: self.client.update_item(**update),
                backoff=self.backoff,
                idempotent=True,
                pattern=PATTERN,
            )
        except ClientError as exc:
            if retry.condition_failed(exc):
                return False
            raise
        claim.completed = True
        return True

    @_contract.write
    def release(self, claim: Claim) -> None:
        """Give the key back (the request changed nothing; a retry must run it again).

        Raises :class:`turnstile_ddb.retry.RetriesExhausted` / ``OutcomeUnknown`` when the database
        stays away: the caller still has its answer, and the claim lapses at ``lockedUntil``."""
        try:
            retry.call(
                lambda: self.client.delete_item(
                    TableName=self.table,
                    Key=codec.encode_item({self.key_attr: claim.key}),
                    ConditionExpression="#token = :token AND #status = :in_progress",
                    ExpressionAttributeNames=self._names("#token", "#status"),
                    ExpressionAttributeValues=codec.values(
                        token=claim.token, in_progress=IN_PROGRESS
                    ),
                ),
                backoff=self.backoff,
                idempotent=True,  # a resend finds the item gone (condition fails): same end state
                pattern=PATTERN,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            return  # no longer this claim's (taken over): nothing of ours to give back
        metrics.count("ClaimReleased", pattern=PATTERN)
