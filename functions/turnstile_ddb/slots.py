"""Pre-created slot rows, booked by conditional update (the lock materialized in advance).

When every place that can be taken is known beforehand (a room's hourly slots, numbered seats,
delivery windows), create one item per place up front. Taking a place is then a conditional update
of an item that already exists, so there is no phantom row and no write skew to guard against.

Creating the slots (one ``PutItem`` each, safe to repeat)::

    PutItem  ConditionExpression: attribute_not_exists(#pk)

Booking one::

    UpdateItem  SET #holder = :holder, #version = #version + :one
                ConditionExpression: attribute_exists(#pk)
                                     AND (attribute_not_exists(#holder) OR #holder = :holder)
                ReturnValuesOnConditionCheckFailure: ALL_OLD

The ``#holder = :holder`` arm makes a booking idempotent for its holder: a booking whose answer was
lost (timeout) can be resent, and finds the slot already its own instead of "taken". That is what
lets it be retried as an idempotent call; a holder must therefore be unique per booker (a request
id, not a user name shared by two browser tabs that should not both win). Releasing::

    UpdateItem  REMOVE #holder SET #version = #version + :one
                ConditionExpression: #holder = :holder
                ReturnValuesOnConditionCheckFailure: ALL_OLD

:func:`book_any` walks a list of candidate slots and books the first free one, reading the ALL_OLD
image of each refusal instead of reading ahead (which would only be a guess by the time it wrote).
("Claim" is the word of :mod:`turnstile_ddb.claims`, a reservation's hold on a unit; ``claim`` and
``claim_any`` here are deprecated names of ``book`` and ``book_any``.)

The holder and version attributes are ``holder`` and ``version`` unless a call names others
(``holder_attr=``, ``version_attr=``; the same names in every call on one table)::

    slots.book(client, "rooms", {"roomId": "r1", "hour": "09:00"}, "req-7",
                backoff=retry.Backoff(), holder_attr="bookedBy")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _checks, _contract, _core, codec, deprecation, errors, metrics, retry

if TYPE_CHECKING:
    pass

__all__ = [
    "HOLDER",
    "METRICS",
    "VERSION",
    "NoSuchSlot",
    "NotHolder",
    "SlotTaken",
    "book",
    "book_any",
    "create",
    "release",
]

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = ("SlotTaken",)

PATTERN = "slots"  # metrics: SlotTaken, a booking lost to another holder

HOLDER = "holder"  # the default holder attribute
VERSION = "version"  # the default version attribute


class SlotTaken(errors.Refused):
    """Someone else holds the slot; ``slot`` is the slot item as it was."""

    def __init__(self, slot: dict[str, Any], holder_attr: str = HOLDER) -> None:
        super().__init__(f"slot held by {slot.get(holder_attr)!r}")
        self.slot = slot


class NoSuchSlot(errors.NotFound):
    """The slot was never created."""


class NotHolder(errors.Refused):
    """Releasing a slot the caller does not hold; ``slot`` is the item (None if missing)."""

    def __init__(self, slot: dict[str, Any] | None) -> None:
        super().__init__("not the holder of this slot")
        self.slot = slot


def _distinct(key: Mapping[str, Any], holder_attr: str, version_attr: str) -> None:
    """Refuse a holder or version attribute that is a key attribute, or the same as the other."""
    named = [(f"key[{name!r}]", name) for name in key]
    named += [("holder_attr", holder_attr), ("version_attr", version_attr)]
    _checks.distinct_names("slots", named)


def create_protocol(
    table: str,
    slots: Iterable[Mapping[str, Any]],
    *,
    backoff: retry.Backoff,
    version_attr: str = VERSION,
) -> _core.Steps[int]:
    """Create each slot item (key plus any attributes) unless it exists; returns how many were new.

    New slots start at version 1 (``version_attr``) without a holder.
    """
    created = 0
    for slot in slots:
        request = {
            "TableName": table,
            "Item": codec.encode_item({version_attr: 1, **slot}),
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": next(iter(slot))},
        }
        try:
            yield from retry.retrying(
                _core.Call("put_item", request),
                backoff=backoff,
                idempotent=True,  # a resend either creates it or finds it: same end state
                pattern=PATTERN,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
        else:
            created += 1
    return created


create = _contract.write(_core.driven(create_protocol))


def book_protocol(
    table: str,
    key: Mapping[str, Any],
    holder: str,
    *,
    backoff: retry.Backoff,
    holder_attr: str = HOLDER,
    version_attr: str = VERSION,
) -> _core.Steps[dict[str, Any]]:
    """Take the slot at ``key`` for ``holder``; returns the slot item after the booking.
    Raises :class:`SlotTaken` (another holder has it) and :class:`NoSuchSlot`."""
    _distinct(key, holder_attr, version_attr)
    request = {
        "TableName": table,
        "Key": codec.encode_item(key),
        "UpdateExpression": "SET #holder = :holder, #version = #version + :one",
        "ConditionExpression": (
            "attribute_exists(#pk) AND (attribute_not_exists(#holder) OR #holder = :holder)"
        ),
        "ExpressionAttributeNames": {
            "#pk": next(iter(key)),
            "#holder": holder_attr,
            "#version": version_attr,
        },
        "ExpressionAttributeValues": codec.values(holder=holder, one=1),
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    try:
        response = yield from retry.retrying(
            _core.Call("update_item", request),
            backoff=backoff,
            idempotent=True,  # see the docstring: a resend by the same holder finds it its own
            pattern=PATTERN,
        )
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        current = codec.old_item(exc)
        if current is None:
            raise NoSuchSlot() from exc
        metrics.count("SlotTaken", pattern=PATTERN)
        raise SlotTaken(current, holder_attr) from exc
    return codec.new_item(response)


book = _contract.write(_core.driven(book_protocol))


def book_any_protocol(
    table: str,
    keys: Iterable[Mapping[str, Any]],
    holder: str,
    *,
    backoff: retry.Backoff,
    holder_attr: str = HOLDER,
    version_attr: str = VERSION,
) -> _core.Steps[dict[str, Any] | None]:
    """Book the first free slot among ``keys`` (in order); None when every one is taken."""
    for key in keys:
        try:
            return (
                yield from book_protocol(
                    table,
                    key,
                    holder,
                    backoff=backoff,
                    holder_attr=holder_attr,
                    version_attr=version_attr,
                )
            )
        except SlotTaken:
            continue
    return None


book_any = _contract.write(_core.driven(book_any_protocol))


def release_protocol(
    table: str,
    key: Mapping[str, Any],
    holder: str,
    *,
    backoff: retry.Backoff,
    holder_attr: str = HOLDER,
    version_attr: str = VERSION,
) -> _core.Steps[None]:
    """Give the slot back; only its holder can. Raises :class:`NotHolder` otherwise."""
    _distinct(key, holder_attr, version_attr)
    request = {
        "TableName": table,
        "Key": codec.encode_item(key),
        "UpdateExpression": "REMOVE #holder SET #version = #version + :one",
        "ConditionExpression": "#holder = :holder",
        "ExpressionAttributeNames": {"#holder": holder_attr, "#version": version_attr},
        "ExpressionAttributeValues": codec.values(holder=holder, one=1),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    try:
        yield from retry.retrying(
            _core.Call("update_item", request),
            backoff=backoff,
            # Not idempotent: a resend after a lost answer finds no holder and would say
            # NotHolder although the release happened. Surface OutcomeUnknown instead.
            idempotent=False,
            pattern=PATTERN,
        )
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        raise NotHolder(codec.old_item(exc)) from exc


release = _contract.write(_core.driven(release_protocol))


__getattr__ = deprecation.renamed(
    __name__,
    {
        "claim": ("1.0.0", "2.0.0", "turnstile_ddb.slots.book", lambda: book),
        "claim_any": ("1.0.0", "2.0.0", "turnstile_ddb.slots.book_any", lambda: book_any),
    },
)
