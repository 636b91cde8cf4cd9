"""turnstile.claims paths DynamoDB Local cannot produce (it never reports a TransactionConflict)."""

from __future__ import annotations

from typing import Any

import pytest
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


@pytest.mark.parametrize(
    "code", ["ConditionalCheckFailedException", "TransactionConflictException"]
)
def test_a_unit_someone_else_is_changing_is_skipped_not_waited_for(code):
    # Given a unit whose claim fails because another writer has it
    client = FakeClient(code)
    # When it is claimed
    won = claims.claim(
        client, UNITS, {"sku": "s", "sk": "u"}, holder="h", now_ms=1, until_ms=2, backoff=FAST
    )
    # Then the claim reports a loss after exactly one attempt (SKIP LOCKED: no retry, no wait)
    assert won is False
    assert len(client.updates) == 1


def test_other_errors_are_not_mistaken_for_a_lost_race():
    # Given a claim that fails for a reason that is not contention
    client = FakeClient("ValidationException")
    # Then it surfaces
    with pytest.raises(ClientError):
        claims.claim(
            client, UNITS, {"sku": "s", "sk": "u"}, holder="h", now_ms=1, until_ms=2, backoff=FAST
        )


def test_a_release_is_conditional_on_the_holder():
    # Given a unit now held by someone else
    client = FakeClient("ConditionalCheckFailedException")
    # When the old holder releases it
    current = claims.release(
        client, UNITS, {"sku": "s", "sk": "u"}, holder="old", ticket=7, backoff=FAST
    )
    # Then nothing is freed and the caller learns it did not release
    assert current == {}
    # And the write was conditioned on the old holder: DynamoDB refused it for that reason
    update = client.updates[0]
    names = {value: key for key, value in update.get("ExpressionAttributeNames", {}).items()}
    assert "holder" in names and names["holder"] in update["ConditionExpression"]
    assert {"S": "old"} in update["ExpressionAttributeValues"].values()


def test_free_tickets_sort_before_any_hold_expiry():
    # A free unit's ticket and a held unit's expiry (epoch ms) share one sort key: the largest
    # ticket must be older than any expiry a hold can have (any time after 2020-01-01).
    jan_2020_ms = 1_577_836_800_000
    assert claims.new_ticket(lambda: 0.999999999) < jan_2020_ms
    assert claims.new_ticket(lambda: 0.0) >= 0
