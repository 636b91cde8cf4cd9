"""Create an item only if it does not exist yet: the conditional create, and its resend.

::

    PutItem  Item: <item> (+ #token: <token>, when the create carries one)
             ConditionExpression: attribute_not_exists(#pk)
             ReturnValuesOnConditionCheckFailure: ALL_OLD

``attribute_not_exists`` on the partition key is true exactly when no item has the put's key (the
condition is evaluated against the one item with that primary key, sort key included), so two
concurrent creates of one key cannot both succeed: the loser gets :class:`AlreadyExists` with the
item that won, read from the failed write itself. :func:`put_new_op` is the same put as a
``TransactWriteItems`` element, for a create that must commit with other writes.

**A resend recognised.** Without a ``token``, a create is not retried after a timeout
(``idempotent=False``): a resend of a create that was applied would fail its own condition and look
like someone else's item, so it surfaces as :class:`turnstile_ddb.OutcomeUnknown`. With a
``token`` (a value only this request writes, e.g. a request id), the item carries it in
``token_attr``; a failed condition then reads the ALL_OLD item and, when it holds the same token,
answers :class:`Created` with ``resent=True`` (this request's own earlier write, whose reply was
lost) rather than :class:`AlreadyExists`. That makes the create safe to resend, so it is retried
after a timeout like any idempotent call. Which requests count as "the same" is the token's
business: a request id recognises only this request's resends; a value derived from what is
created (a fingerprint, or an attribute the item has anyway, as ``token_attr``) lets any request
creating the same thing find it created::

    created = creation.create_if_absent(
        client, table="orders", item={"orderId": "o1", ...}, key_attr="orderId",
        backoff=retry.Backoff(), token=request_id,
    )
    if created.resent: ...     # the item is ours, from an earlier attempt of this request
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _contract, _core, codec, errors, retry

if TYPE_CHECKING:
    pass

__all__ = ["TOKEN", "AlreadyExists", "Created", "create_if_absent", "put_new_op"]

PATTERN = "creation"
TOKEN = "createdBy"  # the default attribute a create's token is stored in


class AlreadyExists(errors.Refused):
    """An item with that key exists; ``current`` is it (None if the database did not say)."""

    def __init__(self, current: dict[str, Any] | None) -> None:
        super().__init__("an item with this key already exists")
        self.current = current


@dataclass(frozen=True)
class Created:
    """The item is there because of this request: ``item`` is what is stored. ``resent`` is True
    when an earlier attempt of the same request (same token) had created it and this attempt
    found it (the first reply was lost); ``item`` is then the stored item as it is now."""

    item: dict[str, Any]
    resent: bool = False


def put_new_op(table: str, item: Mapping[str, Any], key_attr: str) -> dict[str, Any]:
    """The conditional create as a ``TransactWriteItems`` element (``key_attr``: partition key)."""
    return {
        "Put": {
            "TableName": table,
            "Item": codec.encode_item(item),
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": key_attr},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _with_token(item: Mapping[str, Any], token: str | int, token_attr: str) -> dict[str, Any]:
    if token_attr in item and item[token_attr] != token:
        raise ValueError(f"the item's {token_attr!r} is not the create's token")
    return {**item, token_attr: token}


def create_if_absent_protocol(
    *,
    table: str,
    item: Mapping[str, Any],
    key_attr: str,
    backoff: retry.Backoff,
    pattern: str = PATTERN,
    token: str | int | None = None,
    token_attr: str = TOKEN,
) -> _core.Steps[Created]:
    """Put ``item`` unless an item with its key exists; else :class:`AlreadyExists`.

    With a ``token`` (stored in ``token_attr``), an existing item that carries the same token is
    this request's own: the answer is ``Created(item, resent=True)`` (module docstring)."""
    stored = dict(item) if token is None else _with_token(item, token, token_attr)
    put = put_new_op(table, stored, key_attr)["Put"]
    try:
        yield from retry.retrying(
            _core.Call("put_item", put),
            backoff=backoff,
            idempotent=token is not None,  # a resend is recognised by its token
            pattern=pattern,
        )
    except ClientError as exc:
        if not retry.condition_failed(exc):
            raise
        current = codec.old_item(exc)
        if token is not None and current is not None and current.get(token_attr) == token:
            return Created(item=current, resent=True)
        raise AlreadyExists(current) from exc
    return Created(item=stored)


create_if_absent = _contract.write(_core.driven(create_if_absent_protocol))
