"""Creating a sku's units gives up with an error that says what happened (not an invented cause)."""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.inventory import Inventory
from turnstile_ddb import errors, retry, transact


def test_unit_creation_that_loses_every_attempt_raises_lost_every_race(monkeypatch):
    # Given an inventory whose every creation transaction is cancelled on one unit
    # (so the attempts run out before the chunk's units are all written or found)
    sent: list[int] = []

    def cancelled(client: Any, items: list[dict[str, Any]], **_: Any) -> None:
        sent.append(len(items))
        failed = transact.Reason(code="ConditionalCheckFailed", message="", item=None)
        others = [transact.Reason(code="None", message="", item=None)] * (len(items) - 1)
        raise transact.Cancelled([failed, *others])

    monkeypatch.setattr(transact, "transact_write", cancelled)
    stock = Inventory(
        client=None, table="inventory", summary_table="summary", backoff=retry.Backoff(attempts=3)
    )
    items = [{"pk": "sku", "sk": f"u#{i}"} for i in range(5)]
    # When it puts five units with three attempts
    with pytest.raises(errors.LostEveryRace) as gave_up:
        stock._put_new(items)
    # Then it says what it was doing and how often it tried, with the last cancellation as cause
    assert sent == [5, 4, 3]
    assert gave_up.value.attempts == 3 and isinstance(gave_up.value.last, transact.Cancelled)
    assert "creating 2 unit(s) of inventory" in str(gave_up.value)
    assert isinstance(gave_up.value, retry.RetriesExhausted)
