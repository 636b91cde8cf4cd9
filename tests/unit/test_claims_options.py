"""turnstile_ddb.claims without process-wide state: hints and caches are the caller's, bounded,
and passed in a ReserveOptions; the old names and keywords still work, with a warning."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from turnstile_ddb import claims, retry
from turnstile_ddb.deprecation import TurnstileDeprecationWarning

UNITS = claims.UnitTable(table="t", index="claimable", key_attrs=("sku", "sk"))
FAST = retry.Backoff(attempts=2, sleep=lambda _: None)
NOW_MS = 2_000_000_000_000
HALF = 0.5  # a constant "random" number: the pivot of a read is then 2**19


class SmallPool:
    """A claimable index of three free units in every pool, read whole by any Query; every claim
    succeeds. Records the ``:low`` end of each Query (0: a whole-range read)."""

    def __init__(self) -> None:
        self.lows: list[int] = []

    def query(self, **request: Any) -> dict[str, Any]:
        values = request["ExpressionAttributeValues"]
        self.lows.append(int(values[":low"]["N"]))
        pool = values[":pool"]["S"]
        return {"Items": [{"sku": {"S": pool}, "sk": {"S": f"u#{n}"}} for n in range(3)]}

    def update_item(self, **request: Any) -> dict[str, Any]:
        return {}


def reserve_one(client: SmallPool, options: claims.ReserveOptions | None) -> claims.Claimed:
    return claims.reserve(
        client,  # type: ignore[arg-type]
        UNITS,
        pools=["s#0"],
        quantity=1,
        holder=lambda lead: "r",
        now_ms=NOW_MS,
        until_ms=NOW_MS + 60_000,
        options=options,
    )


def test_injected_hints_carry_what_a_reservation_saw_to_the_next_one():
    # Given hints the caller built, passed to two reservations of a small pool
    client = SmallPool()
    hints = claims.PoolHints()
    options = claims.ReserveOptions(backoff=FAST, rand=lambda: HALF, hints=hints)
    # When the first reads the pool from a pivot and sees it whole with 3 units
    reserve_one(client, options)
    # Then the hints know it is small, and the second reads it in one whole range
    assert hints.is_sparse("s#0")
    reserve_one(client, options)
    assert client.lows[0] == 2**19
    assert client.lows[-1] == 0


def test_without_hints_nothing_is_remembered_between_reservations():
    # Given no hints (the default options but for the backoff and the randomness)
    client = SmallPool()
    options = claims.ReserveOptions(backoff=FAST, rand=lambda: HALF)
    # When two reservations read the same small pool
    reserve_one(client, options)
    first = len(client.lows)
    reserve_one(client, options)
    # Then the second reads it as the first did: from a pivot, knowing nothing of it
    assert client.lows[first] == client.lows[0] == 2**19
    assert options.hints is None


def test_the_module_keeps_no_hints_or_cache_of_its_own():
    # Nothing a reservation could learn into lives in the module (only names deprecated for
    # removal build one, on their first use)
    state = [v for v in vars(claims).values() if isinstance(v, claims.PoolHints | claims.UnitCache)]
    assert state == []
    assert "hints" not in vars(claims)


def test_pool_hints_keep_news_of_at_most_max_pools_the_most_recent():
    # Given hints bounded to 8 pools
    hints = claims.PoolHints(max_pools=8, clock=lambda: 0.0)
    # When 10,000 distinct pools are throttled, seen and missed
    for n in range(10_000):
        hints.throttled(f"p{n}")
        hints.seen(f"q{n}", True, 0)
        hints.missed(f"r{n}")
    # Then 8 pools are known: the last ones heard of; the first ones are forgotten
    assert hints.remembered_pools() == 8
    assert not hints.may_guess("r9999")
    assert hints.is_sparse("q9999")
    assert not hints.is_throttled("p0")
    assert hints.may_guess("r0")


def test_news_of_a_pool_keeps_it_among_the_remembered():
    # Given hints of 2 pools, one of which keeps being heard of
    hints = claims.PoolHints(max_pools=2, clock=lambda: 0.0)
    hints.seen("kept", False, 3)
    for n in range(100):
        hints.seen(f"other{n}", False, 3)
        hints.seen("kept", False, 3)
    # Then it is still known, the others come and go
    assert hints.is_sparse("kept")
    assert hints.remembered_pools() == 2
    with pytest.raises(ValueError):
        claims.PoolHints(max_pools=0)


def test_the_unit_cache_keeps_at_most_pools_pools_and_per_pool_units():
    # Given a cache of 4 pools of 3 units each
    cache = claims.UnitCache(per_pool=3, pools=4, clock=lambda: 0.0)
    # When units of 1,000 distinct pools are learnt, 10 a pool
    for n in range(1_000):
        cache.learn(UNITS, f"p{n}", [{"sku": f"p{n}", "sk": f"u#{k}"} for k in range(10)])
    # Then 4 pools are remembered, the last ones, 3 units each
    assert cache.remembered_pools() == 4
    assert cache.take(UNITS, ["p0"], 1, None, lambda: 0.0) is None
    found = cache.take(UNITS, ["p999"], 3, None, lambda: 0.0)
    assert found is not None and len(found[1]) == 3
    assert cache.take(UNITS, ["p999"], 1, None, lambda: 0.0) is None


def test_reserve_options_have_defaults_and_cannot_change():
    options = claims.ReserveOptions()
    assert options.rounds == 6
    assert options.pages_per_pool == claims.PAGES_PER_POOL
    assert options.hints is None and options.unit_cache is None
    assert isinstance(options.backoff, retry.Backoff)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.rounds = 1  # type: ignore[misc]
    with pytest.raises(ValueError):
        claims.ReserveOptions(pages_per_pool=0)


def test_the_old_keywords_still_reserve_with_a_warning():
    # Given the keywords reserve took before ReserveOptions
    client = SmallPool()
    hints = claims.PoolHints()
    # When a reservation passes them, then it warns and they are applied as options
    with pytest.warns(TurnstileDeprecationWarning, match="options="):
        taken = claims.reserve(
            client,  # type: ignore[arg-type]
            UNITS,
            pools=["s#0"],
            quantity=1,
            holder=lambda lead: "r",
            now_ms=NOW_MS,
            until_ms=NOW_MS + 60_000,
            backoff=FAST,
            pool_hints=hints,
            rand=lambda: HALF,
        )
    assert taken.holder == "r"
    assert hints.is_sparse("s#0")
    # Both at once is a mistake
    with pytest.raises(TypeError):
        claims.reserve(
            client,  # type: ignore[arg-type]
            UNITS,
            pools=["s#0"],
            quantity=1,
            holder=lambda lead: "r",
            now_ms=NOW_MS,
            until_ms=NOW_MS + 60_000,
            options=claims.ReserveOptions(),
            rounds=2,
        )


def test_renamed_names_still_answer_with_a_warning():
    renamed = {
        "free": claims.release,
        "sell": claims.confirm,
        "new_ticket": claims.new_claimable_at,
    }
    for old, new in renamed.items():
        with pytest.warns(TurnstileDeprecationWarning, match=old):
            assert getattr(claims, old) is new
    with pytest.warns(TurnstileDeprecationWarning, match="free_unit"):
        free_unit: Any = claims.free_unit
    assert free_unit(UNITS, {"sku": "s", "sk": "u"}, "s#0", ticket=7) == claims.new_unit(
        UNITS, {"sku": "s", "sk": "u"}, "s#0", claimable_at=7
    )
    with pytest.warns(TurnstileDeprecationWarning, match="ticket_attr"):
        units = claims.UnitTable(table="t", index="i", key_attrs=("k",), ticket_attr="at")
    assert units.claimable_at_attr == "at"
    assert dataclasses.replace(units, claimable_at_attr="other").claimable_at_attr == "other"
    with pytest.warns(TurnstileDeprecationWarning, match="TICKET_SPACE"):
        assert claims.TICKET_SPACE == 2**20


def test_every_stored_attribute_name_is_the_tables_own():
    # Given a table whose units name every attribute differently
    names = {
        f.name: f"x_{f.name}"
        for f in dataclasses.fields(UNITS)
        if f.name.endswith("_attr") and f.name != "ticket_attr"
    }
    units = dataclasses.replace(UNITS, **names)  # type: ignore[arg-type]
    # Then a new unit and every placeholder use those names, none of the defaults
    assert set(units.names().values()) == set(names.values())
    item = claims.new_unit(units, {"sku": "s", "sk": "u"}, "s#0", 5)
    assert set(item) - {"sku", "sk"} == {
        names["pool_attr"],
        names["claimable_at_attr"],
        names["status_attr"],
        names["seq_attr"],
    }
