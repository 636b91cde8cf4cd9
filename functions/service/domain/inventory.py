"""Inventory: one item per unit, claimed SKIP LOCKED style, with holds that expire.

Table ``inventory`` (partition key ``sku``, sort key ``sk``), streamed with old and new images:

* ``sku = <sku>, sk = "sku"``: the header: ``units`` (how many), ``pools`` (N), and the
  creation's progress: ``status`` CREATING | READY, ``chunks``, ``chunkUnits``, ``chunksDone``.
* ``sku = <sku>#<k>, sk = "unit#000042"``: a unit, in pool ``k = 42 % N``: ``status`` free | held |
  sold, ``holder`` (a reservation id), ``holdUntil`` (epoch ms), ``claimableAt`` and ``pool``
  (``<sku>#<k>`` again: the sparse ``claimable`` index, see :mod:`turnstile_ddb.claims`), ``seq``
  (+1 per change).

Pools: a sku's units are spread over N pools, each its own partition key in the table AND in the
index, so a popular sku is not capped by one partition (1,000 WCU/s and 3,000 RCU/s each on
AWS): N is named at creation, or :func:`pools_for` (one per 1,000 units, at most 16). A
reservation starts in the better of two random pools, fails over to the others (a throttled pool
comes last), and is refused only once every pool has been read
(:func:`turnstile_ddb.claims.reserve`).
A unit never changes pool: an expired or released unit is claimable again in its own pool.

A reservation has no item of its own: its record is its *lead* unit (the first it took), which
lists all its units (``members``) and who made it (``owner``, the caller's ``sub``), and is written
in the same transaction as the claims. The reservation id is ``<lead unit id>-<hold expiry
ms>-<random>``: where the record is (the unit number gives its pool), and when the hold lapses.
Whether it is EXPIRED or 404 is read from the lead unit, never from the id: a unit remembers the
holder whose lapsed hold a claim replaced (``previousHolder``), so a confirm whose lapsed lead
unit was taken again answers EXPIRED, and an id the server never issued is 404 whatever expiry it
names.

Table ``inventory_summary`` (same keys), written by the stream consumer
(:class:`service.domain.inventory_summary.Summaries`):
``sk = "summary"`` holds ``available`` / ``reserved`` / ``sold`` per sku; ``sk = "unit#..."``
holds the last ``seq`` applied for that unit. A separate table, so the consumer's own writes do not
come back to it through the stream it reads.

The unit attributes' names above are :class:`turnstile_ddb.claims.UnitTable`'s defaults; an
``Inventory`` given a ``unit_table`` of other names reads and writes those everywhere (the
header's own attributes are this module's).

A unit is free when created; a reservation claims units (held, until ``holdUntil``); confirm sells
them, but only while the hold is valid and still this reservation's; DELETE frees them. A lapsed
hold is claimable by anyone, so units of abandoned reservations come back without a sweeper.

Creation is asynchronous above ``INVENTORY_INLINE_UNITS``: POST writes the header (CREATING) and
answers; the creation worker (a filtered stream consumer, ``handlers.inventory_creator``) writes
``INVENTORY_CREATE_CHUNKS`` chunks per step with :meth:`Inventory.advance`, as 100-unit
transactions sent in parallel by ``INVENTORY_CREATE_WRITERS`` threads, paced by the table's
capacity (:func:`table_pace`, or the environment's setting: unpaced on DynamoDB Local), and chains
steps while its invocation has time left (:meth:`Inventory.advance_while`). Units are
reservable as soon as they are recorded (a reservation's header read tells which chunks are; the
summary counts a chunk's units in the transaction that records it, so no count shown is ever
negative). Creation never writes over a unit (``attribute_not_exists``), so a unit rewritten
after a crash is never reset to free.

Seq 0 is a unit's creation: each chunk adds its units to the summary's counts in the transaction
that records the chunk (one write instead of one per unit), and the consumer skips seq-0 records.
"""

from __future__ import annotations

import contextlib
import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from service import config
from service.domain.errors import (
    AlreadyConfirmed,
    AlreadyExists,
    Expired,
    NotFound,
    OutOfStock,
)
from service.lru import LRU
from turnstile_ddb import claims, codec, creation, errors, metrics, retry, transact, versioned

# The metrics this domain counts (pattern ``inventory``); a refusal the library counts (claims'
# ``ConfirmLost``...) is not counted again here.
METRICS: tuple[str, ...] = (
    "CreationReplayed",
    "ChunkAlreadyRecorded",
    "UnitAlreadyCreated",
    "ReserveWhileCreating",  # too few units offered yet: OUT_OF_STOCK with the progress
)

HEADER = config.INVENTORY_HEADER_SK
SUMMARY = "summary"
UNIT = "unit#"
UNIT_DIGITS = 6

CONFIRMED = "confirmed"
CREATING = config.INVENTORY_CREATING
READY = "READY"
# Called with a reservation's recorded owner before it is confirmed or released; raises to refuse
# (the rule itself is ``service.policy.require_owner``).
Authorize = Callable[[str | None], None] | None

# The creation worker's event filter (config: the stack and the local pump read it too).
CREATION_FILTER: dict[str, Any] = config.INVENTORY_CREATION_FILTER


def unit_sk(number: int) -> str:
    return f"{UNIT}{number:0{UNIT_DIGITS}d}"


def unit_id(sk: str) -> str:
    return sk.removeprefix(UNIT)


def reservation_id(lead: str, until_ms: int, token: str) -> str:
    """``<lead unit id>-<hold expiry, epoch ms>-<random>``: where the reservation's record is,
    and when it lapses. Only the lead unit says whether it was issued (see :meth:`Inventory._lead`):
    anyone can write an id of this shape."""
    return f"{lead}-{until_ms}-{token}"


def parse_reservation_id(reservation: str) -> tuple[str, int] | None:
    parts = reservation.split("-")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


def pool_names(sku: str, pools: int) -> list[str]:
    return [f"{sku}#{index}" for index in range(pools)]


def pool_index(pool: str) -> int:
    """``k`` of a pool named ``<sku>#<k>`` (:func:`pool_names`)."""
    return int(pool.rsplit("#", 1)[1])


def pools_for(units: int) -> int:
    """The rule when a creation names no N: one pool per ``INVENTORY_POOL_UNITS`` (1,000; the
    environment's ``TURNSTILE_INVENTORY_POOL_UNITS`` overrides it) units,
    at least 1 and at most ``INVENTORY_MAX_POOLS`` (16). A pool is one partition key (1,000 WCU/s
    on AWS) and a refusal reads every pool once, so more pools than the units need only make
    refusals dearer."""
    per_pool = config.inventory_pool_units()
    return min(config.INVENTORY_MAX_POOLS, max(1, math.ceil(units / per_pool)))


def unit_key(sku: str, number: int, pools: int) -> dict[str, Any]:
    """Where unit ``number`` lives: in pool ``number % pools``, whose name is also the unit's
    partition key, so each pool is its own partition in the table as in the index."""
    return {"sku": f"{sku}#{number % pools}", "sk": unit_sk(number)}


def sku_of(partition: str) -> str:
    """The sku of a unit's partition key (``<sku>#<pool>``; a sku never contains ``#``)."""
    return partition.split("#", 1)[0]


NEW_ON_DEMAND_WCU = 4_000  # write units a second a new on-demand table serves at once
TRANSACTIONAL_PUT_WCU = 2  # a put inside a transaction is billed twice (a 1 KB unit: 1 WCU)


def table_pace(description: Mapping[str, Any], index: str) -> float:
    """Units a second a creation may start on the table ``DescribeTable`` describes: the write
    units a second it serves, over the 2 a transactional put of a unit costs.

    Provisioned: the table's WCU, or its index ``index``'s if fewer (each new unit also writes
    that index). On-demand: what the table serves now (``WarmThroughput``: 4,000 for a new
    table, more once it has served more), else 4,000, and never more than its
    ``OnDemandThroughput`` maximum when one is set.
    """
    mode = (description.get("BillingModeSummary") or {}).get("BillingMode")
    provisioned = int((description.get("ProvisionedThroughput") or {}).get("WriteCapacityUnits", 0))
    if mode != "PAY_PER_REQUEST" and provisioned > 0:
        wcu = provisioned
        for each in description.get("GlobalSecondaryIndexes") or []:
            if each.get("IndexName") == index:
                own = int((each.get("ProvisionedThroughput") or {}).get("WriteCapacityUnits", 0))
                wcu = min(wcu, own) if own > 0 else wcu
    else:
        warm = int((description.get("WarmThroughput") or {}).get("WriteUnitsPerSecond", 0))
        wcu = warm if warm > 0 else NEW_ON_DEMAND_WCU
        ceiling = int((description.get("OnDemandThroughput") or {}).get("MaxWriteRequestUnits", -1))
        wcu = min(wcu, ceiling) if ceiling > 0 else wcu
    return max(1.0, wcu / TRANSACTIONAL_PUT_WCU)


def pace_of(client: Any, table: str, backoff: retry.Backoff) -> float:
    """:func:`table_pace` of ``table`` as it is now (one ``DescribeTable``)."""
    description = retry.call(
        lambda: client.describe_table(TableName=table)["Table"], backoff=backoff, idempotent=True
    )
    return table_pace(description, config.INVENTORY_CLAIMABLE_INDEX)


class _Pace:
    """Start at most ``rate`` units a second, over every thread of one creation step (no limit
    when ``rate`` is 0)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.next_at = time.monotonic()
        self.lock = threading.Lock()

    def wait(self, units: int) -> None:
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_at)
            self.next_at = start + units / self.rate
        if start > now:
            time.sleep(start - now)


@dataclass
class Inventory:
    client: Any
    table: str
    summary_table: str
    backoff: retry.Backoff = field(default_factory=config.call_backoff)
    clock: Callable[[], float] = time.time
    rand: Callable[[], float] = random.random
    writers: int = config.INVENTORY_CREATE_WRITERS
    parallel_chunks: int = config.INVENTORY_CREATE_CHUNKS
    # The environment's setting (config.inventory_create_pace; 0: unpaced), else the table's pace.
    create_units_per_second: float | None = None
    # What this Inventory's reservations have seen of the pools lately, shared by them (the
    # wiring builds one per Lambda execution environment, handlers.inventory, and passes it);
    # None: each reservation starts knowing nothing.
    pool_hints: claims.PoolHints | None = field(default_factory=claims.PoolHints)
    # Off by default: under the flash-sale workload (100 users on 100 units) most remembered units
    # were taken meanwhile and reservations got slower (docs/patterns/inventory.md).
    unit_cache: claims.UnitCache | None = None
    # One-unit reservations first try a random unit of a pool this process has no bad news of,
    # without reading: one call when it is free, as a purchase is.
    guess: bool = True
    chunk_units: int = config.INVENTORY_CHUNK_UNITS
    inline_units: int = config.INVENTORY_INLINE_UNITS
    # READY headers never change: kept per process, for the most recently used skus only
    header_cache_skus: int = config.INVENTORY_HEADER_CACHE_SKUS
    # The unit items' layout, for a table that stores their attributes under other names (its
    # ``table`` must be this one's); None: the default names on ``table``.
    unit_table: claims.UnitTable | None = None
    _headers: LRU[str, dict[str, Any]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._headers = LRU(self.header_cache_skus)

    @property
    def units(self) -> claims.UnitTable:
        if self.unit_table is not None:
            return self.unit_table
        return claims.UnitTable(
            table=self.table, index=config.INVENTORY_CLAIMABLE_INDEX, key_attrs=("sku", "sk")
        )

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- creating ------------------------------------------------------------------------------

    def create(self, sku: str, units: int, pools: int | None = None) -> dict[str, Any]:
        """Write the header (CREATING) and answer; the units follow in chunks (:meth:`advance`,
        run by the creation worker from the header's stream records). A sku of at most
        ``inline_units`` units is built before answering, by the same code.

        The same creation again (same ``units``) is idempotent: it answers the current progress
        and, while still CREATING, touches the header so that a stalled creation resumes. Another
        ``units`` for an existing sku is :class:`AlreadyExists`. ``pools`` is N, the number of
        pools the units are spread over (:func:`pools_for` when not given; fixed for the sku).
        """
        if pools is not None and not 1 <= pools <= units:
            raise ValueError("a sku has 1 to `units` pools")
        chunks = max(1, math.ceil(units / self.chunk_units))
        header = {
            "sku": sku,
            "sk": HEADER,
            "units": units,
            "pools": pools or pools_for(units),
            "chunkUnits": self.chunk_units,
            "chunks": chunks,
            "chunksDone": 0,
            "status": CREATING,
        }
        try:
            # A creation is known by its units: the same sku with the same units again (a resend
            # after a lost reply, a client's retry, a header written by an older version) is this
            # creation, found created; other units are someone else's sku.
            created = creation.create_if_absent(
                self.client,
                table=self.table,
                item=header,
                key_attr="sk",
                backoff=self.backoff,
                pattern="dynamodb",
                token=units,
                token_attr="units",
            )
        except creation.AlreadyExists as exc:
            raise AlreadyExists(f"sku {sku!r} already exists with other units") from exc
        if created.resent:
            metrics.count("CreationReplayed", pattern="inventory")
            if created.item.get("status") == CREATING:
                self._nudge(sku)
            return self.progress(self._read_header(sku))
        if units <= self.inline_units:
            while self.advance(sku):
                pass
        return self.progress(self._read_header(sku))

    def _nudge(self, sku: str) -> None:
        """A header change the worker sees again: resumes a creation whose chain of stream
        records stopped (its record went to the dead-letter queue)."""
        with contextlib.suppress(errors.AwsRefused):
            retry.call(
                lambda: self.client.update_item(
                    TableName=self.table,
                    Key=codec.encode_item({"sku": sku, "sk": HEADER}),
                    UpdateExpression="ADD #nudges :one",
                    ConditionExpression="#status = :creating",
                    ExpressionAttributeNames={"#nudges": "nudges", "#status": "status"},
                    ExpressionAttributeValues=codec.values(one=1, creating=CREATING),
                ),
                backoff=self.backoff,
                idempotent=True,  # one nudge more or less changes nothing
            )

    def advance(self, sku: str) -> bool:
        """Create the next chunks of the sku's units and record them; True while chunks remain.

        One step writes up to ``parallel_chunks`` chunks at once, as 100-unit transactions sent by
        at most ``writers`` threads, started at most :meth:`create_pace` units a second: the
        bounds on what one worker asks of the table (2 write units per unit, as transactional
        puts are billed: half of what the table serves, :func:`table_pace`) and on a step's time
        (one chunk of 10,000 units: 5 s at a new on-demand table's pace, 5-25 s unpaced on
        DynamoDB Local on a shared 2-core machine, inside the worker's 120 s).

        Idempotent and resumable: the units have deterministic ids and are written with
        ``attribute_not_exists`` (never over a unit that exists, which may already be held), and
        the progress pointer ``chunksDone`` moves from c to c + k in one transaction with the
        summary's ``available += n``, conditionally on still being c: each chunk is counted once.
        A crash anywhere repeats at most the current step, which then writes only the units
        still missing.
        """
        header = self._read_header(sku)
        done, chunks = int(header["chunksDone"]), int(header["chunks"])
        if header["status"] != CREATING or done >= chunks:
            return False
        upto = min(chunks, done + max(1, self.parallel_chunks))
        size, total = int(header["chunkUnits"]), int(header["units"])
        numbers = range(done * size, min(upto * size, total))
        pools = int(header["pools"])
        items = []
        for n in numbers:
            key = unit_key(sku, n, pools)
            items.append(
                claims.new_unit(self.units, key, key["sku"], claims.new_claimable_at(self.rand))
            )
        batches = [items[i : i + 100] for i in range(0, len(items), 100)]
        pace = _Pace(self.create_pace())

        def put(batch: list[dict[str, Any]]) -> None:
            pace.wait(len(batch))
            self._put_new(batch)

        with ThreadPoolExecutor(max_workers=max(1, min(self.writers, len(batches)))) as pool:
            list(pool.map(put, batches))
        last = upto == chunks
        update = "SET #done = :next" + (", #status = :ready" if last else "")
        values: dict[str, Any] = {"done": done, "next": upto}
        if last:
            values["ready"] = READY
        try:
            transact.transact_write(
                self.client,
                [
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": codec.encode_item({"sku": sku, "sk": HEADER}),
                            "UpdateExpression": update,
                            "ConditionExpression": "#done = :done",
                            "ExpressionAttributeNames": {"#done": "chunksDone"}
                            | ({"#status": "status"} if last else {}),
                            "ExpressionAttributeValues": codec.values(**values),
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.summary_table,
                            "Key": codec.encode_item({"sku": sku, "sk": SUMMARY}),
                            "UpdateExpression": "ADD #available :n, #reserved :zero, #sold :zero",
                            "ExpressionAttributeNames": {
                                "#available": "available",
                                "#reserved": "reserved",
                                "#sold": "sold",
                            },
                            "ExpressionAttributeValues": codec.values(n=len(numbers), zero=0),
                        }
                    },
                ],
                backoff=self.backoff,
            )
        except transact.Cancelled as exc:
            if not exc.failed_at(0):
                raise
            metrics.count("ChunkAlreadyRecorded", pattern="inventory")  # a concurrent worker
        self._headers.pop(sku)
        return not last

    def create_pace(self) -> float:
        """Units a second the creation starts at most (0: no limit): the setting when there is
        one (the worker's is its table's :func:`table_pace` unless the environment names one),
        else ``INVENTORY_CREATE_UNITS_PER_SECOND``, a new on-demand table's."""
        if self.create_units_per_second is not None:
            return self.create_units_per_second
        return config.INVENTORY_CREATE_UNITS_PER_SECOND

    def advance_while(self, sku: str, remaining_ms: Callable[[], float]) -> bool:
        """Steps of :meth:`advance`, one after another, while the worker's remaining time
        (``remaining_ms``: Lambda's ``get_remaining_time_in_millis``) still covers another step
        ``INVENTORY_CREATE_STEP_MARGIN`` times over, judged by the longest step this call has
        taken; True while chunks remain.

        Waiting for the stream to bring the header's next change costs a poll per step (seconds
        locally, where the pump first reads every unit the step wrote), and each step's record
        then finds the creation further on: it only continues it. The first step always runs, as
        a step is bounded on its own (:meth:`advance`); a worker stopped by its timeout all the
        same resumes from its record like any crash.
        """
        longest = 0.0
        while True:
            started = time.monotonic()
            more = self.advance(sku)
            longest = max(longest, time.monotonic() - started)
            if not more or remaining_ms() < config.INVENTORY_CREATE_STEP_MARGIN * longest * 1000:
                return more

    def _put_new(self, items: list[dict[str, Any]]) -> None:
        """Put the units of ``items`` that do not exist yet, in one transaction per attempt; the
        ones that exist (a repeated chunk) are named by the cancellation and left out."""
        pending = items
        last: transact.Cancelled | None = None
        for _ in range(self.backoff.attempts):
            try:
                transact.transact_write(
                    self.client,
                    [
                        {
                            "Put": {
                                "TableName": self.table,
                                "Item": codec.encode_item(item),
                                "ConditionExpression": "attribute_not_exists(sk)",
                            }
                        }
                        for item in pending
                    ],
                    backoff=self.backoff,
                )
                return
            except transact.Cancelled as exc:
                last = exc
                exists = {i for i, reason in enumerate(exc.reasons) if reason.failed}
                metrics.count("UnitAlreadyCreated", pattern="inventory", value=len(exists))
                pending = [item for i, item in enumerate(pending) if i not in exists]
                if not pending:
                    return
        what = f"creating {len(pending)} unit(s) of {self.table}"
        raise errors.LostEveryRace(self.backoff.attempts, what, last)

    # -- reading -------------------------------------------------------------------------------

    def _read_header(self, sku: str) -> dict[str, Any]:
        item = versioned.read(self.client, self.table, {"sku": sku, "sk": HEADER}, self.backoff)
        if item is None:
            raise NotFound(f"no sku {sku!r}")
        if item.get("status", READY) == READY:
            self._headers.put(sku, item)
        return item

    def header(self, sku: str) -> dict[str, Any]:
        """The sku's header. Its ``units`` and ``pools`` never change; once READY nothing in it
        does, so it is cached per process from then on (the ``header_cache_skus`` most recently
        used: a process that sees many skus stays bounded)."""
        cached = self._headers.get(sku)
        if cached is not None:
            return cached
        return self._read_header(sku)

    @staticmethod
    def progress(header: Mapping[str, Any]) -> dict[str, Any]:
        total = int(header["units"])
        status = str(header.get("status", READY))
        if status == READY:
            created = total
        else:
            created = min(total, int(header["chunksDone"]) * int(header["chunkUnits"]))
        return {"sku": header["sku"], "units": total, "status": status, "unitsCreated": created}

    def summary(self, sku: str) -> dict[str, Any]:
        """Counts kept by the stream consumer: eventually consistent, no scan; with the
        creation's progress (``status``, ``unitsCreated``)."""
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
            **self.progress(header),
            "available": int(counts.get("available", 0)),
            "reserved": int(counts.get("reserved", 0)),
            "sold": int(counts.get("sold", 0)),
            "consistency": "eventual",
        }

    def exact(self, sku: str) -> dict[str, Any]:
        """Counts from the units themselves: a strongly consistent Query of each pool's partition
        (never a scan). It reads every unit of the sku, and DynamoDB bills the size of the items
        read whatever the projection: units x item size in consistent reads (one read unit per
        4 KB; about 10 MB and 2,500 read units for 100,000 units), which is why the route is for
        administrators only (``service.policy.ACCESS``). A lapsed hold counts as available, as it
        is claimable."""
        header = self.header(sku)
        now_ms = self._now_ms()
        counts = {"available": 0, "reserved": 0, "sold": 0}
        status, until = self.units.status_attr, self.units.until_attr
        for unit in self.units_of(sku, header, projection="#status, #until"):
            if unit[status] == claims.SOLD:
                counts["sold"] += 1
            elif unit[status] == claims.HELD and unit[until] > now_ms:
                counts["reserved"] += 1
            else:
                counts["available"] += 1
        return {"sku": sku, "units": header["units"], **counts, "consistency": "strong"}

    def units_of(
        self, sku: str, header: Mapping[str, Any] | None = None, projection: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every unit of the sku, strongly consistent: one Query per pool partition.
        ``projection`` names the unit's attributes by the placeholders of
        :meth:`turnstile_ddb.claims.UnitTable.names` (``#status``, ``#until``...)."""
        header = header or self.header(sku)
        for pool in pool_names(sku, int(header["pools"])):
            start: dict[str, Any] | None = None
            while True:
                request: dict[str, Any] = {
                    "TableName": self.table,
                    "KeyConditionExpression": "sku = :pool AND begins_with(sk, :unit)",
                    "ExpressionAttributeValues": codec.values(pool=pool, unit=UNIT),
                    "ConsistentRead": True,
                }
                if projection:
                    request["ProjectionExpression"] = projection
                    request["ExpressionAttributeNames"] = {
                        placeholder: name
                        for placeholder, name in self.units.names().items()
                        if placeholder in projection
                    }
                if start:
                    request["ExclusiveStartKey"] = start
                response = retry.call(
                    lambda request=request: self.client.query(**request),  # type: ignore[misc]
                    backoff=self.backoff,
                    idempotent=True,
                )
                for raw in response.get("Items", []):
                    yield codec.decode_item(raw) or {}
                start = response.get("LastEvaluatedKey")
                if not start:
                    break

    # -- reserving -----------------------------------------------------------------------------

    def reserve(
        self,
        sku: str,
        quantity: int,
        hold_seconds: float = config.INVENTORY_HOLD_SECONDS,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Hold ``quantity`` units in one transaction (see :func:`turnstile_ddb.claims.reserve`).

        The reservation's record is its lead unit: the reservation id names it, and it lists the
        units, so the record is written in the same transaction as the claims (a separate record
        item would make 101 items at quantity 100, over the limit of 100 per transaction).

        What it reads is bounded whatever the sku's state: each read of a pool is at most
        :data:`turnstile_ddb.claims.PAGES_PER_POOL` (4) Queries. While the sku is CREATING, the
        index also lists units written but not yet offered (their chunk is not recorded), so
        the reads take pages of ``INVENTORY_CREATING_PAGE_KEYS`` keys, and a reservation that
        finds too few offered units within the bound is :class:`OutOfStock` with the creation's
        progress (``status``, ``unitsCreated``, ``units``) and ``retryAfterSeconds`` (the HTTP
        answer's ``Retry-After``): with no unit offered yet, before any read. Once READY a read
        stopped at its bound is not a refusal (it never is in practice: a page holds more units
        than the read needs) but a retryable 503 (:class:`turnstile_ddb.retry.RetriesExhausted`).

        A request that outlasts its own hold (on :attr:`clock`) is never answered with it: its
        claim, if it landed, is given back and :class:`turnstile_ddb.claims.ClaimHoldLapsed`
        propagates (the API's 503 ``HOLD_LAPSED`` with ``Retry-After``).
        """
        header = self.header(sku)
        progress = self.progress(header)
        creating = progress["status"] != READY
        if creating and progress["unitsCreated"] == 0:
            metrics.count("ReserveWhileCreating", pattern="inventory")
            raise self._not_offered_yet(progress, quantity)
        token = uuid.uuid4().hex[:16]
        now_ms = self._now_ms()
        until_ms = now_ms + max(1, int(hold_seconds * 1000))
        try:
            taken = claims.reserve(
                self.client,
                self.units,
                pools=pool_names(sku, int(header["pools"])),
                quantity=quantity,
                holder=lambda lead: reservation_id(unit_id(lead["sk"]), until_ms, token),
                now_ms=now_ms,
                until_ms=until_ms,
                owner=owner,
                options=self._reserve_options(sku, header, quantity, creating),
            )
        except (claims.NotEnough, claims.Unsettled) as exc:
            if creating:
                metrics.count("ReserveWhileCreating", pattern="inventory")
                raise self._not_offered_yet(progress, quantity) from exc
            if isinstance(exc, claims.Unsettled):
                raise retry.RetriesExhausted(exc.pages, exc) from exc
            raise OutOfStock(
                f"fewer than {quantity} units of {sku!r} are available", requested=quantity
            ) from exc
        return {
            "reservationId": taken.holder,
            "sku": sku,
            "units": [unit_id(key["sk"]) for key in taken.keys],
            "expiresAt": until_ms,
        }

    def _reserve_options(
        self, sku: str, header: Mapping[str, Any], quantity: int, creating: bool
    ) -> claims.ReserveOptions:
        """How a reservation of ``quantity`` units of ``sku`` reads and claims."""
        return claims.ReserveOptions(
            backoff=self.backoff,
            rand=self.rand,
            rounds=config.INVENTORY_RESERVE_ROUNDS,
            hints=self.pool_hints,
            unit_cache=self.unit_cache,
            clock_ms=self._now_ms,
            eligible=self._offered(header),
            guess=self._guess(sku, header) if self.guess and quantity == 1 else None,
            page_size=config.INVENTORY_CREATING_PAGE_KEYS if creating else None,
        )

    @staticmethod
    def _not_offered_yet(progress: Mapping[str, Any], quantity: int) -> OutOfStock:
        """The refusal while a sku is still being created: not exact (units of chunks recorded
        later, or further on in the index than the bounded read went, may come free), so it says
        the creation's progress and when to try again."""
        return OutOfStock(
            f"fewer than {quantity} units of {progress['sku']!r} are offered yet: it is still "
            f"being created ({progress['unitsCreated']} of {progress['units']} units); retry later",
            requested=quantity,
            status=progress["status"],
            unitsCreated=progress["unitsCreated"],
            units=progress["units"],
            retryAfterSeconds=config.INVENTORY_CREATING_RETRY_SECONDS,
        )

    def _guess(
        self, sku: str, header: Mapping[str, Any]
    ) -> Callable[[str, int], list[dict[str, Any]]]:
        """A unit of a pool named without reading: unit numbers are known (``k``, ``k + N``,
        ``k + 2N``... below the units created are pool ``k``'s), so a random one of them.

        Only for one unit: the claim is then one conditional ``UpdateItem``, and a unit that is
        not free fails it (1 WCU) and the reservation reads the pool as it would have. The pool
        hints stop guessing in a pool that was seen short or whose guess missed lately
        (:meth:`turnstile_ddb.claims.PoolHints.may_guess`). Several guessed units in one
        transaction would all have to be free: under contention that is rarely so."""
        created = int(self.progress(header)["unitsCreated"])
        pools = int(header["pools"])

        def guess(pool: str, n: int) -> list[dict[str, Any]]:
            first = pool_index(pool)
            count = max(0, (created - first + pools - 1) // pools)
            if n != 1 or count < 1:
                return []
            return [unit_key(sku, first + pools * int(self.rand() * count), pools)]

        return guess

    def _offered(self, header: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool] | None:
        """While a sku is CREATING, only the units of recorded chunks are offered: a chunk's
        units are counted (``available += n``) when it is recorded, so a unit claimed earlier
        would show a negative ``available`` on ``GET /inventory/{sku}``. The
        header only moves forward, so a unit offered by the header read stays recorded."""
        created = int(self.progress(header)["unitsCreated"])
        if created >= int(header["units"]):
            return None
        return lambda key: int(unit_id(str(key["sk"]))) < created

    def _lead(self, sku: str, reservation: str) -> tuple[dict[str, Any] | None, bool]:
        """The reservation's lead unit if it still names this reservation; else whether it
        names it as the holder whose lapsed hold a later claim replaced (``previousHolder``):
        then the reservation was issued and lapsed. An id the server never issued is named by
        no unit, whatever expiry it encodes (only the unit is evidence, never the id)."""
        parsed = parse_reservation_id(reservation)
        if parsed is None:
            raise NotFound(f"no reservation {reservation!r} for sku {sku!r}")
        lead, _ = parsed
        pools = int(self.header(sku)["pools"])
        unit = claims.holders_units(
            self.client, self.units, unit_key(sku, int(lead), pools), backoff=self.backoff
        )
        if unit is None or unit.get(self.units.holder_attr) != reservation:
            lapsed = unit is not None and unit.get(self.units.previous_attr) == reservation
            return None, lapsed
        return unit, False

    def _unit_keys(self, sku: str, lead: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [
            {"sku": str(member["sku"]), "sk": str(member["sk"])}
            for member in lead.get(self.units.members_attr, [])
            if sku_of(str(member["sku"])) == sku
        ]

    def confirm(self, sku: str, reservation: str, authorize: Authorize = None) -> dict[str, Any]:
        """Sell the reservation's units, all of them or none, while the hold is valid and ours:
        one consistent read of the lead unit, one transaction.

        Repeating a confirm that succeeded answers the same (the units are already ours, sold).
        """
        self.header(sku)
        lead, lapsed = self._lead(sku, reservation)
        if lead is None:
            # Its lead unit was taken by a claim that replaced its lapsed hold: it was issued
            # and expired. Otherwise it was released, or never issued: 404 (an id's expiry is
            # not evidence, anyone can write one). A lead unit claimed again after that claim
            # no longer remembers it: 404 too.
            if lapsed:
                raise Expired(f"reservation {reservation!r} expired and its units were taken")
            raise NotFound(f"no reservation {reservation!r} for sku {sku!r}")
        if authorize is not None:
            authorize(lead.get(self.units.owner_attr))
        keys = self._unit_keys(sku, lead)
        answer = {
            "reservationId": reservation,
            "sku": sku,
            "units": [unit_id(key["sk"]) for key in keys],
            "status": CONFIRMED,
        }
        if lead.get(self.units.status_attr) == claims.SOLD:
            return answer
        try:
            claims.confirm(
                self.client,
                self.units,
                keys,
                holder=reservation,
                now_ms=self._now_ms(),
                backoff=self.backoff,
            )
        except claims.HoldLost as exc:  # counted by claims.confirm (ConfirmLost)
            raise Expired(
                f"reservation {reservation!r} expired: its hold lapsed or its units were "
                "released or taken by another reservation",
                units=[unit_id(key["sk"]) for key in exc.keys],
            ) from exc
        return answer

    def release(self, sku: str, reservation: str, authorize: Authorize = None) -> None:
        """Free the units this reservation still holds, in one transaction."""
        self.header(sku)
        lead, _ = self._lead(sku, reservation)
        if lead is None:
            raise NotFound(f"no reservation {reservation!r} for sku {sku!r}")
        if authorize is not None:
            authorize(lead.get(self.units.owner_attr))
        if lead.get(self.units.status_attr) == claims.SOLD:
            raise AlreadyConfirmed(f"reservation {reservation!r} is confirmed (sold)")
        kept = claims.release(
            self.client,
            self.units,
            self._unit_keys(sku, lead),
            holder=reservation,
            backoff=self.backoff,
            rand=self.rand,
        )
        status, holder = self.units.status_attr, self.units.holder_attr
        if any(
            unit.get(status) == claims.SOLD and unit.get(holder) == reservation for unit in kept
        ):
            # A confirm won the race: the units are sold.
            raise AlreadyConfirmed(f"reservation {reservation!r} is confirmed (sold)")
