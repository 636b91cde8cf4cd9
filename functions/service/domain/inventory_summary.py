"""Inventory counts kept from the inventory table's stream (seed 002): the consumer's domain.

The layout of ``inventory_summary`` is described in :mod:`service.domain.inventory`; this module
is what the stream consumer (``service.handlers.inventory_summary``) runs on each record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from service import config
from service.domain.inventory import SUMMARY, UNIT, sku_of
from turnstile import claims, codec, retry, transact


@dataclass
class Summaries:
    """The stream consumer's side: per-sku counts from the units' status changes.

    Each MODIFY record of a unit moves one count: ``-1`` for its old status, ``+1`` for its new
    one. A record is applied at most once per unit change, in one transaction::

        Update marker (sku, "unit#...") in inventory_summary:
            SET #seq = :seq
            ConditionExpression: attribute_not_exists(#seq) OR #seq < :seq
        Update summary (sku, "summary"):
            ADD #old :minus_one, #new :one

    A redelivered record (Lambda retries a batch, bisects it, or a crash after the write) finds
    its ``seq`` already recorded and is skipped. Records of one unit arrive in order (one batch
    per shard at a time), so ``seq < :seq`` is exactly "not yet applied".
    """

    client: Any
    table: str
    backoff: retry.Backoff = field(default_factory=config.call_backoff)

    def apply(self, record: Mapping[str, Any]) -> bool:
        """Apply one stream record (Lambda's shape); False when it changes nothing or is a
        duplicate."""
        change = record.get("dynamodb") or {}
        keys = codec.decode_item(change.get("Keys")) or {}
        if not str(keys.get("sk", "")).startswith(UNIT):
            return False  # headers, reservations, TTL removals: not counted
        old = codec.decode_item(change.get("OldImage"))
        new = codec.decode_item(change.get("NewImage"))
        if old is None or new is None:
            return False  # creation is counted by create(); units are never deleted
        before, after = old.get("status"), new.get("status")
        if before == after:
            return False  # a lapsed hold taken over by another reservation: still held
        seq = int(new["seq"])
        sku = sku_of(str(keys["sku"]))  # a unit's partition is its pool, ``<sku>#<k>``
        items = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": codec.encode_item({"sku": sku, "sk": keys["sk"]}),
                    "UpdateExpression": "SET #seq = :seq",
                    "ConditionExpression": "attribute_not_exists(#seq) OR #seq < :seq",
                    "ExpressionAttributeNames": {"#seq": "seq"},
                    "ExpressionAttributeValues": codec.values(seq=seq),
                }
            },
            {
                "Update": {
                    "TableName": self.table,
                    "Key": codec.encode_item({"sku": sku, "sk": SUMMARY}),
                    "UpdateExpression": "ADD #old :minus_one, #new :one",
                    "ExpressionAttributeNames": {
                        "#old": _COUNTER[str(before)],
                        "#new": _COUNTER[str(after)],
                    },
                    "ExpressionAttributeValues": codec.values(minus_one=-1, one=1),
                }
            },
        ]
        try:
            transact.transact_write(self.client, items, backoff=self.backoff)
        except transact.Cancelled as exc:
            if exc.failed_at(0):
                return False  # already applied: a redelivery
            raise
        return True


_COUNTER = {claims.FREE: "available", claims.HELD: "reserved", claims.SOLD: "sold"}
