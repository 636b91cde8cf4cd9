"""Optimistic concurrency with a version number (seed 000, done carefully).

The read, decide, write loop:

1. Read the item with a *strongly consistent* ``GetItem``. (Never take the version from a GSI or an
   eventually consistent read: either may be stale, and a stale version turns every write into a
   conflict or, worse, hides one.)
2. Call ``decide(item)``: business logic that returns the attributes to set, or raises to stop
   (for example "out of stock").
3. Write, guarded by the version that was read::

       UpdateExpression:    SET #a0 = :a0, ..., #version = :next
       ConditionExpression: #version = :expected
                            (attribute_not_exists(#version) when the item did not exist)
       ReturnValuesOnConditionCheckFailure: ALL_OLD

4. On ``ConditionalCheckFailedException`` the failure itself carries the current item (ALL_OLD), so
   the loop goes back to step 2 with it after a jittered backoff, without a second read. A
   ``decide`` that raises on the fresh item ends the loop at once (no pointless retries).

Metrics (pattern ``versioned``): ``VersionConflict`` for every refused version-checked write,
``ConflictGiveUp`` when the budget is spent (the caller's ``CONFLICT``), ``VersionedWrite`` for
every write that landed (so conflicts per write is their ratio), ``VersionMismatch`` for a refused
caller-supplied version (HTTP ``If-Match``).

A version is a counter, not a timestamp: two writes in the same second (or millisecond) would carry
the same timestamp and the check would let the second one overwrite the first.

When ``also`` is given, the write becomes a ``TransactWriteItems`` of the guarded update plus those
items (for example an idempotency record), all applied or none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile import codec, errors, metrics, retry, transact

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "Also",
    "Decide",
    "Item",
    "VersionConflict",
    "VersionMismatch",
    "Written",
    "read",
    "update_if_version",
    "update_versioned",
]

PATTERN = "versioned"

Item = dict[str, Any]
Decide = Callable[[Item | None], Mapping[str, Any]]
Also = Callable[[Item | None, Mapping[str, Any]], Sequence[dict[str, Any]]]


class VersionConflict(errors.Retryable):
    """Every attempt lost the race to a concurrent writer; the retry budget is spent."""

    def __init__(self, attempts: int, current: Item | None) -> None:
        super().__init__(f"version conflict after {attempts} attempts")
        self.attempts = attempts
        self.current = current


class VersionMismatch(errors.Refused):
    """A write that named an expected version found another one (or no item)."""

    def __init__(self, current: Item | None) -> None:
        super().__init__("version mismatch")
        self.current = current


@dataclass(frozen=True)
class Written:
    """The item after a successful versioned write, and how many write attempts it took."""

    item: Item
    attempts: int


def _update_parts(
    changes: Mapping[str, Any], version_attr: str, expected: int | None
) -> dict[str, Any]:
    names = {"#version": version_attr}
    values: dict[str, Any] = {":next": codec.encode((expected or 0) + 1)}
    assignments = []
    for index, (name, value) in enumerate(changes.items()):
        names[f"#a{index}"] = name
        values[f":a{index}"] = codec.encode(value)
        assignments.append(f"#a{index} = :a{index}")
    assignments.append("#version = :next")
    if expected is None:
        condition = "attribute_not_exists(#version)"
    else:
        condition = "#version = :expected"
        values[":expected"] = codec.encode(expected)
    return {
        "UpdateExpression": "SET " + ", ".join(assignments),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def read(
    client: DynamoDBClient, table: str, key: Mapping[str, Any], backoff: retry.Backoff
) -> Item | None:
    """Strongly consistent read, retried on throttling and timeouts (reads are idempotent)."""
    response = retry.call(
        lambda: client.get_item(TableName=table, Key=codec.encode_item(key), ConsistentRead=True),
        backoff=backoff,
        idempotent=True,
        pattern=PATTERN,
    )
    return codec.decode_item(response.get("Item"))


def update_if_version(
    client: DynamoDBClient,
    *,
    table: str,
    key: Mapping[str, Any],
    expected: int,
    changes: Mapping[str, Any],
    version_attr: str = "version",
    backoff: retry.Backoff,
) -> Item:
    """One guarded write with a version the *caller* supplies (HTTP ``If-Match``); no read, no retry
    of conflicts. Raises :class:`VersionMismatch` with the current item (None if absent)."""
    parts = _update_parts(changes, version_attr, expected)
    try:
        response = retry.call(
            lambda: client.update_item(
                TableName=table,
                Key=codec.encode_item(key),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **parts,
            ),
            backoff=backoff,
            idempotent=False,
            pattern=PATTERN,
        )
    except ClientError as exc:
        if retry.condition_failed(exc):
            metrics.count("VersionMismatch", pattern=PATTERN)
            raise VersionMismatch(codec.old_item(exc)) from exc
        raise
    return codec.new_item(response)


def update_versioned(
    client: DynamoDBClient,
    *,
    table: str,
    key: Mapping[str, Any],
    decide: Decide,
    backoff: retry.Backoff,
    conflicts: retry.Backoff,
    version_attr: str = "version",
    also: Also | None = None,
    token: str | None = None,
) -> Written:
    """Read, decide, write with a version check; retry lost races from the ALL_OLD image.

    ``backoff`` governs throttling retries of each call; ``conflicts`` governs how many lost races
    are retried and how long to wait between them. Raises whatever ``decide`` raises,
    :class:`VersionConflict` when ``conflicts`` is spent (attempts or time budget), and
    :class:`turnstile.retry.OutcomeUnknown` when a plain write timed out (see ``retry``).
    """
    started = conflicts.clock()
    item = read(client, table, key, backoff)
    attempt = 0
    while True:
        attempt += 1
        changes = decide(item)
        expected = None if item is None else int(item[version_attr])
        parts = _update_parts(changes, version_attr, expected)
        try:
            if also is None:
                request = {
                    "TableName": table,
                    "Key": codec.encode_item(key),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    **parts,
                }
                retry.call(
                    lambda request=request: client.update_item(**request),  # type: ignore[misc]
                    backoff=backoff,
                    idempotent=False,
                    pattern=PATTERN,
                )
            else:
                guarded = {
                    "Update": {
                        "TableName": table,
                        "Key": codec.encode_item(key),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        **parts,
                    }
                }
                transact.transact_write(
                    client,
                    [guarded, *also(item, changes)],
                    backoff=backoff,
                    token=token,
                    pattern=PATTERN,
                )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            item = codec.old_item(exc)
        except transact.Cancelled as exc:
            if not exc.failed_at(0):
                raise
            item = exc.reasons[0].item
            token = None  # a different transaction now: a reused token would be refused
        else:
            metrics.count("VersionedWrite", pattern=PATTERN)
            written = {**(item or {}), **key, **changes, version_attr: (expected or 0) + 1}
            return Written(item=written, attempts=attempt)
        metrics.count("VersionConflict", pattern=PATTERN)
        if conflicts.spent(attempt, started):
            metrics.count("ConflictGiveUp", pattern=PATTERN)
            raise VersionConflict(attempt, item)
        conflicts.pause(attempt)
