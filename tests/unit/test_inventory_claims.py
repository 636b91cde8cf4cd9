"""turnstile_ddb.claims paths DynamoDB Local cannot produce (it never reports a
TransactionConflict)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from turnstile_ddb import claims, errors, retry

UNITS = claims.UnitTable(table="t", index="claimable", key_attrs=("sku", "sk"))
SPARSE = 16  # a pool whose complete read shows fewer claimable units is small (PoolHints)
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


def test_free_units_sort_before_any_hold_expiry():
    # A free unit's claimable-at value and a held unit's expiry (epoch ms) share one sort key: the
    # largest value must be older than any expiry a hold can have (any time after 2020-01-01).
    jan_2020_ms = 1_577_836_800_000
    assert claims.new_claimable_at(lambda: 0.999999999) < jan_2020_ms
    assert claims.new_claimable_at(lambda: 0.0) >= 0


def test_a_pool_is_read_whole_only_once_seen_small_and_from_a_pivot_once_seen_large():
    hints = claims.PoolHints(clock=lambda: 0.0)
    # Never seen: not known small (read from a pivot, as a large pool)
    assert not hints.is_sparse("p")
    # A complete read showing fewer than SPARSE units: small, read whole from then on
    hints.seen("p", False, SPARSE - 1)
    assert hints.is_sparse("p")
    # A read that stopped early says nothing of the size
    hints.seen("p", False)
    assert hints.is_sparse("p")
    # A read showing at least SPARSE units: large again
    hints.seen("p", False, SPARSE)
    assert not hints.is_sparse("p")
    # Emptiness still orders the pools: the empty one comes last
    hints.seen("q", True, 0)
    assert hints.is_sparse("q")
    assert hints.order(["q", "p"], lambda: 0.0)[-1] == "q"


def test_a_pool_is_guessed_into_only_while_nothing_says_it_is_short():
    now = [0.0]
    hints = claims.PoolHints(clock=lambda: now[0], throttle_seconds=1.0, miss_seconds=10.0)
    # Nothing known: a guess may be tried
    assert hints.may_guess("p")
    # A guess that missed: not for miss_seconds
    hints.missed("p")
    now[0] = 9.9
    assert not hints.may_guess("p")
    now[0] = 10.0
    assert hints.may_guess("p")
    # Throttled lately: not (its key is hot: the claim would throttle too)
    hints.throttled("p")
    assert not hints.may_guess("p")
    now[0] = 11.0
    assert hints.may_guess("p")
    # Seen small, or empty, by a complete read: not, until a read shows it large again
    hints.seen("p", False, SPARSE - 1)
    assert not hints.may_guess("p")
    hints.seen("p", False, SPARSE)
    assert hints.may_guess("p")
    hints.seen("p", True, 0)
    assert not hints.may_guess("p")


class EndlessIndex:
    """A claimable index whose every page is full and has more after it (units that exist but
    are never offered, as while a sku is being created): records each Query."""

    def __init__(self) -> None:
        self.queries: list[dict[str, Any]] = []

    def query(self, **request: Any) -> dict[str, Any]:
        self.queries.append(request)
        pool = request["ExpressionAttributeValues"][":pool"]["S"]
        first = len(self.queries) * 1000
        items = [
            {"sku": {"S": pool}, "sk": {"S": f"unit#{first + n:06d}"}}
            for n in range(request["Limit"])
        ]
        return {"Items": items, "LastEvaluatedKey": items[-1]}


def test_a_read_stops_at_its_bound_in_every_pool_and_that_is_no_refusal():
    # Given three pools listing endless units the caller does not accept
    client = EndlessIndex()
    pools = ["s#0", "s#1", "s#2"]
    # When one unit is reserved
    with pytest.raises(claims.Unsettled) as refused:
        claims.reserve(
            client,  # type: ignore[arg-type]
            UNITS,
            pools=pools,
            quantity=1,
            holder=lambda lead: "r",
            now_ms=2_000_000_000_000,
            until_ms=2_000_000_060_000,
            options=claims.ReserveOptions(
                backoff=FAST, hints=claims.PoolHints(), eligible=lambda key: False
            ),
        )
    # Then each pool was read PAGES_PER_POOL pages and no more, and the answer is not NotEnough
    # (the pools were not read to their end): a retryable Unsettled
    per_pool = {pool: 0 for pool in pools}
    for request in client.queries:
        per_pool[request["ExpressionAttributeValues"][":pool"]["S"]] += 1
    assert per_pool == {pool: claims.PAGES_PER_POOL for pool in pools}
    assert not isinstance(refused.value, claims.NotEnough)
    assert isinstance(refused.value, errors.Retryable)
