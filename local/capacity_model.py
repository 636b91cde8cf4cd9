"""DynamoDB's per-partition throughput limits, enforced in front of DynamoDB Local (opt-in).

DynamoDB Local never throttles, so nothing run against it can show what a hot key costs on AWS.
This model puts back the limit that matters for one hot item: every partition key value of every
table and index gets its own pair of token buckets, refilled at 1000 write units and 3000 read
units per second times one scale factor (``TURNSTILE_CAPACITY_SCALE``; 0.05 gives 50 WCU/s and
150 RCU/s per key, so two Python cores can offer more than one key takes).

Where it applies: one model, two ways in. In-process clients (the bench, the integration tier)
take it as a botocore ``before-send`` hook (:meth:`CapacityModel.attach`): it sees each serialized
request as DynamoDB would and answers it without a hop. The functions of ``make local`` run in
worker processes of their own, out of reach of any hook here, so there the same model sits in
``local.dynamo_proxy`` in front of DynamoDB Local (:meth:`CapacityModel.decide`), and every
worker's DynamoDB endpoint points at that proxy. Nothing ready-made does this: moto and
LocalStack do not model per-key throughput either, so it is written here.

Sizing, as AWS sizes it:

* a write costs one WCU per started KB of the item (``PutItem``: the item sent; ``UpdateItem`` and
  ``DeleteItem``: the key and values sent, at least 1, because the stored item is not known before
  the call -- AWS charges the larger of the old and new image); a write refused by its condition
  is charged too (the tokens are taken before the call);
* a read costs one RCU per started 4 KB when strongly consistent, half when eventually consistent
  (the item is not known before the call, so a ``GetItem`` or ``Query`` is charged its minimum);
* every item of ``TransactWriteItems`` / ``TransactGetItems`` costs twice;
* ``PutItem`` into a table with a global secondary index also charges the index's key, when the
  item carries it.

A request is admitted only if every bucket it touches holds its cost; otherwise nothing is charged
and the request is answered as AWS answers it, without reaching DynamoDB Local (nothing applied):

* single-item calls and batches: HTTP 400 ``ProvisionedThroughputExceededException`` with
  ``ThrottlingReasons`` ``[{"reason": "TableWriteKeyRangeThroughputExceeded", ...}]`` (a batch is
  refused whole: AWS would return the throttled part as ``UnprocessedItems``);
* transactions: ``TransactionCanceledException`` whose ``CancellationReasons`` say
  ``ThrottlingError`` for the throttled items and ``None`` for the rest.

Burst: each bucket starts full and holds ``burst_seconds`` of its rate (default 1 s). AWS keeps up
to 300 s of unused *table* capacity, but a partition never exceeds its hard per-partition limit,
which is what these buckets are; the small burst only lets short spikes through.

Not modelled (the README says what that means): adaptive capacity and split-for-heat (AWS moves a
hot key to its own partition and may split a partition by sort key after minutes of sustained
heat; here every key is its own partition from the start and never gets more), table-level and
account-level limits, on-demand ramp-up, ``Scan``, and the index side of updates and deletes.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders

from service.lru import LRU
from turnstile_ddb import metrics

SCALE_ENV = "TURNSTILE_CAPACITY_SCALE"
WCU_PER_KEY = 1000.0
RCU_PER_KEY = 3000.0
MAX_KEYS = 100_000  # partition keys whose buckets are kept (a transaction touches at most 100)
# keys whose throttles are counted (Stats.throttled_by_key): a report names the hot few, and the
# hottest are the most recently throttled, so a bound far above any report keeps every one it shows
MAX_THROTTLED_KEYS = 10_000
WRITE_KB = 1024
READ_KB = 4096
PATTERN = "capacity_model"


def scale_from_env(env: dict[str, str] | None = None) -> float | None:
    """The scale factor if ``TURNSTILE_CAPACITY_SCALE`` is set to a positive number, else None."""
    raw = (os.environ if env is None else env).get(SCALE_ENV, "").strip()
    if not raw:
        return None
    value = float(raw)
    if not value > 0:
        raise ValueError(f"{SCALE_ENV} must be a positive number, not {raw!r}")
    return value


@dataclass
class Bucket:
    """A token bucket: ``rate`` tokens per second, holding at most ``capacity``, starting full."""

    rate: float
    capacity: float
    clock: Callable[[], float]
    tokens: float = field(init=False)
    stamp: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = self.capacity
        self.stamp = self.clock()

    def refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def has(self, cost: float) -> bool:
        """A request larger than the whole bucket is admitted from a full bucket and leaves it in
        debt (as a 400 KB write on AWS), so the long-run rate stays exact."""
        self.refill()
        return self.tokens >= min(cost, self.capacity) - 1e-9


# --- request sizing ---------------------------------------------------------------------------


def value_size(value: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for one attribute value (names are counted by the caller)."""
    kind, raw = next(iter(value.items()))
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        digits = raw.lstrip("-").replace(".", "").lstrip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(raw) * 3 // 4  # base64 on the wire
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: each}) for each in raw)
    if kind == "L":
        return 3 + sum(1 + value_size(each) for each in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + value_size(v) for k, v in raw.items())
    return len(json.dumps(raw))


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> float:
    return float(max(1, math.ceil(size / WRITE_KB)))


def read_units(size: int, consistent: bool) -> float:
    units = float(max(1, math.ceil(size / READ_KB)))
    return units if consistent else units / 2


# --- the model --------------------------------------------------------------------------------

Charge = tuple[tuple[str, str, str, str], float]  # ((table, index, key json, "W"|"R"), units)


@dataclass
class Stats:
    admitted: int = 0
    throttled: int = 0
    # throttles per "table/index/key/W|R", for the keys most recently throttled only
    throttled_by_key: LRU[str, int] = field(default_factory=lambda: LRU(MAX_THROTTLED_KEYS))


class CapacityModel:
    """Token buckets per (table, index, partition key value) for writes and reads.

    ``describe(table)`` returns ``DescribeTable``'s ``Table`` (key schema and indexes); by default
    the hooked client describes the table itself on first use. ``clock`` is injectable so the
    buckets can be tested exactly.
    """

    def __init__(
        self,
        scale: float,
        *,
        burst_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        describe: Callable[[str], dict[str, Any]] | None = None,
        max_keys: int = MAX_KEYS,
        max_throttled_keys: int = MAX_THROTTLED_KEYS,
    ) -> None:
        self.scale = scale
        self.wcu = WCU_PER_KEY * scale
        self.rcu = RCU_PER_KEY * scale
        self.burst_seconds = burst_seconds
        self.clock = clock
        self._describe = describe
        self._lock = threading.Lock()
        # one pair per partition key seen: bounded, the least recently used key forgotten first
        # (a key idle for burst_seconds has a full bucket, which is what a new one starts as)
        self._buckets: LRU[tuple[str, str, str, str], Bucket] = LRU(max_keys)
        self._schemas: dict[str, dict[str, Any]] = {}
        self.stats = Stats(throttled_by_key=LRU(max_throttled_keys))

    # schema: which attribute is the partition key of the table and of each index
    def _schema(self, table: str) -> dict[str, Any]:
        schema = self._schemas.get(table)
        if schema is None:
            if self._describe is None:
                raise RuntimeError("attach the model to a client, or pass describe=")
            described = self._describe(table)
            schema = {"": _hash_key(described["KeySchema"])}
            for index in described.get("GlobalSecondaryIndexes", []) or []:
                schema[index["IndexName"]] = _hash_key(index["KeySchema"])
            self._schemas[table] = schema
        return schema

    def _bucket(self, key: tuple[str, str, str, str]) -> Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            rate = self.wcu if key[3] == "W" else self.rcu
            bucket = Bucket(rate, rate * self.burst_seconds, self.clock)
            self._buckets.put(key, bucket)
        return bucket

    def admit(self, charges: Iterable[Charge]) -> list[bool]:
        """Take every charge if all fit; else take nothing. One flag per charge: did it fit?"""
        charges = list(charges)
        with self._lock:
            totals: dict[tuple[str, str, str, str], float] = {}
            for key, units in charges:
                totals[key] = totals.get(key, 0.0) + units
            buckets = {key: self._bucket(key) for key in totals}
            fits = {key: buckets[key].has(units) for key, units in totals.items()}
            if all(fits.values()):
                for key, units in totals.items():
                    buckets[key].tokens -= units
                self.stats.admitted += 1
            else:
                self.stats.throttled += 1
                for key, ok in fits.items():
                    if not ok:
                        name = f"{key[0]}/{key[1] or '-'}/{key[2]}/{key[3]}"
                        counted = self.stats.throttled_by_key.get(name) or 0
                        self.stats.throttled_by_key.put(name, counted + 1)
            return [fits[key] for key, _ in charges]

    # charges of one request, in the order its items appear
    def charges(self, operation: str, body: dict[str, Any]) -> list[Charge]:
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            return self._write(operation, body, factor=1.0)
        if operation in ("GetItem", "Query"):
            return self._read(operation, body, factor=1.0)
        if operation == "TransactWriteItems":
            out: list[Charge] = []
            for element in body.get("TransactItems", []):
                (kind, spec), *_ = element.items()
                op = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}.get(kind)
                if op is None:  # ConditionCheck: a read of the item, billed as a write unit
                    op = "UpdateItem"
                out.extend(self._write(op, spec, factor=2.0))
            return out
        if operation == "TransactGetItems":
            return [
                charge
                for element in body.get("TransactItems", [])
                for charge in self._read(
                    "GetItem", {**element["Get"], "ConsistentRead": True}, factor=2.0
                )
            ]
        if operation == "BatchWriteItem":
            batch: list[Charge] = []
            for table, requests in body.get("RequestItems", {}).items():
                for request in requests:
                    if "PutRequest" in request:
                        spec = {"TableName": table, **request["PutRequest"]}
                        batch.extend(self._write("PutItem", spec, factor=1.0))
                    else:
                        spec = {"TableName": table, **request["DeleteRequest"]}
                        batch.extend(self._write("DeleteItem", spec, factor=1.0))
            return batch
        if operation == "BatchGetItem":
            return [
                charge
                for table, spec in body.get("RequestItems", {}).items()
                for key in spec.get("Keys", [])
                for charge in self._read(
                    "GetItem",
                    {"TableName": table, "Key": key, "ConsistentRead": spec.get("ConsistentRead")},
                    factor=1.0,
                )
            ]
        return []

    def _write(self, op: str, spec: dict[str, Any], factor: float) -> list[Charge]:
        table = spec["TableName"]
        schema = self._schema(table)
        if op == "PutItem":
            item = spec["Item"]
            units = write_units(item_size(item)) * factor
            out: list[Charge] = [((table, "", _value(item, schema[""]), "W"), units)]
            for index, attr in schema.items():
                if index and attr in item:
                    out.append(((table, index, _value(item, attr), "W"), units))
            return out
        size = item_size(spec["Key"]) + item_size(spec.get("ExpressionAttributeValues") or {})
        return [((table, "", _value(spec["Key"], schema[""]), "W"), write_units(size) * factor)]

    def _read(self, op: str, spec: dict[str, Any], factor: float) -> list[Charge]:
        table = spec["TableName"]
        schema = self._schema(table)
        consistent = bool(spec.get("ConsistentRead"))
        units = read_units(0, consistent) * factor
        if op == "GetItem":
            return [((table, "", _value(spec["Key"], schema[""]), "R"), units)]
        index = spec.get("IndexName") or ""
        value = _query_hash_value(spec, schema.get(index, schema[""]))
        return [((table, index, value, "R"), units)]

    # the botocore side
    def attach(self, client: Any) -> Any:
        """Enforce the model on every call ``client`` makes; returns ``client``."""
        if self._describe is None:
            self._describe = lambda table: client.describe_table(TableName=table)["Table"]
        client.meta.events.register("before-send.dynamodb", self._before_send)
        return client

    def decide(self, operation: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """Charge one request; None if admitted, else the error body AWS answers it with
        (HTTP 400). Shared by the botocore hook here and by ``local.dynamo_proxy``, which puts
        the model in front of the worker processes."""
        if operation not in METERED:
            return None
        charges = self.charges(operation, body)
        if not charges:
            return None
        fits = self.admit(charges)
        if all(fits):
            return None
        metrics.count("Throttle", pattern=PATTERN)
        return throttle_payload(operation, charges, fits)

    def _before_send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        raw = request.body
        if operation not in METERED or not isinstance(raw, (bytes, str)):
            return None
        payload = self.decide(operation, json.loads(raw or b"{}"))
        if payload is None:
            return None
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["x-amzn-RequestId"] = "capacity-model"
        return AWSResponse(request.url, 400, headers, _Raw(json.dumps(payload).encode()))


METERED = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "GetItem",
        "Query",
        "TransactWriteItems",
        "TransactGetItems",
        "BatchWriteItem",
        "BatchGetItem",
    }
)


def _hash_key(schema: list[dict[str, str]]) -> str:
    return next(part["AttributeName"] for part in schema if part["KeyType"] == "HASH")


def _value(item: dict[str, Any], attribute: str) -> str:
    return json.dumps(item.get(attribute), sort_keys=True)


def _query_hash_value(spec: dict[str, Any], attribute: str) -> str:
    """The partition key value a Query names (``#n = :v`` or ``attr = :v`` in its condition)."""
    names = spec.get("ExpressionAttributeNames") or {}  # "#pool" -> "pool"
    values = spec.get("ExpressionAttributeValues") or {}
    condition = spec.get("KeyConditionExpression", "")
    for clause in condition.replace("(", " ").replace(")", " ").split(" AND "):
        left, _, right = clause.partition("=")
        left, right = left.strip(), right.strip()
        if names.get(left, left) == attribute:
            return json.dumps(values.get(right), sort_keys=True)
        if names.get(right, right) == attribute:
            return json.dumps(values.get(left), sort_keys=True)
    return "?"


def throttle_payload(operation: str, charges: list[Charge], fits: list[bool]) -> dict[str, Any]:
    """The body of AWS's answer to a request over its keys' limits."""
    (table, index, _, kind), _units = next(c for c, ok in zip(charges, fits, strict=True) if not ok)
    reason = f"{'Index' if index else 'Table'}{'Write' if kind == 'W' else 'Read'}"
    reason += "KeyRangeThroughputExceeded"
    resource = f"arn:aws:dynamodb:local:000000000000:table/{table}"
    if index:
        resource += f"/index/{index}"
    if operation in ("TransactWriteItems", "TransactGetItems"):
        reasons = []
        # One reason per transaction element; an element may carry several charges (an index).
        per_item = _charges_per_element(operation, charges, fits)
        for ok in per_item:
            reasons.append(
                {"Code": "None"}
                if ok
                else {"Code": "ThrottlingError", "Message": "Throughput exceeds the capacity"}
            )
        payload = {
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "message": "Transaction cancelled, please refer cancellation reasons for specific "
            f"reasons [{', '.join(r['Code'] for r in reasons)}]",
            "CancellationReasons": reasons,
        }
    else:
        payload = {
            "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
            "message": "Throughput exceeds the current capacity for one or more partition keys",
            "ThrottlingReasons": [{"reason": reason, "resource": resource}],
        }
    return payload


def _charges_per_element(operation: str, charges: list[Charge], fits: list[bool]) -> list[bool]:
    """Fold per-charge flags back onto transaction elements (a Put may charge an index too)."""
    out: list[bool] = []
    previous_table_key: tuple[str, str] | None = None
    for ((table, index, _, _), _), ok in zip(charges, fits, strict=True):
        if index and out and previous_table_key and previous_table_key[0] == table:
            out[-1] = out[-1] and ok
            continue
        out.append(ok)
        previous_table_key = (table, index)
    return out


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body
