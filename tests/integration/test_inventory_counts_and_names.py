"""The inventory domain on DynamoDB Local: each operation counts exactly the metrics it should
(once each: a refusal the library counted is not counted again by the domain), and a unit table
whose attributes are stored under other names works through every operation."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from service.domain.errors import Expired
from service.domain.inventory import Inventory
from tests.helpers import metric_totals, patient

pytestmark = pytest.mark.integration


@dataclass
class Clock:
    now: float = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


def inventory(ddb: Any, tables: Any, clock: Clock, **kwargs: Any) -> Inventory:
    return Inventory(
        client=patient(ddb),
        table=tables["inventory"],
        summary_table=tables["inventory_summary"],
        clock=clock,
        **kwargs,
    )


def emitted(tally: Any) -> Counter[tuple[str, str]]:
    return Counter({key: int(value) for key, value in tally.snapshot().items() if value})


def test_a_confirm_whose_hold_lapsed_counts_confirm_lost_once(ddb, tables, unique):
    # Given one unit held by a reservation whose hold then ran out (nobody took the unit since)
    clock = Clock()
    service = inventory(ddb, tables, clock)
    service.create(unique, 1)
    held = service.reserve(unique, 1, hold_seconds=30)
    clock.now += 31
    # When it is confirmed
    with metric_totals() as tally, pytest.raises(Expired):
        service.confirm(unique, held["reservationId"])
    # Then the refusal is counted exactly once, under claims, and nothing else was counted
    assert emitted(tally) == {("claims", "ConfirmLost"): 1}
