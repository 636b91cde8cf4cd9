"""Optimistic concurrency with a version number (read, version-checked write, retry).

The read, decide, write loop:

1. Read the item with a *strongly consistent* ``GetItem``. (Never take the version from a GSI or an
   eventually consistent read: either may be stale, and a stale version turns every write into a
   conflict or, worse, hides one.)
2. Call ``decide(item)``: business logic that returns the attributes to set, or raises to stop
   (for example "out of stock").
3. Write, guarded by the version that was read::

       UpdateExpression:    SET #c0 = :c0, ..., #version = :next
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

**Writes that need no read.** When the new value follows from the old one by arithmetic, or the
change does not depend on the item at all, one conditional ``UpdateItem`` does it, without a read
and without conflicts to retry. Each of these moves the version too, so a read-decide-write
running at the same time sees the change and decides again:

* :func:`decrement`, e.g. selling stock (never below zero)::

      UpdateExpression:    SET #n = #n - :amount, #version = #version + :one
      ConditionExpression: #n >= :amount

  A comparison with a missing attribute is false, so it never creates an item; refused, it raises
  :class:`Insufficient` (with the item), :class:`NoSuchAttribute` (the item has no ``#n``: a
  misspelt name is not an empty balance) or :class:`NoSuchItem`.

* :func:`increment`, e.g. a restock that must add exactly its units whatever sells meanwhile::

      UpdateExpression:    SET #n = #n + :amount, #version = #version + :one
      ConditionExpression: attribute_exists(#n)

* :func:`bump` (and :func:`bump_op`, the same as a transaction element, optionally at an
  ``expected`` version): set attributes at whatever version the item is at, as long as it exists::

      UpdateExpression:    SET #c0 = :c0, ..., #version = #version + :one
      ConditionExpression: attribute_exists(#version)     (bump_op with expected:
                                                            #version = :expected)

Each takes an optional :class:`Condition` of the caller's own, ANDed to its guard; all of them ask
for ``ReturnValuesOnConditionCheckFailure: ALL_OLD`` and return ``ALL_NEW``::

    item = versioned.decrement(
        client, table="products", key={"productId": "p1"}, attr="stock", amount=2,
        backoff=retry.Backoff(),
    )                                   # item["stock"] is what is left, item["version"] moved
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from turnstile_ddb import _contract, _core, codec, errors, metrics, retry, transact

__all__ = [
    "METRICS",
    "Also",
    "Condition",
    "ConditionFailed",
    "Decide",
    "Insufficient",
    "Item",
    "NoSuchAttribute",
    "NoSuchItem",
    "VersionConflict",
    "VersionMismatch",
    "Written",
    "bump",
    "bump_op",
    "decrement",
    "increment",
    "read",
    "update_if_version",
    "update_versioned",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = (
    "VersionConflict",
    "ConflictGiveUp",
    "VersionedWrite",
    "VersionMismatch",
)

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


class NoSuchItem(errors.NotFound):
    """The item to change does not exist: nothing was written (and nothing created). ``table``
    and ``key`` say which item ("" and None when not given)."""

    def __init__(self, table: str = "", key: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"no item {dict(key or {})!r} in table {table!r}" if table else "")
        self.table = table
        self.key = dict(key) if key is not None else None


class ConditionFailed(errors.Refused):
    """The item exists but the write's condition refused it; ``current`` is the item as it was."""

    def __init__(self, current: Item, message: str = "condition refused the write") -> None:
        super().__init__(message)
        self.current = current


class NoSuchAttribute(ConditionFailed):
    """:func:`decrement` / :func:`increment`: the item exists but has no attribute ``attr`` (a
    misspelt name, or an item of another kind): nothing was written. Not :class:`Insufficient`:
    a missing number is not an empty one."""

    def __init__(self, current: Item, attr: str) -> None:
        super().__init__(current, f"the item has no attribute {attr!r} (nothing was written)")
        self.attr = attr


class Insufficient(ConditionFailed):
    """:func:`decrement`: the attribute holds less than the amount; ``available`` is what it
    holds (a missing attribute is :class:`NoSuchAttribute` instead)."""

    def __init__(self, current: Item, attr: str, amount: int) -> None:
        self.available = int(current.get(attr, 0))
        super().__init__(current, f"{attr} holds {self.available}, {amount} requested")


@dataclass(frozen=True)
class Condition:
    """A condition of the caller's own, ANDed with a primitive's guard, e.g. "only unsharded"::

        Condition("attribute_not_exists(#xshards) OR #xshards = :xone",
                  names={"#xshards": "shards"}, values={":xone": 1})

    Its placeholders start with ``#x`` and ``:x`` (the primitives' own never do); ``values`` are
    plain Python values, encoded by :mod:`turnstile_ddb.codec`."""

    expression: str
    names: Mapping[str, str] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clashing = [n for n in self.names if not n.startswith("#x")]
        clashing += [v for v in self.values if not v.startswith(":x")]
        if clashing:
            raise ValueError(f"Condition placeholders must start with #x / :x: {clashing}")


@dataclass(frozen=True)
class Written:
    """The item after a successful versioned write, and how many write attempts it took."""

    item: Item
    attempts: int


def _assignments(
    changes: Mapping[str, Any], names: dict[str, str], values: dict[str, Any]
) -> list[str]:
    """``#c<i> = :c<i>`` for each change, its placeholders added to ``names`` and ``values``."""
    assignments = []
    for index, (name, value) in enumerate(changes.items()):
        names[f"#c{index}"] = name
        values[f":c{index}"] = codec.encode(value)
        assignments.append(f"#c{index} = :c{index}")
    return assignments


def _update_parts(
    changes: Mapping[str, Any], version_attr: str, expected: int | None
) -> dict[str, Any]:
    names = {"#version": version_attr}
    values: dict[str, Any] = {":next": codec.encode((expected or 0) + 1)}
    assignments = [*_assignments(changes, names, values), "#version = :next"]
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


def read_protocol(
    table: str, key: Mapping[str, Any], backoff: retry.Backoff
) -> _core.Steps[Item | None]:
    """Strongly consistent read, retried on throttling and timeouts (reads are idempotent)."""
    request = {"TableName": table, "Key": codec.encode_item(key), "ConsistentRead": True}
    response = yield from retry.retrying(
        _core.Call("get_item", request), backoff=backoff, idempotent=True, pattern=PATTERN
    )
    return codec.decode_item(response.get("Item"))


read = _contract.read(_core.driven(read_protocol))


def _update(
    table: str,
    key: Mapping[str, Any],
    parts: Mapping[str, Any],
    backoff: retry.Backoff,
    pattern: str,
) -> _core.Steps[Item]:
    """One conditional ``UpdateItem`` (not resent after a timeout: it is not idempotent); the
    item after it, or the ``ClientError`` of a refusal for the caller to read."""
    request = {
        "TableName": table,
        "Key": codec.encode_item(key),
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        **parts,
    }
    response = yield from retry.retrying(
        _core.Call("update_item", request), backoff=backoff, idempotent=False, pattern=pattern
    )
    return codec.new_item(response)


def update_if_version_protocol(
    *,
    table: str,
    key: Mapping[str, Any],
    expected: int,
    changes: Mapping[str, Any],
    version_attr: str = "version",
    backoff: retry.Backoff,
) -> _core.Steps[Item]:
    """One guarded write with a version the *caller* supplies (HTTP ``If-Match``); no read, no retry
    of conflicts. Raises :class:`VersionMismatch` with the current item (None if absent)."""
    parts = _update_parts(changes, version_attr, expected)
    try:
        return (yield from _update(table, key, parts, backoff, PATTERN))
    except ClientError as exc:
        if retry.condition_failed(exc):
            metrics.count("VersionMismatch", pattern=PATTERN)
            raise VersionMismatch(codec.old_item(exc)) from exc
        raise


update_if_version = _contract.write(_core.driven(update_if_version_protocol))


def update_versioned_protocol(
    *,
    table: str,
    key: Mapping[str, Any],
    decide: Decide,
    backoff: retry.Backoff,
    conflicts: retry.Backoff,
    version_attr: str = "version",
    also: Also | None = None,
    token: str | None = None,
) -> _core.Steps[Written]:
    """Read, decide, write with a version check; retry lost races from the ALL_OLD image.

    ``backoff`` governs throttling retries of each call; ``conflicts`` governs how many lost races
    are retried and how long to wait between them. ``also`` gives the items to write in the same
    transaction (``token``: its ClientRequestToken, for the first attempt). Raises whatever
    ``decide`` raises, :class:`VersionConflict` when ``conflicts`` is spent (attempts or time
    budget), and :class:`turnstile_ddb.retry.OutcomeUnknown` when a plain write timed out (see
    ``retry``).
    """
    started = yield _core.Now(conflicts.clock)
    item = yield from read_protocol(table, key, backoff)
    attempt = 0
    while True:
        attempt += 1
        changes = decide(item)
        expected = None if item is None else int(item[version_attr])
        update = _guarded(table, key, _update_parts(changes, version_attr, expected))
        extra = None if also is None else also(item, changes)
        landed, current = yield from _write(update, extra, backoff, token)
        if landed:
            metrics.count("VersionedWrite", pattern=PATTERN)
            written = {**(item or {}), **key, **changes, version_attr: (expected or 0) + 1}
            return Written(item=written, attempts=attempt)
        item = current
        token = None  # a different transaction now: a reused token would be refused
        yield from _lost_race(conflicts, attempt, started, item)


update_versioned = _contract.write(_core.driven(update_versioned_protocol))


def _guarded(table: str, key: Mapping[str, Any], parts: Mapping[str, Any]) -> dict[str, Any]:
    """The version-guarded ``UpdateItem`` request (also the ``Update`` of a transaction)."""
    return {
        "TableName": table,
        "Key": codec.encode_item(key),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        **parts,
    }


def _write(
    update: dict[str, Any],
    extra: Sequence[dict[str, Any]] | None,
    backoff: retry.Backoff,
    token: str | None,
) -> _core.Steps[tuple[bool, Item | None]]:
    """One attempt: the update alone (never resent after a timeout), or with ``extra`` in one
    transaction. ``(True, None)`` when it landed; ``(False, current)`` when the version
    check refused it, ``current`` being the item that beat it (ALL_OLD). Any other failure
    raises."""
    try:
        if extra is None:
            yield from retry.retrying(
                _core.Call("update_item", update),
                backoff=backoff,
                idempotent=False,
                pattern=PATTERN,
            )
        else:
            yield from transact.transact_write_protocol(
                [{"Update": update}, *extra], backoff=backoff, token=token, pattern=PATTERN
            )
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        return False, codec.old_item(exc)
    except transact.Cancelled as exc:
        if not exc.failed_at(0):
            raise
        return False, exc.reasons[0].item
    return True, None


def _lost_race(
    conflicts: retry.Backoff, attempt: int, started: float, current: Item | None
) -> _core.Steps[None]:
    """Count a lost race; give up (:class:`VersionConflict`) when ``conflicts`` is spent, else
    wait before the next attempt."""
    metrics.count("VersionConflict", pattern=PATTERN)
    if (yield from retry.spent(conflicts, attempt, started)):
        metrics.count("ConflictGiveUp", pattern=PATTERN)
        raise VersionConflict(attempt, current)
    yield from retry.pause(conflicts, attempt)


def _and(parts: dict[str, Any], guard: str, condition: Condition | None) -> dict[str, Any]:
    """``parts`` with ``ConditionExpression`` = ``guard`` [AND (``condition``)]."""
    if condition is None:
        parts["ConditionExpression"] = guard
        return parts
    parts["ConditionExpression"] = f"({guard}) AND ({condition.expression})"
    parts["ExpressionAttributeNames"] = {**parts["ExpressionAttributeNames"], **condition.names}
    parts["ExpressionAttributeValues"] = {
        **parts.get("ExpressionAttributeValues", {}),
        **{name: codec.encode(value) for name, value in condition.values.items()},
    }
    return parts


def _adjust(
    table: str,
    key: Mapping[str, Any],
    attr: str,
    delta: int,
    guard: str,
    version_attr: str | None,
    condition: Condition | None,
    backoff: retry.Backoff,
    pattern: str,
) -> _core.Steps[Item]:
    names = {"#n": attr}
    values = {":amount": codec.encode(abs(delta))}
    sets = [f"#n = #n {'+' if delta > 0 else '-'} :amount"]
    if version_attr is not None:
        names["#version"] = version_attr
        values[":one"] = codec.encode(1)
        sets.append("#version = #version + :one")
    parts = _and(
        {
            "UpdateExpression": "SET " + ", ".join(sets),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        },
        guard,
        condition,
    )
    try:
        return (yield from _update(table, key, parts, backoff, pattern))
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        current = codec.old_item(exc)
        if current is None:
            raise NoSuchItem(table, key) from exc
        if attr not in current:
            raise NoSuchAttribute(current, attr) from exc
        if delta < 0 and int(current[attr]) < -delta:
            raise Insufficient(current, attr, -delta) from exc
        raise ConditionFailed(current) from exc


def _positive(amount: int) -> int:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise ValueError(f"amount must be a positive int, not {amount!r}")
    return amount


def decrement_protocol(
    *,
    table: str,
    key: Mapping[str, Any],
    attr: str,
    amount: int,
    backoff: retry.Backoff,
    version_attr: str | None = "version",
    condition: Condition | None = None,
    pattern: str = PATTERN,
) -> _core.Steps[Item]:
    """Take ``amount`` from the number ``attr`` unless that would leave it below zero, and add one
    to ``version_attr`` (None: no version), in one ``UpdateItem`` (module docstring). Returns the
    item after the write.

    Raises :class:`Insufficient` (``available``: what ``attr`` holds), :class:`NoSuchAttribute`
    (the item has no ``attr``), :class:`NoSuchItem`,
    :class:`ConditionFailed` when ``condition`` refused, and
    :class:`turnstile_ddb.OutcomeUnknown` when the write timed out (it is never resent)."""
    delta = -_positive(amount)
    guard = "#n >= :amount"
    return _adjust(table, key, attr, delta, guard, version_attr, condition, backoff, pattern)


decrement = _contract.write(_core.driven(decrement_protocol))


def increment_protocol(
    *,
    table: str,
    key: Mapping[str, Any],
    attr: str,
    amount: int,
    backoff: retry.Backoff,
    version_attr: str | None = "version",
    condition: Condition | None = None,
    pattern: str = PATTERN,
) -> _core.Steps[Item]:
    """Add ``amount`` to the number ``attr`` of an existing item (it is never created) and one to
    ``version_attr`` (None: no version), in one ``UpdateItem``. Returns the item after the write.

    Raises :class:`NoSuchItem`, :class:`NoSuchAttribute` (a :class:`ConditionFailed`: ``attr``
    is missing), :class:`ConditionFailed` (``condition`` refused) and
    :class:`turnstile_ddb.OutcomeUnknown` when the write timed out."""
    delta = _positive(amount)
    guard = "attribute_exists(#n)"
    return _adjust(table, key, attr, delta, guard, version_attr, condition, backoff, pattern)


increment = _contract.write(_core.driven(increment_protocol))


def _bump_parts(
    changes: Mapping[str, Any],
    expected: int | None,
    version_attr: str,
    condition: Condition | None,
) -> dict[str, Any]:
    names = {"#version": version_attr}
    values = {":one": codec.encode(1)}
    sets = [*_assignments(changes, names, values), "#version = #version + :one"]
    if expected is None:
        guard = "attribute_exists(#version)"
    else:
        guard = "#version = :expected"
        values[":expected"] = codec.encode(expected)
    return _and(
        {
            "UpdateExpression": "SET " + ", ".join(sets),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        },
        guard,
        condition,
    )


def bump_op(
    table: str,
    key: Mapping[str, Any],
    changes: Mapping[str, Any],
    *,
    expected: int | None = None,
    version_attr: str = "version",
    condition: Condition | None = None,
) -> dict[str, Any]:
    """As a ``TransactWriteItems`` element: set ``changes`` and add one to the version, at version
    ``expected`` (None: at any version, as long as the item exists). A refusal reads as
    :class:`turnstile_ddb.transact.Cancelled` with this element's ALL_OLD item (None: no item)."""
    return {
        "Update": {
            "TableName": table,
            "Key": codec.encode_item(key),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **_bump_parts(changes, expected, version_attr, condition),
        }
    }


def bump_protocol(
    *,
    table: str,
    key: Mapping[str, Any],
    changes: Mapping[str, Any],
    backoff: retry.Backoff,
    version_attr: str = "version",
    condition: Condition | None = None,
    pattern: str = PATTERN,
) -> _core.Steps[Item]:
    """Set ``changes`` and add one to the version at whatever version the item is at, in one
    ``UpdateItem`` (``If-Match: *``: writes racing with it cannot make it fail). Returns the item
    after the write. Raises :class:`NoSuchItem`, :class:`ConditionFailed` when ``condition``
    refused, and :class:`turnstile_ddb.OutcomeUnknown` when the write timed out."""
    parts = _bump_parts(changes, None, version_attr, condition)
    try:
        return (yield from _update(table, key, parts, backoff, pattern))
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        current = codec.old_item(exc)
        if current is None:
            raise NoSuchItem(table, key) from exc
        raise ConditionFailed(current) from exc


bump = _contract.write(_core.driven(bump_protocol))
