"""A bounded membership: a counter item that materializes the lock, plus one item per member.

Write skew on capacity-limited signup: "count the members, and add one if there is room" reads a
set and writes a new row the read could not see, so two writers that both counted N-1 both add
themselves. A condition cannot guard a row that does not exist yet. The fix is to make the thing
both writers contend on a real item: a counter holding ``limit``, ``count`` and ``version``. Every
join and every leave changes that item in the same transaction as the member item, so two joins
always touch one common item and DynamoDB serializes them.

Joining is one ``TransactWriteItems`` of two (or more) elements::

    Update counter   SET #count = #count + :one, #version = #version + :one
                     ConditionExpression: #count < #limit
                     ReturnValuesOnConditionCheckFailure: ALL_OLD
    Put member       ConditionExpression: attribute_not_exists(#pk)
                     ReturnValuesOnConditionCheckFailure: ALL_OLD
    ...also          (the caller's own elements, for example "this request is still PENDING")

``#count < #limit`` is false when the counter item is missing (a comparison with a missing
attribute is false), so a join never creates a counter. Leaving is the reverse::

    Update counter   SET #count = #count - :one, #version = #version + :one
                     ConditionExpression: #count > :zero
                     ReturnValuesOnConditionCheckFailure: ALL_OLD
    Delete member    ConditionExpression: attribute_exists(#pk)
                     ReturnValuesOnConditionCheckFailure: ALL_OLD

The cancellation reasons say exactly why a join or leave was refused, checked in this order:
one of the caller's ``also`` elements failed (the original :class:`transact.Cancelled` is raised
for the caller to read), the member already exists (:class:`AlreadyMember`), the counter is
missing (:class:`NoCounter`), the counter is at its limit (:class:`Full`). "Already a member" comes
before "full" because a member retrying against a full counter already holds a place.

The counter and the members may live in the same table (one item collection) or in different
tables (a separate lock table, for when the member table's layout cannot change): every element
names its own table. Retries of throttling and ``TransactionConflict`` resend the same
``ClientRequestToken`` (see :mod:`turnstile_ddb.transact`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from turnstile_ddb import _checks, _contract, _core, codec, errors, retry, transact

if TYPE_CHECKING:
    pass

__all__ = [
    "ALSO_OFFSET",
    "AlreadyMember",
    "CapacityRow",
    "Full",
    "Member",
    "NoCounter",
    "NotMember",
    "join",
    "join_ops",
    "leave",
    "leave_ops",
]

PATTERN = "capacity"  # metrics: transaction conflicts and throttles of joins and leaves

# Where the caller's ``also`` elements start in a join transaction (after counter and member).
ALSO_OFFSET = 2


class Full(errors.Refused):
    """The counter is at its limit; ``counter`` is the counter item as it was."""

    def __init__(self, counter: dict[str, Any]) -> None:
        super().__init__("no room left")
        self.counter = counter


class AlreadyMember(errors.Refused):
    """The member item exists already; ``member`` is that item."""

    def __init__(self, member: dict[str, Any] | None) -> None:
        super().__init__("already a member")
        self.member = member


class NoCounter(errors.NotFound):
    """There is no counter item (nothing to join or leave)."""


class NotMember(errors.NotFound):
    """Leaving: there is no such member item."""


@dataclass(frozen=True)
class CapacityRow:
    """The counter item: ``key`` in ``table``, with count, limit and version attributes."""

    table: str
    key: Mapping[str, Any]
    count_attr: str = "count"
    limit_attr: str = "limit"
    version_attr: str = "version"

    def __post_init__(self) -> None:
        keys = [(f"key[{name!r}]", name) for name in self.key]
        _checks.distinct_names("CapacityRow", [*keys, *_checks.attr_fields(self)])


@dataclass(frozen=True)
class Member:
    """One member item in ``table``; ``key`` is its primary key (partition key first), ``item``
    the attributes a join writes besides the key."""

    table: str
    key: Mapping[str, Any]
    item: Mapping[str, Any] | None = None


def join_ops(counter: CapacityRow, member: Member) -> list[dict[str, Any]]:
    """The two transaction elements of a join (see the module docstring)."""
    if member.item is None:
        raise ValueError("a join writes the member item: Member.item is required")
    partition = next(iter(member.key))
    return [
        {
            "Update": {
                "TableName": counter.table,
                "Key": codec.encode_item(counter.key),
                "UpdateExpression": "SET #count = #count + :one, #version = #version + :one",
                "ConditionExpression": "#count < #limit",
                "ExpressionAttributeNames": {
                    "#count": counter.count_attr,
                    "#limit": counter.limit_attr,
                    "#version": counter.version_attr,
                },
                "ExpressionAttributeValues": codec.values(one=1),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        {
            "Put": {
                "TableName": member.table,
                "Item": codec.encode_item({**member.item, **member.key}),
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": partition},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
    ]


def leave_ops(counter: CapacityRow, member: Member) -> list[dict[str, Any]]:
    """The two transaction elements of a leave (see the module docstring)."""
    partition = next(iter(member.key))
    return [
        {
            "Update": {
                "TableName": counter.table,
                "Key": codec.encode_item(counter.key),
                "UpdateExpression": "SET #count = #count - :one, #version = #version + :one",
                "ConditionExpression": "#count > :zero",
                "ExpressionAttributeNames": {
                    "#count": counter.count_attr,
                    "#version": counter.version_attr,
                },
                "ExpressionAttributeValues": codec.values(one=1, zero=0),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        {
            "Delete": {
                "TableName": member.table,
                "Key": codec.encode_item(member.key),
                "ConditionExpression": "attribute_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": partition},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
    ]


def join_protocol(
    counter: CapacityRow,
    member: Member,
    *,
    backoff: retry.Backoff,
    also: Sequence[dict[str, Any]] = (),
    token: str | None = None,
) -> _core.Steps[None]:
    """Add ``member`` and count it, atomically, or raise why not (see the module docstring)."""
    items = [*join_ops(counter, member), *also]
    try:
        yield from transact.transact_write_protocol(
            items, backoff=backoff, token=token, pattern=PATTERN
        )
    except transact.Cancelled as exc:
        if any(exc.failed_at(ALSO_OFFSET + index) for index in range(len(also))):
            raise
        if exc.failed_at(1):
            raise AlreadyMember(exc.reasons[1].item) from exc
        if exc.failed_at(0):
            current = exc.reasons[0].item
            if current is None:
                raise NoCounter() from exc
            raise Full(current) from exc
        raise


join = _contract.write(_core.driven(join_protocol))


def leave_protocol(
    counter: CapacityRow,
    member: Member,
    *,
    backoff: retry.Backoff,
    token: str | None = None,
) -> _core.Steps[None]:
    """Remove ``member`` and uncount it, atomically. Raises :class:`NotMember` or
    :class:`NoCounter`; a counter at zero with a member present is a broken invariant and
    surfaces as :class:`transact.Cancelled`."""
    items = leave_ops(counter, member)
    try:
        yield from transact.transact_write_protocol(
            items, backoff=backoff, token=token, pattern=PATTERN
        )
    except transact.Cancelled as exc:
        if exc.failed_at(1):
            raise NotMember() from exc
        if exc.failed_at(0) and exc.reasons[0].item is None:
            raise NoCounter() from exc
        raise


leave = _contract.write(_core.driven(leave_protocol))
