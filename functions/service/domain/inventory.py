"""Inventory (seed 002): one item per unit, claimed SKIP LOCKED style, with holds that expire.

Table ``inventory`` (partition key ``sku``, sort key ``sk``), streamed with old and new images:

* ``sk = "sku"``: the header, written once: ``units`` (how many), ``pools`` (index partitions).
* ``sk = "unit#000042"``: a unit: ``status`` free | held | sold, ``holder`` (a reservation id),
  ``holdUntil`` (epoch ms), ``claimableAt`` and ``pool`` (the sparse ``claimable`` index, see
  :mod:`turnstile.claims`), ``seq`` (+1 per change).
* ``sk = "res#<id>"``: a reservation: its ``units``, ``holdUntil``, ``status`` held | confirmed.
  Units are the truth; this record only remembers which units a reservation id took.
  ``expiresAt`` (TTL) removes unconfirmed records long after their hold; it decides nothing.

Table ``inventory_summary`` (same keys), written by the stream consumer
(:class:`service.domain.inventory_summary.Summaries`):
``sk = "summary"`` holds ``available`` / ``reserved`` / ``sold`` per sku; ``sk = "unit#..."``
holds the last ``seq`` applied for that unit. A separate table, so the consumer's own writes do not
come back to it through the stream it reads.

A unit is free when created; a reservation claims units (held, until ``holdUntil``); confirm sells
them, but only while the hold is valid and still this reservation's; DELETE frees them. A lapsed
hold is claimable by anyone, so units of abandoned reservations come back without a sweeper.

Seq 0 is a unit's creation: creation writes the summary's starting counts itself (one write
instead of one per unit through the stream), and the consumer skips seq-0 records.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from service import config
from service.domain.errors import (
    AlreadyConfirmed,
    AlreadyExists,
    Expired,
    NotFound,
    OutOfStock,
)
from turnstile import claims, codec, retry, versioned

HEADER = "sku"
SUMMARY = "summary"
UNIT = "unit#"
RESERVATION = "res#"
UNIT_DIGITS = 6

HELD = "held"
CONFIRMED = "confirmed"


def unit_sk(number: int) -> str:
    return f"{UNIT}{number:0{UNIT_DIGITS}d}"


def unit_id(sk: str) -> str:
    return sk.removeprefix(UNIT)


def pool_names(sku: str, pools: int) -> list[str]:
    return [f"{sku}#{index}" for index in range(pools)]


def pools_for(units: int) -> int:
    return max(1, math.ceil(units / config.INVENTORY_POOL_UNITS))


@dataclass
class Inventory:
    client: Any
    table: str
    summary_table: str
    backoff: retry.Backoff = field(default_factory=config.call_backoff)
    clock: Callable[[], float] = time.time
    rand: Callable[[], float] = random.random
    writers: int = 16  # parallel BatchWriteItem calls when creating units
    _headers: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def units(self) -> claims.UnitTable:
        return claims.UnitTable(
            table=self.table, index=config.INVENTORY_CLAIMABLE_INDEX, key_attrs=("sku", "sk")
        )

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- creating ------------------------------------------------------------------------------

    def create(self, sku: str, units: int) -> dict[str, Any]:
        """The header (only once per sku), the summary's starting counts, then the units."""
        pools = pools_for(units)
        header = {"sku": sku, "sk": HEADER, "units": units, "pools": pools}
        try:
            retry.call(
                lambda: self.client.put_item(
                    TableName=self.table,
                    Item=codec.encode_item(header),
                    ConditionExpression="attribute_not_exists(sk)",
                ),
                backoff=self.backoff,
                idempotent=False,
            )
        except ClientError as exc:
            if retry.condition_failed(exc):
                raise AlreadyExists(f"sku {sku!r} already exists") from exc
            raise
        summary = {"sku": sku, "sk": SUMMARY, "available": units, "reserved": 0, "sold": 0}
        retry.call(
            lambda: self.client.put_item(
                TableName=self.summary_table, Item=codec.encode_item(summary)
            ),
            backoff=self.backoff,
            idempotent=True,
        )
        names = pool_names(sku, pools)
        items = [
            claims.free_unit(
                self.units,
                {"sku": sku, "sk": unit_sk(n)},
                names[n % pools],
                claims.new_ticket(self.rand),
            )
            for n in range(units)
        ]
        batches = [items[i : i + 25] for i in range(0, len(items), 25)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.writers, len(batches)))) as pool:
            list(pool.map(self._write_batch, batches))
        return {"sku": sku, "units": units}

    def _write_batch(self, items: list[dict[str, Any]]) -> None:
        """BatchWriteItem, resending only what DynamoDB left unprocessed. Not resent after a
        timeout: a unit claimed meanwhile would be overwritten as free."""
        pending = [{"PutRequest": {"Item": codec.encode_item(item)}} for item in items]
        attempt = 0
        while pending:
            attempt += 1
            response = retry.call(
                lambda pending=pending: self.client.batch_write_item(  # type: ignore[misc]
                    RequestItems={self.table: pending}
                ),
                backoff=self.backoff,
                idempotent=False,
            )
            pending = (response.get("UnprocessedItems") or {}).get(self.table, [])
            if pending:
                if attempt >= self.backoff.attempts:
                    raise retry.RetriesExhausted(attempt, RuntimeError("unprocessed items"))
                self.backoff.pause(attempt)

    # -- reading -------------------------------------------------------------------------------

    def header(self, sku: str) -> dict[str, Any]:
        """The sku's header; it never changes once written, so it is cached per process."""
        cached = self._headers.get(sku)
        if cached is not None:
            return cached
        item = versioned.read(self.client, self.table, {"sku": sku, "sk": HEADER}, self.backoff)
        if item is None:
            raise NotFound(f"no sku {sku!r}")
        with self._lock:
            self._headers[sku] = item
        return item

    def summary(self, sku: str) -> dict[str, Any]:
        """Counts kept by the stream consumer: eventually consistent, no scan, one read."""
        header = self.header(sku)
        response = retry.call(
            lambda: self.client.get_item(
                TableName=self.summary_table,
                Key=codec.encode_item({"sku": sku, "sk": SUMMARY}),
            ),
            backoff=self.backoff,
            idempotent=True,
        )
        counts = codec.decode_item(response.get("Item")) or {}
        return {
            "sku": sku,
            "units": header["units"],
            "available": int(counts.get("available", 0)),
            "reserved": int(counts.get("reserved", 0)),
            "sold": int(counts.get("sold", 0)),
            "consistency": "eventual",
        }

    def exact(self, sku: str) -> dict[str, Any]:
        """Counts from the units themselves: a strongly consistent Query of the sku's partition
        (never a scan), costing about one read unit per 25 units. A lapsed hold counts as
        available, as it is claimable."""
        header = self.header(sku)
        now_ms = self._now_ms()
        counts = {"available": 0, "reserved": 0, "sold": 0}
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "sku = :sku AND begins_with(sk, :unit)",
                "ProjectionExpression": "#status, holdUntil",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": codec.values(sku=sku, unit=UNIT),
                "ConsistentRead": True,
            }
            if start:
                request["ExclusiveStartKey"] = start
            response = retry.call(
                lambda request=request: self.client.query(**request),  # type: ignore[misc]
                backoff=self.backoff,
                idempotent=True,
            )
            for raw in response.get("Items", []):
                unit = codec.decode_item(raw) or {}
                if unit["status"] == claims.SOLD:
                    counts["sold"] += 1
                elif unit["status"] == claims.HELD and unit["holdUntil"] > now_ms:
                    counts["reserved"] += 1
                else:
                    counts["available"] += 1
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        return {"sku": sku, "units": header["units"], **counts, "consistency": "strong"}

    # -- reserving -----------------------------------------------------------------------------

    def reserve(
        self, sku: str, quantity: int, hold_seconds: float = config.INVENTORY_HOLD_SECONDS
    ) -> dict[str, Any]:
        header = self.header(sku)
        reservation_id = uuid.uuid4().hex
        now_ms = self._now_ms()
        until_ms = now_ms + max(1, int(hold_seconds * 1000))
        try:
            taken = claims.reserve(
                self.client,
                self.units,
                pools=pool_names(sku, int(header["pools"])),
                quantity=quantity,
                holder=reservation_id,
                now_ms=now_ms,
                until_ms=until_ms,
                backoff=self.backoff,
                rand=self.rand,
            )
        except claims.NotEnough as exc:
            raise OutOfStock(
                f"fewer than {quantity} units of {sku!r} are available", requested=quantity
            ) from exc
        unit_ids = [unit_id(key["sk"]) for key in taken.keys]
        record = {
            "sku": sku,
            "sk": RESERVATION + reservation_id,
            "reservationId": reservation_id,
            "units": unit_ids,
            "status": HELD,
            "holdUntil": until_ms,
            config.TTL_ATTRIBUTE: until_ms // 1000 + config.INVENTORY_KEEP_RECORD_SECONDS,
        }
        try:
            retry.call(
                lambda: self.client.put_item(TableName=self.table, Item=codec.encode_item(record)),
                backoff=self.backoff,
                idempotent=True,  # a fresh id: writing it twice is writing it once
            )
        except Exception:
            # Without its record nobody could confirm or cancel this reservation: give the units
            # back now rather than at the hold's expiry.
            claims.give_back(
                self.client, self.units, taken.keys, holder=reservation_id, backoff=self.backoff
            )
            raise
        return {
            "reservationId": reservation_id,
            "sku": sku,
            "units": unit_ids,
            "expiresAt": until_ms,
        }

    def _record(self, sku: str, reservation_id: str) -> dict[str, Any]:
        key = {"sku": sku, "sk": RESERVATION + reservation_id}
        record = versioned.read(self.client, self.table, key, self.backoff)
        if record is None:
            raise NotFound(f"no reservation {reservation_id!r} for sku {sku!r}")
        return record

    def _unit_keys(self, sku: str, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [{"sku": sku, "sk": UNIT + unit} for unit in record["units"]]

    def confirm(self, sku: str, reservation_id: str) -> dict[str, Any]:
        """Sell the reservation's units, all of them or none, while the hold is valid and ours.

        Repeating a confirm that succeeded answers the same (the units are already ours, sold).
        """
        record = self._record(sku, reservation_id)
        answer = {
            "reservationId": reservation_id,
            "sku": sku,
            "units": record["units"],
            "status": CONFIRMED,
        }
        if record["status"] == CONFIRMED:
            return answer
        try:
            claims.sell(
                self.client,
                self.units,
                self._unit_keys(sku, record),
                holder=reservation_id,
                now_ms=self._now_ms(),
                backoff=self.backoff,
            )
        except claims.Lost as exc:
            raise Expired(
                f"reservation {reservation_id!r} expired: its hold lapsed or its units were "
                "released or taken by another reservation",
                units=[unit_id(key["sk"]) for key in exc.keys],
            ) from exc
        retry.call(
            lambda: self.client.update_item(
                TableName=self.table,
                Key=codec.encode_item({"sku": sku, "sk": RESERVATION + reservation_id}),
                UpdateExpression="SET #status = :confirmed REMOVE #ttl",
                ExpressionAttributeNames={"#status": "status", "#ttl": config.TTL_ATTRIBUTE},
                ExpressionAttributeValues=codec.values(confirmed=CONFIRMED),
            ),
            backoff=self.backoff,
            idempotent=True,
        )
        return answer

    def release(self, sku: str, reservation_id: str) -> None:
        """Free the units this reservation still holds, then forget the reservation."""
        record = self._record(sku, reservation_id)
        if record["status"] == CONFIRMED:
            raise AlreadyConfirmed(f"reservation {reservation_id!r} is confirmed (sold)")
        kept = claims.give_back(
            self.client,
            self.units,
            self._unit_keys(sku, record),
            holder=reservation_id,
            backoff=self.backoff,
            rand=self.rand,
        )
        if any(
            unit.get("status") == claims.SOLD and unit.get("holder") == reservation_id
            for unit in kept
        ):
            # A confirm won the race: the units are sold, and the record must stay.
            raise AlreadyConfirmed(f"reservation {reservation_id!r} is confirmed (sold)")
        try:
            retry.call(
                lambda: self.client.delete_item(
                    TableName=self.table,
                    Key=codec.encode_item({"sku": sku, "sk": RESERVATION + reservation_id}),
                    ConditionExpression="#status = :held",
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues=codec.values(held=HELD),
                ),
                backoff=self.backoff,
                idempotent=True,
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            # Deleted by a concurrent DELETE meanwhile, which is the same outcome.
