"""Random sequences of the requests turnstile sends, to run against two DynamoDBs and compare.

Used by tests/sim/test_differential.py (moto, as the simulator drives it, against DynamoDB Local).
Hand-written rather than derived from the library because the point is the request *shapes* the
library uses (conditional Put/Update/Delete with its expression subset, ``ReturnValues`` and
``ReturnValuesOnConditionCheckFailure``, TransactWriteItems with cancellation reasons), varied
more than the library's own calls vary them. The generator is seeded: a difference replays.
"""

from __future__ import annotations

import json
import random
from typing import Any

from botocore.exceptions import ClientError

KEY = "pk"
_IGNORED = ("ResponseMetadata", "ConsumedCapacity", "ItemCollectionMetrics")


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


# (UpdateExpression, ConditionExpression or None, the values both use), as the library writes them.
_UPDATES: list[tuple[str, str | None, list[str]]] = [
    ("SET n = n - :a, v = v + :one", "n >= :a", [":a", ":one"]),  # versioned.decrement
    ("SET n = n + :a, v = v + :one", "attribute_exists(n)", [":a", ":one"]),  # increment
    ("SET n = :x, v = :next", "v = :expected", [":x", ":next", ":expected"]),  # version check
    ("SET n = :x, v = :next", "attribute_not_exists(v)", [":x", ":next"]),  # first write
    (  # lease.take: acquire when free
        "SET o = :o, e = :e REMOVE r ADD f :one",
        "attribute_not_exists(pk) OR e < :now",
        [":o", ":e", ":one", ":now"],
    ),
    ("SET e = :zero, r = :now", "o = :o AND f = :f", [":zero", ":now", ":o", ":f"]),  # release
    ("SET lg = list_append(if_not_exists(lg, :empty), :l)", None, [":empty", ":l"]),  # fenced log
    ("SET n = :x", "attribute_not_exists(lf) OR lf < :f", [":x", ":f"]),  # fenced_update
    ("SET lim = :x", "attribute_exists(n)", [":x"]),  # a limit set, so joins meet limits
    ("SET n = n + :one, v = v + :one", "n < lim", [":one"]),  # capacity.join: two attributes
    ("SET n = n - :one, v = v + :one", "n > :zero", [":one", ":zero"]),  # capacity.leave
    (  # slots.book: free, or already this holder's
        "SET h = :o, v = v + :one",
        "attribute_exists(pk) AND (attribute_not_exists(h) OR h = :o)",
        [":o", ":one"],
    ),
    ("REMOVE h SET v = v + :one", "h = :o", [":o", ":one"]),  # slots.release
]
_CONDITIONS = [
    None,
    "attribute_not_exists(pk)",
    "attribute_exists(pk)",
    "v = :expected",
    "n >= :a",
]


class Generator:
    def __init__(self, seed: int, prefix: str, keys: int = 3) -> None:
        self.rng = random.Random(seed)
        self.keys = [f"{prefix}-k{i}" for i in range(keys)]

    def _values(self, names: list[str]) -> dict[str, Any]:
        rng = self.rng
        pool = {
            ":a": _n(rng.randint(1, 3)),
            ":one": _n(1),
            ":x": _n(rng.randint(0, 9)),
            ":next": _n(rng.randint(1, 4)),
            ":expected": _n(rng.randint(1, 4)),
            ":o": {"S": rng.choice(["a", "b"])},
            ":e": _n(rng.randint(0, 20)),
            ":now": _n(rng.randint(0, 20)),
            ":zero": _n(0),
            ":f": _n(rng.randint(0, 4)),
            ":empty": {"L": []},
            ":l": {"L": [_n(rng.randint(0, 9))]},
        }
        return {name: pool[name] for name in names}

    def _key(self) -> dict[str, Any]:
        return {KEY: {"S": self.rng.choice(self.keys)}}

    def _item(self) -> dict[str, Any]:
        rng = self.rng
        item = {**self._key(), "n": _n(rng.randint(0, 9)), "v": _n(rng.randint(1, 4))}
        if rng.random() < 0.3:
            item["lf"] = _n(rng.randint(0, 4))
        if rng.random() < 0.5:
            item["lim"] = _n(rng.randint(0, 9))  # a capacity row's limit
        return item

    def _conditioned(self, parts: dict[str, Any], *, required: bool = False) -> dict[str, Any]:
        """``parts`` with a ConditionExpression (perhaps none, unless ``required``) and its
        values added."""
        condition = self.rng.choice(_CONDITIONS)
        if condition is None and required:
            condition = "attribute_exists(pk)"
        if condition is not None:
            parts["ConditionExpression"] = condition
            names = [v for v in (":expected", ":a") if v in condition]
            if names:
                parts["ExpressionAttributeValues"] = self._values(names)
        return parts

    def _update_parts(self) -> dict[str, Any]:
        update, condition, names = self.rng.choice(_UPDATES)
        parts: dict[str, Any] = {
            "Key": self._key(),
            "UpdateExpression": update,
            "ExpressionAttributeValues": self._values(names),
        }
        if condition is not None:
            parts["ConditionExpression"] = condition
        return parts

    def _failure_image(self, parts: dict[str, Any]) -> dict[str, Any]:
        if "ConditionExpression" in parts and self.rng.random() < 0.7:
            parts["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return parts

    def request(self, table: str) -> tuple[str, dict[str, Any]]:
        """One (operation, parameters)."""
        rng = self.rng
        kind = rng.choice(["put", "update", "update", "delete", "get", "transact", "transact"])
        if kind == "get":
            return "get_item", {"TableName": table, "Key": self._key(), "ConsistentRead": True}
        if kind == "put":
            parts = self._conditioned({"TableName": table, "Item": self._item()})
            parts["ReturnValues"] = rng.choice(["NONE", "ALL_OLD"])
            return "put_item", self._failure_image(parts)
        if kind == "update":
            parts = {"TableName": table, **self._update_parts()}
            # Not UPDATED_NEW: the library never asks for it, and moto answers it with the key too
            # when the update creates the item (DynamoDB: only the attributes set; docs/sim.md).
            parts["ReturnValues"] = rng.choice(["NONE", "ALL_NEW", "ALL_OLD"])
            return "update_item", self._failure_image(parts)
        if kind == "delete":
            parts = self._conditioned({"TableName": table, "Key": self._key()})
            parts["ReturnValues"] = rng.choice(["NONE", "ALL_OLD"])
            return "delete_item", self._failure_image(parts)
        return "transact_write_items", {"TransactItems": self._transaction(table)}

    def _transaction(self, table: str) -> list[dict[str, Any]]:
        rng = self.rng
        count = rng.randint(1, 3)
        # Distinct keys, as the library's transactions have: one key twice is refused by DynamoDB
        # and moto (ValidationException) but not by DynamoDB Local (see docs/sim.md).
        keys = rng.sample(self.keys, count)
        elements = []
        for key in keys:
            kind = rng.choice(["Update", "Update", "Put", "ConditionCheck", "Delete"])
            if kind == "Update":
                parts = {"TableName": table, **self._update_parts()}
            elif kind == "Put":
                parts = self._conditioned({"TableName": table, "Item": self._item()})
            else:
                required = kind == "ConditionCheck"
                parts = self._conditioned(
                    {"TableName": table, "Key": self._key()}, required=required
                )
            if "Key" in parts:
                parts["Key"] = {KEY: {"S": key}}
            else:
                parts["Item"][KEY] = {"S": key}
            elements.append({kind: self._failure_image(parts)})
        return elements


def outcome(client: Any, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """What a request answered, in a form two DynamoDBs can be compared by: the response without
    metadata, or the error code with the ALL_OLD image and per-item cancellation reasons (codes
    and items; messages are free text and differ)."""
    try:
        response = getattr(client, operation)(**params)
    except ClientError as exc:
        body: Any = exc.response
        answer: dict[str, Any] = {"error": body.get("Error", {}).get("Code")}
        if "Item" in body:
            answer["item"] = body["Item"]
        if "CancellationReasons" in body:
            answer["reasons"] = [
                {k: v for k, v in reason.items() if k != "Message"}
                for reason in body["CancellationReasons"]
            ]
        return answer
    answer = {k: v for k, v in response.items() if k not in _IGNORED}
    if "Responses" in answer:  # BatchGetItem answers in no particular order
        answer["Responses"] = {
            table: sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
            for table, items in answer["Responses"].items()
        }
    return answer


STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


def create_streamed_table(client: Any, name: str) -> None:
    """The sequences' table with a stream of new and old images, as the stack's streamed tables."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification=STREAM,
    )


def local_stream(client: Any, streams: Any, table: str) -> list[dict[str, Any]]:
    """Every record of ``table``'s stream on DynamoDB Local (its shards, each read to its end)."""
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    shards: list[dict[str, Any]] = []
    start: str | None = None
    while True:
        extra = {"ExclusiveStartShardId": start} if start else {}
        description = streams.describe_stream(StreamArn=arn, **extra)["StreamDescription"]
        shards += description["Shards"]
        start = description.get("LastEvaluatedShardId")
        if not start:
            break
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records += page["Records"]
            if not page["Records"]:
                break  # an open shard answers an iterator forever: stop at its end
            iterator = page.get("NextShardIterator")
    return records


def changes_by_key(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per item key, its records in sequence-number order, as what a consumer reads of them: the
    event name, the keys and both images (record ids, times and sizes left out)."""
    ordered = sorted(records, key=lambda record: int(record["dynamodb"]["SequenceNumber"]))
    out: dict[str, list[dict[str, Any]]] = {}
    for record in ordered:
        change = record["dynamodb"]
        key = json.dumps(change["Keys"], sort_keys=True)
        out.setdefault(key, []).append(
            {
                "eventName": record["eventName"],
                "Keys": change["Keys"],
                "OldImage": change.get("OldImage"),
                "NewImage": change.get("NewImage"),
            }
        )
    return out


def table_contents(client: Any, table: str) -> list[dict[str, Any]]:
    items = client.scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: item[KEY]["S"])


# The extended sequences: a table with a sort key and a sparse global secondary index, read the
# way claims and sharded counters read (Query on the index with BETWEEN, a direction, a Limit and
# ExclusiveStartKey; BatchGetItem), written with the rest of the expression subset. Run against
# the simulator's own model and DynamoDB Local only: moto answers some of these differently
# (docs/sim.md).
INDEXED = "pool"  # the index's partition key; items without it are not in the index (sparse)
INDEX = "byTicket"
KEYS_INDEX = "byTicketKeys"
SORT = "sk"


def create_indexed_table(client: Any, name: str, *, stream: bool = False) -> None:
    client.create_table(
        **({"StreamSpecification": STREAM} if stream else {}),
        TableName=name,
        KeySchema=[
            {"AttributeName": KEY, "KeyType": "HASH"},
            {"AttributeName": SORT, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": KEY, "AttributeType": "S"},
            {"AttributeName": SORT, "AttributeType": "N"},
            {"AttributeName": INDEXED, "AttributeType": "S"},
            {"AttributeName": "t", "AttributeType": "N"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": INDEX,
                "KeySchema": [
                    {"AttributeName": INDEXED, "KeyType": "HASH"},
                    {"AttributeName": "t", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {  # as claims' index: keys only
                "IndexName": KEYS_INDEX,
                "KeySchema": [
                    {"AttributeName": INDEXED, "KeyType": "HASH"},
                    {"AttributeName": "t", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        BillingMode="PAY_PER_REQUEST",
    )


_EXTENDED_UPDATES: list[tuple[str, str | None, list[str]]] = [
    ("SET #p = :p, t = :t", "attribute_not_exists(#p)", [":p", ":t"]),  # a unit becomes free
    ("REMOVE #p, t SET h = :h", "#p = :p AND t BETWEEN :lo AND :hi", [":p", ":h", ":lo", ":hi"]),
    (
        "ADD n :a, tags :tag",
        "size(tags) < :three OR attribute_not_exists(tags)",
        [":a", ":tag", ":three"],
    ),
    ("DELETE tags :tag SET m.c = :a", "attribute_exists(m)", [":tag", ":a"]),
    ("SET m = if_not_exists(m, :map), n = if_not_exists(n, :a) + :a", None, [":map", ":a"]),
    (
        "SET h = :h",
        "begins_with(h, :pre) OR h IN (:p, :h) OR NOT attribute_exists(h)",
        [":h", ":pre", ":p"],
    ),
    ("SET lg[0] = :a", "attribute_type(lg, :list) AND contains(lg, :a)", [":a", ":list"]),
]


class ExtendedGenerator(Generator):
    def __init__(self, seed: int, prefix: str) -> None:
        super().__init__(seed, prefix, keys=3)
        self.sorts = [0, 1, 2]
        self.made = 0

    def _ticket(self) -> dict[str, str]:
        """An index sort key, unique: the order of items sharing one is unspecified in DynamoDB
        (the model orders them by table key, DynamoDB Local otherwise), and claims' tickets are
        drawn from a range wide enough that they do not repeat."""
        self.made += 1
        return _n(self.rng.randint(0, 9) * 1000 + self.made)

    def _values(self, names: list[str]) -> dict[str, Any]:
        rng = self.rng
        extra = {
            ":p": {"S": rng.choice(["pa", "pb"])},
            ":t": self._ticket(),
            ":h": {"S": rng.choice(["ha", "hb", "x1"])},
            ":lo": _n(rng.randint(0, 4) * 1000),
            ":hi": _n(rng.randint(4, 9) * 1000 + 999),
            ":tag": {"SS": rng.sample(["r", "g", "b"], rng.randint(1, 2))},
            ":three": _n(3),
            ":map": {"M": {"c": _n(0)}},
            ":pre": {"S": rng.choice(["h", "x"])},
            ":list": {"S": "L"},
        }
        base = super()._values([n for n in names if n not in extra])
        return {**base, **{name: extra[name] for name in names if name in extra}}

    def _key(self) -> dict[str, Any]:
        return {KEY: {"S": self.rng.choice(self.keys)}, SORT: _n(self.rng.choice(self.sorts))}

    def _item(self) -> dict[str, Any]:
        rng = self.rng
        item = {**self._key(), "n": _n(rng.randint(0, 9)), "v": _n(rng.randint(1, 4))}
        if rng.random() < 0.6:
            item[INDEXED] = {"S": rng.choice(["pa", "pb"])}
            item["t"] = self._ticket()
        if rng.random() < 0.3:
            item["lg"] = {"L": [_n(rng.randint(0, 3))]}
        return item

    def _update_parts(self) -> dict[str, Any]:
        if self.rng.random() < 0.5:
            return super()._update_parts()
        update, condition, names = self.rng.choice(_EXTENDED_UPDATES)
        parts: dict[str, Any] = {
            "Key": self._key(),
            "UpdateExpression": update,
            "ExpressionAttributeValues": self._values(names),
        }
        if "#p" in update or (condition and "#p" in condition):
            parts["ExpressionAttributeNames"] = {"#p": INDEXED}
        if condition is not None:
            parts["ConditionExpression"] = condition
        return parts

    def request(self, table: str) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        roll = rng.random()
        if roll < 0.25:
            return "query", self._query(table)
        if roll < 0.35:
            keys = rng.sample([(k, s) for k in self.keys for s in self.sorts], rng.randint(1, 4))
            request: dict[str, Any] = {"Keys": [{KEY: {"S": k}, SORT: _n(s)} for k, s in keys]}
            if rng.random() < 0.5:
                request["ProjectionExpression"] = "#k, n, t"
                request["ExpressionAttributeNames"] = {"#k": KEY}
            return "batch_get_item", {"RequestItems": {table: request}}
        operation, params = super().request(table)
        if operation == "transact_write_items":  # distinct (key, sort) pairs, as DynamoDB needs
            seen = set()
            kept = []
            for element in params["TransactItems"]:
                ((_, parts),) = element.items()
                key = parts.get("Key") or {KEY: parts["Item"][KEY], SORT: parts["Item"][SORT]}
                marker = (key[KEY]["S"], key[SORT]["N"])
                if marker not in seen:
                    seen.add(marker)
                    kept.append(element)
            params["TransactItems"] = kept
        return operation, params

    def _transaction(self, table: str) -> list[dict[str, Any]]:
        elements = super()._transaction(table)
        for element in elements:
            ((_, parts),) = element.items()
            if "Key" in parts:
                parts["Key"][SORT] = _n(self.rng.choice(self.sorts))
        return elements

    def _query(self, table: str) -> dict[str, Any]:
        rng = self.rng
        if rng.random() < 0.6:
            low = rng.randint(0, 5)
            params: dict[str, Any] = {
                "TableName": table,
                "IndexName": rng.choice([INDEX, KEYS_INDEX]),
                "KeyConditionExpression": "#p = :p AND t BETWEEN :lo AND :hi",
                "ExpressionAttributeNames": {"#p": INDEXED},
                "ExpressionAttributeValues": {
                    ":p": {"S": rng.choice(["pa", "pb"])},
                    ":lo": _n(low * 1000),
                    ":hi": _n((low + rng.randint(0, 5)) * 1000 + 999),
                },
            }
        else:
            params = {
                "TableName": table,
                "KeyConditionExpression": f"{KEY} = :k AND {SORT} >= :s",
                "ExpressionAttributeValues": {
                    ":k": {"S": rng.choice(self.keys)},
                    ":s": _n(rng.randint(0, 2)),
                },
                "ConsistentRead": True,
            }
        params["ScanIndexForward"] = rng.random() < 0.5
        if rng.random() < 0.5:
            params["Limit"] = rng.randint(1, 3)
        if rng.random() < 0.3:
            params["FilterExpression"] = "n > :f"
            params["ExpressionAttributeValues"][":f"] = _n(rng.randint(0, 5))
        return params


def pages(client: Any, params: dict[str, Any]) -> list[Any]:
    """Every page of a query, following LastEvaluatedKey, as :func:`outcome` answers each."""
    answers = []
    params = dict(params)
    for _ in range(20):
        answer = outcome(client, "query", params)
        answers.append(answer)
        last = answer.get("LastEvaluatedKey")
        if last is None:
            break
        params["ExclusiveStartKey"] = last
    return answers


def indexed_contents(client: Any, table: str) -> list[dict[str, Any]]:
    items = client.scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: (item[KEY]["S"], int(item[SORT]["N"])))


class RowsGenerator:
    """Sequences on capacity rows and slots, as :mod:`turnstile_ddb.capacity` and
    :mod:`turnstile_ddb.slots` write them (the signup workload's requests): rows created with a
    count, a limit and a version; joins (``count < limit``, an attribute against an attribute) and
    leaves (``count > 0``), alone or in a transaction with the member's put or delete; slot
    bookings (free, or already this holder's) and releases (only by the holder); consistent
    reads. Every key is a row or a slot, so most requests meet an item to decide on."""

    def __init__(self, seed: int, prefix: str) -> None:
        self.rng = random.Random(seed)
        self.rows = [f"{prefix}-row{i}" for i in range(2)]
        self.members = [f"{prefix}-m{i}" for i in range(3)]
        self.slots = [f"{prefix}-slot{i}" for i in range(2)]

    def _key(self, names: list[str]) -> dict[str, Any]:
        return {KEY: {"S": self.rng.choice(names)}}

    def _row(self) -> dict[str, Any]:
        rng = self.rng
        return {"n": _n(rng.randint(0, 3)), "lim": _n(rng.randint(0, 3)), "v": _n(1)}

    def _join(self, table: str) -> dict[str, Any]:
        return {
            "TableName": table,
            "Key": self._key(self.rows),
            "UpdateExpression": "SET #count = #count + :one, #version = #version + :one",
            "ConditionExpression": "#count < #limit",
            "ExpressionAttributeNames": {"#count": "n", "#limit": "lim", "#version": "v"},
            "ExpressionAttributeValues": {":one": _n(1)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def _leave(self, table: str) -> dict[str, Any]:
        return {
            "TableName": table,
            "Key": self._key(self.rows),
            "UpdateExpression": "SET #count = #count - :one, #version = #version + :one",
            "ConditionExpression": "#count > :zero",
            "ExpressionAttributeNames": {"#count": "n", "#version": "v"},
            "ExpressionAttributeValues": {":one": _n(1), ":zero": _n(0)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def _holder(self) -> dict[str, Any]:
        return {"S": self.rng.choice(["ha", "hb"])}

    def request(self, table: str) -> tuple[str, dict[str, Any]]:
        """One (operation, parameters)."""
        rng = self.rng
        kind = rng.choice(
            ["row", "join", "join", "leave", "join+member", "leave+member", "book", "book",
             "release", "get"]
        )  # fmt: skip
        if kind == "get":
            names = rng.choice([self.rows, self.members, self.slots])
            return "get_item", {"TableName": table, "Key": self._key(names), "ConsistentRead": True}
        if kind == "row":
            names = rng.choice([self.rows, self.slots])
            parts: dict[str, Any] = {
                "TableName": table,
                "Item": {**self._key(names), **self._row()},
            }
            if rng.random() < 0.7:  # as capacity rows and slots are created: only if new
                parts["ConditionExpression"] = "attribute_not_exists(#pk)"
                parts["ExpressionAttributeNames"] = {"#pk": KEY}
            return "put_item", parts
        if kind in ("join", "leave"):
            parts = self._join(table) if kind == "join" else self._leave(table)
            parts["ReturnValues"] = rng.choice(["NONE", "ALL_NEW"])
            return "update_item", parts
        if kind in ("join+member", "leave+member"):
            row = self._join(table) if kind == "join+member" else self._leave(table)
            member: dict[str, Any]
            if kind == "join+member":
                member = {
                    "Put": {
                        "TableName": table,
                        "Item": {**self._key(self.members), "u": self._holder()},
                        "ConditionExpression": "attribute_not_exists(#pk)",
                        "ExpressionAttributeNames": {"#pk": KEY},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            else:
                member = {
                    "Delete": {
                        "TableName": table,
                        "Key": self._key(self.members),
                        "ConditionExpression": "attribute_exists(#pk)",
                        "ExpressionAttributeNames": {"#pk": KEY},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            return "transact_write_items", {"TransactItems": [{"Update": row}, member]}
        if kind == "book":
            return "update_item", {
                "TableName": table,
                "Key": self._key(self.slots),
                "UpdateExpression": "SET #holder = :holder, #version = #version + :one",
                "ConditionExpression": (
                    "attribute_exists(#pk) AND (attribute_not_exists(#holder) OR #holder = :holder)"
                ),
                "ExpressionAttributeNames": {"#pk": KEY, "#holder": "h", "#version": "v"},
                "ExpressionAttributeValues": {":holder": self._holder(), ":one": _n(1)},
                "ReturnValues": "ALL_NEW",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        return "update_item", {
            "TableName": table,
            "Key": self._key(self.slots),
            "UpdateExpression": "REMOVE #holder SET #version = #version + :one",
            "ConditionExpression": "#holder = :holder",
            "ExpressionAttributeNames": {"#holder": "h", "#version": "v"},
            "ExpressionAttributeValues": {":holder": self._holder(), ":one": _n(1)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
