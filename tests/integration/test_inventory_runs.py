"""Multi-unit reservations as runs on DynamoDB Local: a q-unit reservation takes the next q
claimable units of one pool after a random pivot, in one write; it falls back to other pools
only when no pool shows q; when its rounds run out it never says OUT_OF_STOCK while units are
there; threads reserving and cancelling over pools hold no unit twice (history and table)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

import pytest

from local.creator import create_to_ready
from service.domain.errors import NotFound, OutOfStock
from service.domain.inventory import unit_id
from tests.helpers import (
    Faults,
    check_table,
    hold_as_rival,
    metric_totals,
    units_in_table,
)
from tests.helpers import patient_client as client_of
from tests.helpers import pooled_service as service
from turnstile_ddb import claims, codec, retry

pytestmark = pytest.mark.integration


def test_a_reservation_of_three_is_a_run_of_one_pool_in_one_write(dynamodb_local, tables, unique):
    client = client_of(dynamodb_local)
    inventory = service(client, tables)
    # Given 80 units over 4 pools (20 each), nothing held
    create_to_ready(inventory, unique, 80, pools=4)
    before = {u["sk"]: u for u in units_in_table(client, tables["inventory"], unique)}
    for _ in range(5):
        calls = Faults(client)
        # When 3 units are reserved
        reservation = inventory.reserve(unique, 3)
        # Then one write took them: one transaction, no cancellation
        assert calls.sent.get("TransactWriteItems") == 1
        assert "UpdateItem" not in calls.sent
        taken = [before[f"unit#{u}"] for u in reservation["units"]]
        # all three from one pool
        (pool,) = {u["pool"] for u in taken}
        # and adjacent in that pool's ticket order: no other free unit of the pool lies between
        # them (the run may wrap around the end of the ticket range)
        free = sorted(
            u["claimableAt"]
            for u in before.values()
            if u["pool"] == pool
            and u["sk"] not in {f"unit#{n}" for n in reservation["units"]}
            and u.get("status") == "free"
        )
        tickets = sorted(u["claimableAt"] for u in taken)
        inside = [t for t in free if tickets[0] < t < tickets[-1]]
        outside = [t for t in free if t < tickets[0] or t > tickets[-1]]
        assert inside == [] or outside == [], (tickets, free)
        for unit in taken:
            unit["status"] = "held"
    check_table(client, tables, unique, 3)


def test_units_spread_thin_over_pools_are_combined_and_the_refusal_is_exact(
    dynamodb_local, tables, unique
):
    client = client_of(dynamodb_local)
    inventory = service(client, tables)
    # Given 6 units over 6 pools: no pool can serve 2 alone
    create_to_ready(inventory, unique, 6, pools=6)
    # When reservations of 2 are made until refused
    got = [inventory.reserve(unique, 2) for _ in range(3)]
    calls = Faults(client)
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 1)
    # Then every unit was handed out once, each reservation spanning two pools, and the refusal
    # read every pool (one Query each: they are known small now) and wrote nothing
    units = [u for r in got for u in r["units"]]
    assert sorted(units) == [f"{n:06d}" for n in range(6)]
    assert all(int(a) % 6 != int(b) % 6 for a, b in (r["units"] for r in got))
    assert calls.sent == {"Query": 6}


def test_a_pool_that_cannot_serve_falls_back_to_one_that_can(dynamodb_local, tables, unique):
    client = client_of(dynamodb_local)
    inventory = service(client, tables)
    # Given 2 pools of 5 units, one of which has only 1 free
    create_to_ready(inventory, unique, 10, pools=2)
    pool_zero = [
        u
        for u in units_in_table(client, tables["inventory"], unique)
        if int(unit_id(u["sk"])) % 2 == 0
    ]
    for unit in pool_zero[:4]:
        client.update_item(
            TableName=tables["inventory"],
            Key=codec.encode_item({"sku": unit["sku"], "sk": unit["sk"]}),
            UpdateExpression="SET #s = :sold REMOVE claimableAt",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=codec.values(sold="sold"),
        )
    # When 3 are reserved, whichever pool is looked at first
    reservation = inventory.reserve(unique, 3)
    # Then they come from pool 1, the one that can serve 3 in one run
    assert {int(u) % 2 for u in reservation["units"]} == {1}
    # And with 2 left in pool 1 and 1 in pool 0, a reservation of 3 spans both
    last = inventory.reserve(unique, 3)
    assert {int(u) % 2 for u in last["units"]} == {0, 1}
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, 1)


def test_rounds_running_out_is_not_a_refusal_while_units_remain(dynamodb_local, tables, unique):
    client = client_of(dynamodb_local)
    rival = client_of(dynamodb_local)
    inventory = service(client, tables)
    create_to_ready(inventory, unique, 30)
    stolen: list[str] = []

    def steal(params: dict[str, Any], model: Any, **_: Any) -> None:
        # Before every reservation write, a rival holds its first unit
        if model.name != "TransactWriteItems":
            return
        key = codec.decode_item(params["TransactItems"][0]["Update"]["Key"]) or {}
        stolen.append(hold_as_rival(rival, tables["inventory"], key))

    client.meta.events.register("provide-client-params.dynamodb", steal)
    now_ms = int(inventory.clock() * 1000)
    # When every write of a reservation of 2 loses a unit, for all its 3 rounds
    with pytest.raises(retry.RetriesExhausted):
        claims.reserve(
            client,
            inventory.units,
            pools=[f"{unique}#0"],
            quantity=2,
            holder=lambda lead: f"r-{unit_id(lead['sk'])}",
            now_ms=now_ms,
            until_ms=now_ms + 60_000,
            options=claims.ReserveOptions(rounds=3, hints=claims.PoolHints()),
        )
    # Then the answer was "retry" (503 over HTTP), not OUT_OF_STOCK: 27 units are still free
    assert len(stolen) == 3
    assert inventory.exact(unique)["available"] == 27


def test_threads_reserving_and_cancelling_over_pools_hold_no_unit_twice(
    dynamodb_local, tables, unique
):
    client = client_of(dynamodb_local)
    inventory = service(client, tables)
    # Given 45 units over 3 pools, and 12 threads that reserve 1 or 3 units and cancel a third
    # of what they get (those units go back to their pool and are taken again)
    create_to_ready(inventory, unique, 45, pools=3)
    history: list[tuple[str, dict[str, Any]]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(12)

    def worker(seed: int) -> None:
        rand = random.Random(seed)
        barrier.wait()
        for _ in range(12):
            quantity = rand.choice((1, 3))
            try:
                reservation = inventory.reserve(unique, quantity, hold_seconds=600)
            except OutOfStock:
                continue
            except Exception as exc:  # noqa: BLE001 - recorded, then asserted empty
                errors.append(exc)
                continue
            with lock:
                history.append(("reserve", {**reservation, "asked": quantity}))
            if rand.random() < 1 / 3:
                # recorded before it is sent: its units may be free from then on
                with lock:
                    history.append(("cancel", reservation))
                try:
                    inventory.release(unique, reservation["reservationId"])
                except NotFound as exc:
                    errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # Then, replaying the history in order (a reservation recorded when it answered, a cancel
    # when it was sent), no unit was reserved while another reservation still held it, and every
    # reservation held exactly the units it asked for
    holding: dict[str, str] = {}
    for kind, reservation in history:
        rid = reservation["reservationId"]
        if kind == "reserve":
            assert len(set(reservation["units"])) == reservation["asked"]
            for unit in reservation["units"]:
                assert unit not in holding, f"unit {unit} held by {holding.get(unit)} and {rid}"
                holding[unit] = rid
        else:
            for unit in reservation["units"]:
                assert holding.pop(unit) == rid
    # And the table holds exactly the reservations never cancelled, each with its own units
    table = Counter(
        u["holder"]
        for u in units_in_table(client, tables["inventory"], unique)
        if u["status"] == "held"
    )
    assert table == Counter(holding.values())


def _rival_before_first_write(client: Any, rival: Any, table: str, sku: str, extra: int) -> list:
    """Before the reservation's first write is sent, a rival holds every unit it names and
    ``extra`` more of pool 0 (as other requests would, having read the same units earlier)."""
    stolen: list[str] = []

    def steal(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name not in {"UpdateItem", "TransactWriteItems"} or stolen:
            return
        items = params.get("TransactItems") or [{"Update": params}]
        keys = [codec.decode_item(item["Update"]["Key"]) or {} for item in items]
        named = {key["sk"] for key in keys}
        others = [
            {"sku": u["sku"], "sk": u["sk"]}
            for u in units_in_table(rival, table, sku)
            if u["sk"] not in named and u["status"] == "free"
        ]
        for key in keys + others[:extra]:
            stolen.append(hold_as_rival(rival, table, key))

    client.meta.events.register("provide-client-params.dynamodb", steal)
    return stolen


@pytest.mark.parametrize("quantity", [1, 3])
def test_a_lost_round_whose_read_shows_too_few_is_refused_by_that_read(
    dynamodb_local, tables, unique, quantity
):
    client = client_of(dynamodb_local)
    rival = client_of(dynamodb_local)
    inventory = service(client, tables)
    # Given one pool of 6 units, known small (each read of it is one Query)
    create_to_ready(inventory, unique, 6, pools=1)
    assert inventory.pool_hints is not None
    inventory.pool_hints.seen(f"{unique}#0", False, 6)
    # and a rival that, just before the first write, holds the units it names and enough others
    # to leave quantity - 1 free
    stolen = _rival_before_first_write(
        client, rival, tables["inventory"], unique, extra=6 - quantity - (quantity - 1)
    )
    calls = Faults(client)
    # When the reservation is made
    with pytest.raises(OutOfStock):
        inventory.reserve(unique, quantity)
    # Then the read for the replacements, which went through the pool and showed fewer than
    # quantity units, was the refusal itself: two reads in all (before, one Query each), one
    # write, and the refusal was exact (quantity - 1 units are free)
    write = "UpdateItem" if quantity == 1 else "TransactWriteItems"
    assert calls.sent == {"Query": 2, write: 1}
    assert len(stolen) == 6 - (quantity - 1)
    assert inventory.exact(unique)["available"] == quantity - 1


def _losing_its_first_write(
    dynamodb_local: Any, tables: Any, unique: str, **settings: Any
) -> tuple[Any, Any, list]:
    """A service of 10 units in one pool whose first write loses to a rival (guess=False: the
    unit it loses is one a read showed, whose taker may still be writing)."""
    client = client_of(dynamodb_local)
    inventory = service(client, tables, guess=False, **settings)
    create_to_ready(inventory, unique, 10, pools=1)
    rival = client_of(dynamodb_local)
    stolen = _rival_before_first_write(client, rival, tables["inventory"], unique, extra=0)
    return client, inventory, stolen


def test_a_lost_round_waits_its_lost_writes_time_and_some_before_reading_again(
    dynamodb_local, tables, unique
):
    events: list[Any] = []
    backoff = retry.Backoff(sleep=lambda seconds: events.append(("sleep", seconds)))
    # (rand 0: no jitter, the shortest wait there is)
    client, inventory, stolen = _losing_its_first_write(
        dynamodb_local, tables, unique, backoff=backoff, rand=lambda: 0.0
    )
    writes_took: list[float] = []

    def record(model: Any, **_: Any) -> None:
        events.append(model.name)
        if model.name == "UpdateItem":
            writes_took.append(-backoff.clock())

    def answered(model: Any, **_: Any) -> None:
        if model.name == "UpdateItem":
            writes_took[-1] += backoff.clock()

    client.meta.events.register("before-call.dynamodb", record)
    client.meta.events.register("after-call.dynamodb", answered)
    with metric_totals() as tally:
        # When a reservation of one unit loses its first write to the rival
        reservation = inventory.reserve(unique, 1)
    # Then, after the lost write and before the read for the replacement, it waited at least as
    # long as that write took (the rival's write, sent at about the same time, has landed by
    # then) and at most a second, and then took another unit
    writes = [i for i, event in enumerate(events) if event == "UpdateItem"]
    assert len(writes) == 2
    naps = [(i, e[1]) for i, e in enumerate(events) if isinstance(e, tuple)]
    assert len(naps) == 1
    (at, seconds), lost = naps[0], writes[0]
    assert lost < at < writes[1]
    assert "Query" in events[at + 1 : writes[1]]
    assert min(writes_took[0], 1.0) <= seconds <= 1.0
    assert tally.get("claims", "ClaimBackoff") == 1
    assert reservation["units"] != stolen


def test_a_reservation_that_outlasts_its_hold_writes_no_more_and_answers_retry(
    dynamodb_local, tables, unique
):
    # Given a clock that moves on 10 s once the first write is answered (a request slowed by
    # throttles and lost rounds past its 1 s hold)
    now = [time.time()]
    client, inventory, stolen = _losing_its_first_write(
        dynamodb_local,
        tables,
        unique,
        backoff=retry.Backoff(sleep=lambda seconds: None),
        clock=lambda: now[0],
    )
    sent: list[str] = []

    def answered(model: Any, **_: Any) -> None:
        sent.append(model.name)
        if model.name == "UpdateItem":
            now[0] += 10

    client.meta.events.register("after-call.dynamodb", answered)
    with metric_totals() as tally, pytest.raises(retry.RetriesExhausted):
        # When its first write loses to the rival
        inventory.reserve(unique, 1, hold_seconds=1)
    # Then it wrote nothing more: a hold written now would have lapsed before the answer
    assert sent.count("UpdateItem") == 1
    assert tally.get("claims", "ClaimHoldLapsed") == 1
    assert len(stolen) == 1
    assert inventory.exact(unique)["reserved"] == 1  # the rival's


def test_one_unit_of_a_pool_with_no_bad_news_is_claimed_without_a_read(
    dynamodb_local, tables, unique
):
    client = client_of(dynamodb_local)
    inventory = service(client, tables)
    # Given 40 units over 4 pools, of which this process knows nothing bad
    create_to_ready(inventory, unique, 40, pools=4)
    inventory.header(unique)  # cached, as in a warm Lambda
    calls = Faults(client)
    sent = []
    with metric_totals() as tally:
        # When one unit is reserved, five times, each given back before the next (so that a
        # random guess cannot name a unit an earlier reservation holds)
        for _ in range(5):
            calls.sent.clear()
            reservation = inventory.reserve(unique, 1)
            sent.append(dict(calls.sent))
            inventory.release(unique, reservation["reservationId"])
    # Then each was one conditional UpdateItem of a unit it named (no Query)
    assert sent == [{"UpdateItem": 1}] * 5
    assert tally.get("claims", "ClaimGuess") == 5
    assert tally.get("claims", "ClaimGuessMiss") == 0
    check_table(client, tables, unique, 1)


def test_a_guess_that_misses_reads_the_pool_and_stops_guessing_there(
    dynamodb_local, tables, unique
):
    client = client_of(dynamodb_local)
    rival = client_of(dynamodb_local)
    # Given 2 units in one pool, unit 0 held by a rival, and a guess that names unit 0
    inventory = service(client, tables, rand=lambda: 0.0)
    create_to_ready(inventory, unique, 2, pools=1)
    inventory.header(unique)
    hold_as_rival(rival, tables["inventory"], {"sku": f"{unique}#0", "sk": "unit#000000"})
    calls = Faults(client)
    with metric_totals() as tally:
        # When one unit is reserved
        reservation = inventory.reserve(unique, 1)
        # Then the guess missed (a failed write), the pool was read and the free unit taken
        assert reservation["units"] == ["000001"]
        assert calls.sent.get("UpdateItem") == 2
        assert calls.sent.get("Query", 0) >= 1
        assert tally.get("claims", "ClaimGuessMiss") == 1
        # And the next reservation reads first (no guess), and its refusal is exact
        calls.sent.clear()
        with pytest.raises(OutOfStock):
            inventory.reserve(unique, 1)
        assert calls.sent == {"Query": 1}
        assert tally.get("claims", "ClaimGuess") == 1
