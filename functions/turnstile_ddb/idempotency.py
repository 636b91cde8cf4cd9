"""First answer wins: records that let a client retry a request safely, and get the first answer.

One item per key. A key made by :func:`record_id` (``<partition>#<scope>``) lets IAM confine each
writer to the records of its own partitions (``dynamodb:LeadingKeys`` like ``<partition>#*``): one
writer can then neither read nor overwrite another's stored answers. ``begin`` takes the key with
a conditional put and hands back an :class:`InProgress` record the caller owns::

    PutItem  ConditionExpression:
        attribute_not_exists(#id)
        OR (#status = :in_progress AND #lockedUntil < :now AND #fingerprint = :fingerprint)
        ReturnValuesOnConditionCheckFailure: ALL_OLD

so exactly one request runs the operation, and an abandoned record is taken over only by the same
request (a different request under the key must never inherit, say, the first request's charge). A
request that finds the key taken reads the ALL_OLD image from the failure itself and either
replays the stored answer (COMPLETED), refuses a different request under the same key (the
fingerprint differs), or says the first request is still running.

The answer is stored by an update that only the record's owner can make::

    UpdateItem  SET #status = :completed, #answer = :answer
                REMOVE #lockedUntil
                ConditionExpression: #token = :token AND #status = :in_progress

The answer is opaque to the store: any JSON-serialisable value, stored as JSON and given back as
:attr:`Replay.answer`. What it means (a status, a body, which headers a replay repeats) is the
caller's business; the library knows no protocol. A record written by turnstile-ddb 0.3 kept its
answer in three attributes (``statusCode``, ``body``, ``headers``: :attr:`RecordNames.legacy`);
it still replays, as the answer ``{"statusCode": ..., "body": ..., "headers": ...}`` (the
attributes it has, JSON strings decoded), so a caller that stores answers of that shape reads both
alike.

:meth:`IdempotencyStore.complete_op` returns that update as a ``TransactWriteItems`` element, so a
domain write and the stored answer can commit together: then a crash after the commit replays the
answer, a crash before it leaves a record that expires (``lockedUntil``) and is taken over, and a
late first attempt can no longer commit because its token is no longer the record's. That makes the
operation exactly-once. Operations that complete outside a transaction are at-most-once per record:
if the process dies between the write and ``complete``, a retry after ``lockedUntil`` runs again.
Code deep inside the operation that commits the answer often has only its own result (a receipt),
not the caller's answer: :attr:`InProgress.answer_for`, set by whoever shapes answers, turns one
into the other (:meth:`InProgress.answer_of`).

``release`` gives a key back when the request changed nothing (a refusal, a throttle), so that
only answers with an effect are stored and a rejected request leaves nothing behind::

    DeleteItem  ConditionExpression: #token = :token AND #status = :in_progress

It is retried like any idempotent call (a resend finds the item gone or not its own: same end
state); if it still fails, the record simply lapses at ``lockedUntil``.

``expiresAt`` (epoch seconds; the store's ``expiry_attr``) is the TTL attribute: it only cleans
up; the conditions decide. The table's key and TTL attributes are the store's ``key_attr`` and
``expiry_attr``, and the record's own attributes are its ``names`` (:class:`RecordNames`, today's
names by default), so a table made by ``turnstile_ddb.cdk.IdempotencyTable`` with other names
works too::

    store = IdempotencyStore(client, "answers", key_attr="pk", expiry_attr="ttl",
                             names=RecordNames(answer="result"))
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _checks, _contract, _core, codec, deprecation, errors, metrics, retry
from turnstile_ddb.record_keys import record_id as record_id  # re-exported (deploy-safe)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "COMPLETED",
    "IN_PROGRESS",
    "METRICS",
    "IdempotencyStore",
    "InProgress",
    "KeyReused",
    "RecordNames",
    "Replay",
    "StillRunning",
    "fingerprint",
    "record_id",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = (
    "IdempotentReplay",
    "IdempotencyInProgress",
    "IdempotencyKeyReused",
    "ClaimReleased",
)

PATTERN = "idempotency"  # metrics: IdempotentReplay, IdempotencyInProgress, IdempotencyKeyReused
IN_PROGRESS = "IN_PROGRESS"
COMPLETED = "COMPLETED"


@dataclass(frozen=True)
class RecordNames:
    """The attribute names of an idempotency record (besides the table's key and TTL attributes,
    which are the store's ``key_attr`` and ``expiry_attr``). ``legacy``: the attributes a record
    written by turnstile-ddb 0.3 kept its answer in, read (never written) when ``answer`` is
    missing."""

    status: str = "status"
    locked_until: str = "lockedUntil"
    token: str = "token"
    fingerprint: str = "fingerprint"
    answer: str = "answer"
    legacy: tuple[str, ...] = ("statusCode", "body", "headers")

    def __post_init__(self) -> None:
        _checks.distinct_names("RecordNames", self.stored())

    def stored(self) -> list[tuple[str, str]]:
        """(field, stored name) for every name: each must be its own attribute."""
        own = [(f, getattr(self, f)) for f in ("status", "locked_until", "token", "fingerprint")]
        legacy = [(f"legacy[{i}]", name) for i, name in enumerate(self.legacy)]
        return [*own, ("answer", self.answer), *legacy]


class KeyReused(errors.Refused):
    """The key was first used for a different request."""


class StillRunning(errors.Retryable):
    """The first request with this key has not finished yet."""

    def __init__(self, retry_after_ms: int) -> None:
        super().__init__("the first request with this idempotency key is still in progress")
        self.retry_after_ms = retry_after_ms


@dataclass
class InProgress:
    """This request owns the key until ``locked_until`` (epoch ms) or until it completes.

    ``answer_for`` turns the operation's own result into the answer to store, for code that
    commits the answer inside the operation (:meth:`IdempotencyStore.complete_op`) but knows only
    its result; set by whoever shapes answers (None: the result is the answer)."""

    key: str
    token: str
    locked_until: int
    completed: bool = False
    fingerprint: str = ""
    answer_for: Callable[[Any], Any] | None = None

    def answer_of(self, result: Any) -> Any:
        """The answer to store for ``result`` (``answer_for(result)``, or ``result`` itself)."""
        return result if self.answer_for is None else self.answer_for(result)


@dataclass(frozen=True)
class Replay:
    """The stored first answer, as it was given to ``complete`` (or, for a record written by
    turnstile-ddb 0.3, the mapping of its legacy attributes: module docstring)."""

    answer: Any


__getattr__ = deprecation.renamed(
    __name__,
    {"Claim": ("1.0.0", "2.0.0", "turnstile_ddb.idempotency.InProgress", lambda: InProgress)},
)


def fingerprint(*parts: Any) -> str:
    """A stable hash of what makes two requests "the same request"."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


@dataclass
class IdempotencyStore:
    """The records of one table: ``begin`` a key, then ``complete`` it with the answer or
    ``release`` it (module docstring). Its decisions are the ``_*_protocol`` methods
    (:mod:`turnstile_ddb._core`), which never touch ``client``: the asyncio store
    (``turnstile_ddb.aio.idempotency``) drives the same ones."""

    client: DynamoDBClient
    table: str
    backoff: retry.Backoff = field(default_factory=retry.Backoff)
    lock_ms: int = 30_000
    keep_seconds: int = 24 * 3600
    clock: Callable[[], float] = time.time
    key_attr: str = "id"  # the table's partition key
    expiry_attr: str = "expiresAt"  # the table's TTL attribute (epoch seconds)
    names: RecordNames = field(default_factory=RecordNames)  # the record's own attributes

    def __post_init__(self) -> None:
        """Refuse a layout that names one attribute twice (the record would lose one: a lock
        that is the expiry lapses at once and lets a request run twice) and times that cannot
        hold a record."""
        table = [("key_attr", self.key_attr), ("expiry_attr", self.expiry_attr)]
        names = [(f"names.{f}", name) for f, name in self.names.stored()]
        _checks.distinct_names("IdempotencyStore", [*table, *names])
        _checks.at_least("IdempotencyStore", "lock_ms", self.lock_ms, 1)
        _checks.at_least("IdempotencyStore", "keep_seconds", self.keep_seconds, 1)

    def _names(self, *placeholders: str) -> dict[str, str]:
        n = self.names
        every = {
            "#id": self.key_attr,
            "#status": n.status,
            "#lockedUntil": n.locked_until,
            "#token": n.token,
            "#fingerprint": n.fingerprint,
            "#answer": n.answer,
        }
        return {k: every[k] for k in placeholders}

    def _begin_protocol(
        self, key: str, request_fingerprint: str
    ) -> _core.Steps[InProgress | Replay]:
        """:meth:`IdempotencyStore.begin`'s protocol; so are the other ``*_protocol``."""
        now_ms = int((yield _core.Now(self.clock)) * 1000)
        begun = InProgress(
            key=key,
            token=uuid.uuid4().hex,
            locked_until=now_ms + self.lock_ms,
            fingerprint=request_fingerprint,
        )
        n = self.names
        item = {
            self.key_attr: key,
            n.status: IN_PROGRESS,
            n.fingerprint: request_fingerprint,
            n.token: begun.token,
            n.locked_until: begun.locked_until,
            self.expiry_attr: int((yield _core.Now(self.clock))) + self.keep_seconds,
        }
        request = {
            "TableName": self.table,
            "Item": codec.encode_item(item),
            "ConditionExpression": (
                "attribute_not_exists(#id) OR (#status = :in_progress "
                "AND #lockedUntil < :now AND #fingerprint = :fingerprint)"
            ),
            "ExpressionAttributeNames": self._names(
                "#id", "#status", "#lockedUntil", "#fingerprint"
            ),
            "ExpressionAttributeValues": codec.values(
                in_progress=IN_PROGRESS, now=now_ms, fingerprint=request_fingerprint
            ),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        try:
            yield from retry.retrying(
                _core.Call("put_item", request),
                backoff=self.backoff,
                idempotent=False,
                pattern=PATTERN,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            return self._existing(codec.old_item(exc) or {}, request_fingerprint, now_ms)
        return begun

    def _existing(self, old: dict[str, Any], request_fingerprint: str, now_ms: int) -> Replay:
        n = self.names
        if old.get(n.fingerprint) != request_fingerprint:
            metrics.count("IdempotencyKeyReused", pattern=PATTERN)
            raise KeyReused(old.get(self.key_attr))
        if old.get(n.status) == COMPLETED:
            metrics.count("IdempotentReplay", pattern=PATTERN)
            return Replay(answer=self._answer(old))
        metrics.count("IdempotencyInProgress", pattern=PATTERN)
        raise StillRunning(max(0, int(old.get(n.locked_until, now_ms)) - now_ms))

    def _answer(self, record: dict[str, Any]) -> Any:
        """The stored answer; a 0.3 record's is the mapping of its legacy attributes."""
        if self.names.answer in record:
            return json.loads(record[self.names.answer])
        return {
            name: json.loads(record[name]) if isinstance(record[name], str) else record[name]
            for name in self.names.legacy
            if name in record
        }

    def complete_op(self, in_progress: InProgress, answer: Any) -> dict[str, Any]:
        """The guarded "store the answer" update, as one ``TransactWriteItems`` element
        (``answer``: any JSON-serialisable value; :meth:`InProgress.answer_of` makes it from a
        result)."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": codec.encode_item({self.key_attr: in_progress.key}),
                "UpdateExpression": (
                    "SET #status = :completed, #answer = :answer REMOVE #lockedUntil"
                ),
                "ConditionExpression": "#token = :token AND #status = :in_progress",
                "ExpressionAttributeNames": self._names(
                    "#status", "#answer", "#lockedUntil", "#token"
                ),
                "ExpressionAttributeValues": codec.values(
                    completed=COMPLETED,
                    answer=_json(answer),
                    token=in_progress.token,
                    in_progress=IN_PROGRESS,
                ),
            }
        }

    def _complete_protocol(self, in_progress: InProgress, answer: Any) -> _core.Steps[bool]:
        """:meth:`IdempotencyStore.complete`'s protocol."""
        if in_progress.completed:
            return True
        update = self.complete_op(in_progress, answer)["Update"]
        try:
            yield from retry.retrying(
                _core.Call("update_item", update),
                backoff=self.backoff,
                idempotent=True,
                pattern=PATTERN,
            )
        except ClientError as exc:
            if retry.condition_failed(exc):
                return False
            raise
        in_progress.completed = True
        return True

    def _release_protocol(self, in_progress: InProgress) -> _core.Steps[None]:
        """:meth:`IdempotencyStore.release`'s protocol."""
        request = {
            "TableName": self.table,
            "Key": codec.encode_item({self.key_attr: in_progress.key}),
            "ConditionExpression": "#token = :token AND #status = :in_progress",
            "ExpressionAttributeNames": self._names("#token", "#status"),
            "ExpressionAttributeValues": codec.values(
                token=in_progress.token, in_progress=IN_PROGRESS
            ),
        }
        try:
            yield from retry.retrying(
                _core.Call("delete_item", request),
                backoff=self.backoff,
                idempotent=True,  # a resend finds the item gone (condition fails): same end state
                pattern=PATTERN,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            return  # no longer this request's (taken over): nothing of ours to give back
        metrics.count("ClaimReleased", pattern=PATTERN)

    @_contract.write
    def begin(self, key: str, request_fingerprint: str) -> InProgress | Replay:
        """Take ``key`` for this request (:class:`InProgress`), or the first answer under it
        (:class:`Replay`). Raises :class:`KeyReused` (another request took the key) and
        :class:`StillRunning` (the first request has not answered yet)."""
        return _core.run(self.client, self._begin_protocol(key, request_fingerprint))

    @_contract.write
    def complete(self, in_progress: InProgress, answer: Any) -> bool:
        """Store the answer outside a transaction; False if the record was taken over meanwhile."""
        return _core.run(self.client, self._complete_protocol(in_progress, answer))

    @_contract.write
    def release(self, in_progress: InProgress) -> None:
        """Give the key back (the request changed nothing; a retry must run it again).

        Raises :class:`turnstile_ddb.retry.RetriesExhausted` / ``OutcomeUnknown`` when the database
        stays away: the caller still has its answer, and the record lapses at ``lockedUntil``."""
        _core.run(self.client, self._release_protocol(in_progress))
