"""Plain Python values <-> DynamoDB attribute values, for the low-level (thread-safe) client.

boto3's resource layer does this too, but resources are not thread-safe; clients are.
Numbers come back as ``int`` when integral and ``Decimal`` otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

__all__ = ["decode_item", "encode", "encode_item", "old_item", "values"]

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return {_plain(v) for v in value}
    return value


def _wire(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


def encode(value: Any) -> dict[str, Any]:
    """One Python value as a DynamoDB attribute value (floats go through ``Decimal``)."""
    return dict(_serializer.serialize(_wire(value)))


def encode_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: encode(value) for name, value in item.items()}


def decode_item(item: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {name: _plain(_deserializer.deserialize(value)) for name, value in item.items()}


def new_item(response: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Attributes`` of an UpdateItem issued with ``ReturnValues="ALL_NEW"``, decoded.

    DynamoDB always returns them for that call; their absence is a broken contract (a stub or an
    emulator answering wrongly), raised as ``RuntimeError`` rather than returned as ``None``."""
    item = decode_item(response.get("Attributes"))
    if item is None:
        raise RuntimeError("UpdateItem with ReturnValues=ALL_NEW returned no Attributes")
    return item


def values(**named: Any) -> dict[str, Any]:
    """ExpressionAttributeValues from keywords: ``values(q=1)`` -> ``{":q": {"N": "1"}}``."""
    return {f":{name}": encode(value) for name, value in named.items()}


def old_item(exc: BaseException) -> dict[str, Any] | None:
    """The ALL_OLD item a ConditionalCheckFailedException carries, decoded (None if absent);
    ``exc`` may be the ``ClientError`` or the ``errors.AwsRefused`` that wraps it."""
    response = getattr(getattr(exc, "cause", exc), "response", {}) or {}
    return decode_item(response.get("Item"))
