"""Resizing a sharded counter and a sharded capacity while clients race them (sim.resizing):
one seed gives one history through the synchronous front door and through turnstile_ddb.aio,
call for call, with resizes committed in it and every check clean; the checks fail when a
resize loses or makes units, leaves a shard behind, moves a place away or keeps a member in; and
the resize mutants are killed through both drivers, at the same seed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chaos.checkers import Report
from chaos.history import OK, UNKNOWN, Op
from sim import resizing
from tests.sim.test_drivers_agree import _PROBE, _probe_mutant
from turnstile_ddb import capacity, codec, sharded

SEEDS = range(20)
RESIZE_MUTANTS = ("30", "31", "32", "33")


def _ops(history: str) -> list[list[Any]]:
    body = history.split("# operations\n", 1)[1].split("# final", 1)[0]
    return [json.loads(line) for line in body.splitlines()]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_resizing_seed_gives_one_history_through_either_driver(seed):
    by_sync, sync_report = resizing.run(seed, "sync")
    by_async, async_report = resizing.run(seed, "async")
    assert by_async == by_sync
    assert sync_report.violations == [] and async_report.violations == []
    resized = [op for op in _ops(by_sync) if op[2] == "resize" and op[6] == "ok"]
    assert any(op[7]["items"] > 0 for op in resized), resized


def test_the_runs_grow_and_shrink_both_and_race_them():
    # Over a few seeds, both the counter and the capacity grew and shrank, and takes, joins
    # and leaves were acknowledged beside them
    seen: set[tuple[bool, str]] = set()
    done: set[str] = set()
    for seed in range(5):
        for op in _ops(resizing.run(seed, "sync")[0]):
            if op[2] == "resize" and op[6] == "ok" and op[7]["items"] > 0:
                grew = op[7]["after"] > op[7]["before"]
                seen.add((op[3]["capacity"], "grow" if grew else "shrink"))
            elif op[6] == "ok":
                done.add(op[2])
    assert seen == {(False, "grow"), (False, "shrink"), (True, "grow"), (True, "shrink")}
    assert {"take", "add", "join", "leave"} <= done


def _after_resize(monkeypatch: Any, damage: Any) -> list[str]:
    """The checks that fail over a few seeds when every committed resize is followed by
    ``damage(client, counter, answer)`` (a write of its own, unconditional)."""
    real = sharded.resize

    def damaged(client: Any, counter: Any, shards: int, **kwargs: Any) -> Any:
        answer = real(client, counter, shards, **kwargs)
        if answer.items:
            damage(client, counter, answer)
        return answer

    monkeypatch.setattr(sharded, "resize", damaged)
    reports = [resizing.run(seed, "sync")[1] for seed in range(4)]
    return sorted({v.check for report in reports for v in report.violations})


def _raise(client: Any, counter: Any, shard: int, attribute: str) -> None:
    """Shard ``shard``'s ``attribute`` one higher, no questions asked."""
    client.update_item(
        TableName=counter.table,
        Key=counter.wire_key(shard),
        UpdateExpression="SET #a = #a + :one",
        ExpressionAttributeNames={"#a": attribute},
        ExpressionAttributeValues=codec.values(one=1),
    )


def test_the_checks_catch_a_resize_that_makes_a_unit(monkeypatch):
    # Given resizes of the counter that leave one unit more on shard 0
    def one_more(client: Any, counter: Any, answer: Any) -> None:
        if counter.base == resizing.STOCK.base:
            _raise(client, counter, 0, counter.count_attr)

    # Then the total is not what the history allows
    assert "total exact" in _after_resize(monkeypatch, one_more)


def test_the_checks_catch_a_shard_left_behind(monkeypatch):
    # Given resizes that leave an item past the new shard count (a shrink's delete lost)
    def stray(client: Any, counter: Any, answer: Any) -> None:
        row = {**counter.key(answer.after), counter.count_attr: 0, "limit": 0}
        client.put_item(TableName=counter.table, Item=codec.encode_item(row))

    # Then the layout check sees it
    assert "shards 0 to N-1" in _after_resize(monkeypatch, stray)


def test_the_checks_catch_a_place_made_by_a_resize(monkeypatch):
    # Given resizes of the capacity that raise shard 0's limit by one
    def wider(client: Any, counter: Any, answer: Any) -> None:
        if counter.base == resizing.SEATS.base:
            _raise(client, counter, 0, counter.limit_attr)

    # Then the places do not add up to what they were
    assert "places kept" in _after_resize(monkeypatch, wider)


def test_the_checks_catch_a_member_who_cannot_leave(monkeypatch):
    # Given a leave that says "not a member" without looking
    def refused(client: Any, counter: Any, member: Any, options: Any = None, **_: Any) -> int:
        raise capacity.NotMember()

    monkeypatch.setattr(sharded, "leave", refused)
    # Then the members who joined are still there at the end, flagged
    reports = [resizing.run(seed, "sync")[1] for seed in range(3)]
    assert "every member could leave" in {v.check for r in reports for v in r.violations}


@pytest.mark.parametrize("number", RESIZE_MUTANTS)
def test_a_resize_mutant_is_killed_through_both_drivers(number, tmp_path):
    probe = _PROBE.replace("from sim import stock", "from sim import resizing")
    first = _probe_mutant(number, tmp_path, probe.replace("stock.run", "resizing.run"))
    assert set(first) == {"sync", "async"}, first
    assert first["sync"] == first["async"]


def _op(f: str, invoked: float, completed: float, outcome: str = OK, **args: int) -> Op:
    op = Op(0, resizing.PATTERN, "c", f, args, invoked, int(invoked * 1000), type=outcome)
    op.completed = completed
    return op


def _total_checks(total: int, ops: list[Op]) -> list[str]:
    report = Report()
    resizing._totals(report, total, ops)
    return [v.check for v in report.violations]


def test_the_total_counts_from_the_last_set_total_that_may_have_applied():
    # Given a set_total to 8, then a take of 3 that began after it was answered
    reset, take = _op("set_total", 1, 2, total=8), _op("take", 3, 4, quantity=3)
    # Then only 5 is exact: the initial stock no longer counts, nor 8 untouched
    assert _total_checks(5, [reset, take]) == []
    assert _total_checks(8, [reset, take]) == ["total exact"]
    assert _total_checks(resizing.INITIAL - 3, [reset, take]) == ["total exact"]
    # And a take overlapping the set_total may have come before it (8) or after it (5)
    overlapping = _op("take", 1.5, 2.5, quantity=3)
    assert _total_checks(8, [reset, overlapping]) == []
    assert _total_checks(5, [reset, overlapping]) == []
    # And a set_total of unknown outcome may or may not have applied
    unknown = _op("set_total", 1, float("inf"), UNKNOWN, total=15)
    assert _total_checks(15, [unknown]) == [] and _total_checks(12, [unknown]) == []
    assert _total_checks(13, [unknown]) == ["total exact"]


def test_more_acknowledged_takes_than_units_is_a_unit_sold_twice():
    takes = [_op("take", n, n + 0.5, quantity=3) for n in range(5)]  # 15 of the 12 there
    assert "no unit sold twice" in _total_checks(0, takes)
