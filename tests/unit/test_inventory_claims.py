"""turnstile.claims paths DynamoDB Local cannot produce (it never reports a TransactionConflict)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from turnstile import claims, retry

UNITS = claims.UnitTable(table="t", index="claimable", key_attrs=("sku", "sk"))
FAST = retry.Backoff(attempts=2, sleep=lambda _: None)


class FakeClient:
    """Answers UpdateItem with the queued errors (None: success) and records every call."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.updates: list[dict[str, Any]] = []

    def update_item(self, **request: Any) -> dict[str, Any]:
        self.updates.append(request)
        code = self.answers.pop(0)
        if code is not None:
            raise ClientError({"Error": {"Code": code, "Message": code}}, "UpdateItem")
        return {}


def test_free_tickets_sort_before_any_hold_expiry():
    # A free unit's ticket and a held unit's expiry (epoch ms) share one sort key: the largest
    # ticket must be older than any expiry a hold can have (any time after 2020-01-01).
    jan_2020_ms = 1_577_836_800_000
    assert claims.new_ticket(lambda: 0.999999999) < jan_2020_ms
    assert claims.new_ticket(lambda: 0.0) >= 0
