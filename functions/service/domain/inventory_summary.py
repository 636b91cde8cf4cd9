"""Inventory counts kept from the inventory table's stream: the consumer's domain.

The layout of ``inventory_summary`` is described in :mod:`service.domain.inventory`; this module
is what the stream consumer (``service.handlers.inventory_summary``) runs on each record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from service import config
from service.domain.inventory import SUMMARY, UNIT, sku_of
from turnstile_ddb import claims, codec, errors, retry, transact


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
        change = _change_of(record)
        if change is None:
            return False
        items = [
            _marker(self.table, change.sku, change.sk, first=change.seq, last=change.seq),
            _counts(self.table, change.sku, {change.before: -1, change.after: 1}),
        ]
        try:
            transact.transact_write(self.client, items, backoff=self.backoff)
        except transact.Cancelled as exc:
            if exc.failed_at(0):
                return False  # already applied: a redelivery
            raise
        return True

    def apply_together(self, records: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
        """Apply a batch's records in as few transactions as fit (up to 100 items each), first to
        last; the records done, by sequence number (True: applied, False: changes nothing).

        Why: one transaction per record is a 2-item transaction for every unit that changes,
        and every one of them adds to the sku's one summary item (a hot key at 1,000 write units
        a second on AWS, halved by the transaction). Together, a transaction holds one marker
        per unit and one net ``ADD`` per sku. A unit changed twice in the batch gets one marker,
        conditioned on its first change's ``seq`` and set to its last.

        Stops at the first transaction that does not go through (a marker that is not behind:
        part of the batch was applied before, by a bisected or redelivered batch; or any
        error): the records from there on are left to :meth:`apply`, one by one, which skips
        what is already applied. A transaction that went through applied all its records at
        once, so nothing is counted twice either way."""
        done: dict[str, bool] = {}
        chunk: list[tuple[str, _Change | None]] = []

        def flush() -> bool:
            if not chunk:
                return True
            changes = [c for _, c in chunk if c is not None]
            units: dict[tuple[str, str], tuple[int, int]] = {}
            deltas: dict[str, dict[str, int]] = {}
            for c in changes:
                first, _ = units.get((c.sku, c.sk), (c.seq, c.seq))
                units[(c.sku, c.sk)] = (first, c.seq)
                delta = deltas.setdefault(c.sku, {})
                delta[c.before] = delta.get(c.before, 0) - 1
                delta[c.after] = delta.get(c.after, 0) + 1
            items = [
                _marker(self.table, sku, sk, first=first, last=last)
                for (sku, sk), (first, last) in units.items()
            ]
            items += [
                _counts(self.table, sku, delta)
                for sku, delta in deltas.items()
                if any(delta.values())
            ]
            if items:
                try:
                    transact.transact_write(self.client, items, backoff=self.backoff)
                except (
                    transact.Cancelled,
                    errors.Retryable,
                    errors.OutcomeUnknown,
                    errors.Refused,
                ):
                    return False  # the rest goes one by one (see above)
            done.update((sequence, change is not None) for sequence, change in chunk)
            chunk.clear()
            return True

        units_in_chunk: set[tuple[str, str]] = set()
        skus_in_chunk: set[str] = set()
        for record in records:
            sequence = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
            change = _change_of(record)
            if change is not None:
                unit = (change.sku, change.sk)
                new_items = (unit not in units_in_chunk) + (change.sku not in skus_in_chunk)
                if len(units_in_chunk) + len(skus_in_chunk) + new_items > _MAX_ITEMS:
                    if not flush():
                        return done
                    units_in_chunk.clear()
                    skus_in_chunk.clear()
                units_in_chunk.add(unit)
                skus_in_chunk.add(change.sku)
            chunk.append((sequence, change))
        flush()
        return done


_MAX_ITEMS = 100  # items in one TransactWriteItems


@dataclass(frozen=True)
class _Change:
    """A unit's status change, as one stream record shows it."""

    sku: str
    sk: str
    seq: int
    before: str
    after: str


def _change_of(record: Mapping[str, Any]) -> _Change | None:
    """The status change a record shows, or None when it counts nothing: headers, reservations,
    TTL removals, creations (counted by ``create()``; units are never deleted) and a lapsed
    hold taken over by another reservation (still held)."""
    change = record.get("dynamodb") or {}
    keys = codec.decode_item(change.get("Keys")) or {}
    if not str(keys.get("sk", "")).startswith(UNIT):
        return None
    old = codec.decode_item(change.get("OldImage"))
    new = codec.decode_item(change.get("NewImage"))
    if old is None or new is None:
        return None
    before, after = old.get("status"), new.get("status")
    if before == after:
        return None
    sku = sku_of(str(keys["sku"]))  # a unit's partition is its pool, ``<sku>#<k>``
    return _Change(sku, str(keys["sk"]), int(new["seq"]), str(before), str(after))


def _marker(table: str, sku: str, sk: str, *, first: int, last: int) -> dict[str, Any]:
    """Record that the unit's changes up to ``seq`` ``last`` are applied, if the ones from
    ``first`` on are not yet."""
    return {
        "Update": {
            "TableName": table,
            "Key": codec.encode_item({"sku": sku, "sk": sk}),
            "UpdateExpression": "SET #seq = :seq",
            "ConditionExpression": "attribute_not_exists(#seq) OR #seq < :first",
            "ExpressionAttributeNames": {"#seq": "seq"},
            "ExpressionAttributeValues": codec.values(seq=last, first=first),
        }
    }


def _counts(table: str, sku: str, delta: Mapping[str, int]) -> dict[str, Any]:
    """Move the sku's counts by ``delta`` (unit status -> net change, none of them zero)."""
    moved = [(_COUNTER[status], n) for status, n in delta.items() if n]
    return {
        "Update": {
            "TableName": table,
            "Key": codec.encode_item({"sku": sku, "sk": SUMMARY}),
            "UpdateExpression": "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(moved))),
            "ExpressionAttributeNames": {f"#c{i}": name for i, (name, _) in enumerate(moved)},
            "ExpressionAttributeValues": codec.values(
                **{f"c{i}": n for i, (_, n) in enumerate(moved)}
            ),
        }
    }


_COUNTER = {claims.FREE: "available", claims.HELD: "reserved", claims.SOLD: "sold"}
