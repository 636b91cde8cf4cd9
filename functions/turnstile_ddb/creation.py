"""Create an item only if it does not exist yet: the conditional create.

::

    PutItem  Item: <item>
             ConditionExpression: attribute_not_exists(#pk)
             ReturnValuesOnConditionCheckFailure: ALL_OLD

``attribute_not_exists`` on the partition key is true exactly when no item has the put's key (the
condition is evaluated against the one item with that primary key, sort key included), so two
concurrent creates of one key cannot both succeed: the loser gets :class:`AlreadyExists` with the
item that won, read from the failed write itself. :func:`put_new_op` is the same put as a
``TransactWriteItems`` element, for a create that must commit with other writes.

Not retried after a timeout (``idempotent=False``): a resend of a create that was applied would
fail its own condition and look like someone else's item, so it surfaces as
:class:`turnstile_ddb.OutcomeUnknown`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _contract, codec, errors, retry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["AlreadyExists", "create_if_absent", "put_new_op"]

PATTERN = "creation"


class AlreadyExists(errors.Refused):
    """An item with that key exists; ``current`` is it (None if the database did not say)."""

    def __init__(self, current: dict[str, Any] | None) -> None:
        super().__init__("an item with this key already exists")
        self.current = current


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


@_contract.write
def create_if_absent(
    client: DynamoDBClient,
    *,
    table: str,
    item: Mapping[str, Any],
    key_attr: str,
    backoff: retry.Backoff,
    pattern: str = PATTERN,
) -> None:
    """Put ``item`` unless an item with its key exists; else :class:`AlreadyExists`."""
    put = put_new_op(table, item, key_attr)["Put"]
    try:
        retry.call(
            lambda: client.put_item(**put),
            backoff=backoff,
            idempotent=False,
            pattern=pattern,
        )
    except ClientError as exc:
        if retry.condition_failed(exc):
            raise AlreadyExists(codec.old_item(exc)) from exc
        raise
