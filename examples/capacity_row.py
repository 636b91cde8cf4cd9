"""Capacity row: twenty people try to join an event of five seats; exactly five get in.

A join is one transaction: ``count < limit`` on the event's counter item (incrementing it) plus a
put of the member item with ``attribute_not_exists``. A full event or a second join by the same
person is refused and writes nothing (no write skew).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from _local import client, create_table

from turnstile_ddb import capacity, codec, retry

ddb = client()
table = create_table(ddb, "events", "eventId", sort_key="sk")
ddb.put_item(
    TableName=table,
    Item=codec.encode_item(
        {"eventId": "party", "sk": "#counter", "count": 0, "limit": 5, "version": 0}
    ),
)
seats = capacity.CapacityRow(table=table, key={"eventId": "party", "sk": "#counter"})


def join(person: str) -> str:
    member = capacity.Member(table=table, key={"eventId": "party", "sk": person}, item={})
    try:
        capacity.join(ddb, seats, member, backoff=retry.Backoff(attempts=20))
    except capacity.Full:
        return "full"
    return "joined"


with ThreadPoolExecutor(max_workers=8) as pool:
    outcomes = list(pool.map(join, [f"user#{n}" for n in range(20)]))

try:
    capacity.join(
        ddb,
        seats,
        capacity.Member(table, {"eventId": "party", "sk": "user#0"}, {}),
        backoff=retry.Backoff(),
    )
except (capacity.AlreadyMember, capacity.Full) as refused:
    print(f"a second join is refused: {type(refused).__name__}")

counter = codec.decode_item(
    ddb.get_item(TableName=table, Key=codec.encode_item(seats.key), ConsistentRead=True)["Item"]
)
assert counter is not None
print(
    f"{outcomes.count('joined')} joined, {outcomes.count('full')} refused, count {counter['count']}"
)
assert outcomes.count("joined") == 5 and counter["count"] == 5
