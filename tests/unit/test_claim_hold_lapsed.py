"""A claim whose reply comes after its hold's end (on moto, one thread, an injected clock).

A reservation reads its candidates and sends its claim before its hold ends, but the reply comes
back after it (the client paused, the network was slow): the hold it wrote has already ended. It
must not be answered as held: the units are given back (on condition that this reservation still
holds them) and the answer is ``claims.ClaimHoldLapsed``, a 503 with ``Retry-After`` from the
service. The simulator found it (docs/sim.md, "Found and fixed").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from service import config
from service.domain.inventory import Inventory
from service.handlers import inventory as inventory_handler
from tests.helpers import ADMIN, proxy_event, scan_all
from turnstile_ddb import claims, codec, errors, metrics, retry

T0_MS = 1_800_000_000_000
HOLD_MS = 1_000
POOL = "s#0"
CLAIMS = ("UpdateItem", "TransactWriteItems")


class LateReplies:
    """A client whose claim writes land at once, but whose replies come back after ``late``
    has run (the clock moved on past the hold's end, or a rival wrote meanwhile)."""

    def __init__(self, client: Any, late: Callable[[], None]) -> None:
        self.client = client
        self.late = late
        self.claims = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def _late(self, answer: Any) -> Any:
        self.claims += 1
        if self.claims == 1:  # only the first claim: the give-back that follows is not slowed
            self.late()
        return answer

    def update_item(self, **request: Any) -> Any:
        return self._late(self.client.update_item(**request))

    def transact_write_items(self, **request: Any) -> Any:
        return self._late(self.client.transact_write_items(**request))


def units_table(moto_tables: Any) -> claims.UnitTable:
    return claims.UnitTable(
        table=moto_tables["inventory"],
        index=config.INVENTORY_CLAIMABLE_INDEX,
        key_attrs=("sku", "sk"),
    )


def put_units(client: Any, units: claims.UnitTable, count: int) -> list[dict[str, Any]]:
    keys = [{"sku": POOL, "sk": f"unit#{n:06d}"} for n in range(count)]
    for n, key in enumerate(keys):
        item = claims.new_unit(units, key, POOL, claimable_at=n)
        client.put_item(TableName=units.table, Item=codec.encode_item(item))
    return keys


def unit(client: Any, units: claims.UnitTable, key: dict[str, Any]) -> dict[str, Any]:
    answer = client.get_item(TableName=units.table, Key=codec.encode_item(key), ConsistentRead=True)
    return codec.decode_item(answer["Item"]) or {}


def reserve(client: Any, units: claims.UnitTable, quantity: int, now: list[int]) -> claims.Claimed:
    return claims.reserve(
        client,
        units,
        pools=[POOL],
        quantity=quantity,
        holder=lambda lead: f"late-{lead['sk']}",
        now_ms=T0_MS,
        until_ms=T0_MS + HOLD_MS,
        options=claims.ReserveOptions(
            backoff=retry.Backoff(attempts=2, sleep=lambda _: None),
            rand=lambda: 0.5,
            hints=claims.PoolHints(clock=lambda: 0.0),
            clock_ms=lambda: now[0],
        ),
    )


@pytest.mark.parametrize("quantity", [1, 3])
# (late_ms 0: the reply lands on the hold's exact last millisecond, which has ended: a hold is
# live strictly before its end, as the claim's condition ``#until <= :now`` reads it)
@pytest.mark.parametrize("late_ms", [3_000, 0])
def test_a_claim_answered_after_its_hold_ended_is_given_back_and_answered_lapsed(
    moto_ddb, moto_tables, quantity, late_ms
):
    # Given free units, and a clock that reaches the hold's end (or passes it) between the read
    # of the candidates and the claim's reply (one UpdateItem for one unit, a transaction for three)
    units = units_table(moto_tables)
    keys = put_units(moto_ddb, units, 4)
    now = [T0_MS]

    def pause() -> None:
        now[0] = T0_MS + HOLD_MS + late_ms

    client = LateReplies(moto_ddb, pause)
    lapsed_before = metrics.tally.get("claims", "ClaimHoldLapsed")
    # When a reservation claims them
    with pytest.raises(claims.ClaimHoldLapsed) as lapsed:
        reserve(client, units, quantity, now)
    # Then it is answered as lapsed, a retryable error (as the rounds that run out are), with
    # the units its claim took and gave back; the claim did land
    assert client.claims >= 1
    assert isinstance(lapsed.value, retry.RetriesExhausted)
    assert isinstance(lapsed.value, errors.Retryable)
    assert lapsed.value.given_back
    assert len(lapsed.value.keys) == quantity
    assert lapsed.value.until_ms == T0_MS + HOLD_MS
    # and every unit is free again, no holder left on any
    for key in keys:
        state = unit(moto_ddb, units, key)
        assert state["status"] == claims.FREE, state
        assert "holder" not in state and "members" not in state
    # and the lapse is counted
    assert metrics.tally.get("claims", "ClaimHoldLapsed") == lapsed_before + 1


def test_giving_a_lapsed_claim_back_leaves_a_unit_a_rival_took_since_with_the_rival(
    moto_ddb, moto_tables
):
    # Given two free units, and a reservation of both whose reply comes back after its hold
    # ended, by which time a rival has claimed one of them (its hold had lapsed for the rival)
    units = units_table(moto_tables)
    keys = put_units(moto_ddb, units, 2)
    now = [T0_MS]

    def rival_meanwhile() -> None:
        now[0] = T0_MS + HOLD_MS + 3_000
        rival = claims.reserve(  # the rival's own claim of unit 0, sent on the plain client
            moto_ddb,
            units,
            pools=[POOL],
            quantity=1,
            holder=lambda lead: "rival",
            now_ms=now[0],
            until_ms=now[0] + 60_000,
            options=claims.ReserveOptions(
                backoff=retry.Backoff(attempts=2, sleep=lambda _: None),
                guess=lambda pool, n: [keys[0]],
            ),
        )
        assert rival.holder == "rival"

    client = LateReplies(moto_ddb, rival_meanwhile)
    # When the late reservation is answered
    with pytest.raises(claims.ClaimHoldLapsed) as lapsed:
        reserve(client, units, 2, now)
    # Then its give-back freed only the unit it still held: the rival keeps the other
    assert lapsed.value.given_back
    taken, freed = unit(moto_ddb, units, keys[0]), unit(moto_ddb, units, keys[1])
    assert (taken["status"], taken["holder"]) == (claims.HELD, "rival")
    assert freed["status"] == claims.FREE and "holder" not in freed


def test_a_reservation_answered_after_its_hold_ended_is_a_503_with_retry_after(
    moto_ddb, moto_tables
):
    # Given a sku of three units, served by an Inventory whose clock passes the hold's end while
    # its claim is on its way
    now = [T0_MS / 1000]

    def pause() -> None:
        now[0] += 60.0

    def store(client: Any) -> Inventory:
        return Inventory(
            client=client,
            table=moto_tables["inventory"],
            summary_table=moto_tables["inventory_summary"],
            clock=lambda: now[0],
        )

    store(moto_ddb).create("s9", 3)
    inventory_handler.inventory.set(store(LateReplies(moto_ddb, pause)))
    try:
        # When a reservation of two units is asked for
        event = proxy_event(
            "POST",
            "/inventory/{sku}/reservations",
            "/inventory/s9/reservations",
            body=json.dumps({"quantity": 2, "holdSeconds": 1}),
            params={"sku": "s9"},
            caller=ADMIN,
        )
        response = inventory_handler.handler(event, None)
    finally:
        inventory_handler.inventory.set(None)
    # Then it is 503 HOLD_LAPSED with a Retry-After, not a 201 whose hold had already ended
    body = json.loads(response["body"])
    assert response["statusCode"] == 503, body
    assert body["error"] == "HOLD_LAPSED" and body["message"]
    assert int(response["headers"]["Retry-After"]) >= 1
    # and no unit is left held
    items = [codec.decode_item(raw) or {} for raw in scan_all(moto_ddb, moto_tables["inventory"])]
    statuses = [item["status"] for item in items if str(item["sk"]).startswith("unit#")]
    assert statuses == [claims.FREE] * 3
