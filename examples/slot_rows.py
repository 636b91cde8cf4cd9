"""Slot rows: a room's hourly slots exist as items before anyone books; twelve people, four slots.

Booking is a conditional update of an existing row (``attribute_not_exists(holder)``), so there is
no phantom row to race for: each slot gets exactly one holder, and a holder resending its booking
finds the slot already its own.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from _local import client, create_table

from turnstile_ddb import retry, slots

ddb = client()
table = create_table(ddb, "room", "slot")
hours = [{"slot": f"room-1#{hour}:00"} for hour in (9, 10, 11, 12)]
slots.create(ddb, table, hours, backoff=retry.Backoff())


def book(person: str) -> str | None:
    taken = slots.book_any(ddb, table, hours, person, backoff=retry.Backoff())
    return None if taken is None else str(taken["slot"])


with ThreadPoolExecutor(max_workers=6) as pool:
    booked = dict(enumerate(pool.map(book, [f"person-{n}" for n in range(12)])))

held = [slot for slot in booked.values() if slot is not None]
assert sorted(held) == sorted(h["slot"] for h in hours)  # every slot once, no slot twice
# A holder whose answer was lost resends its booking: it finds the slot already its own
first = next(n for n, slot in booked.items() if slot == hours[0]["slot"])
resent = slots.book(ddb, table, hours[0], f"person-{first}", backoff=retry.Backoff())
try:
    slots.book(ddb, table, hours[0], "late-comer", backoff=retry.Backoff())
    raise SystemExit("a held slot must be refused")
except slots.SlotTaken:
    pass
nobody = list(booked.values()).count(None)
print(f"{len(held)} booked, {nobody} found none; a resent booking keeps {resent['slot']}")
