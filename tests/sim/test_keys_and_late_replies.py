"""The keyed purchase workload's reused keys, the faults that make a call's retries run out after
a lost reply, and replies delivered late (sim/workloads.py ``Purchases``, sim/ddb.py ``Faults``):
each happens in the seeds run, and :func:`sim.checks.keyed_answers` judges what it must."""

from __future__ import annotations

import json

from chaos.history import FAIL, OK, UNKNOWN, Op
from sim.checks import keyed_answers
from sim.run import Config, run_seed
from turnstile_ddb import idempotency

PURCHASES_ONLY = Config(
    lease_clients=0, reservation_clients=0, sharded_clients=0, queue_clients=0, sizes_by_kind={}
)


def _calls(history: str) -> list[tuple[float, str, str, str]]:
    """(time, client, call, outcome or fault) of every DynamoDB call in a history."""
    lines = history.split("# operations")[0].splitlines()[1:]
    return [(float(t), client, call, what) for t, client, call, what in map(str.split, lines)]


def _operations(history: str) -> list[list]:
    body = history.split("# operations\n")[1].split("# final")[0]
    return [json.loads(line) for line in body.splitlines()]


def test_a_late_reply_arrives_after_other_clients_acted():
    """A write applied, its reply delayed: before it reaches its client, other clients' calls
    run (and a later call of the same client comes only after the reply)."""
    late: list[tuple[float, set[str]]] = []
    for seed in range(20):
        if len(late) >= 5 and sum(1 for _, others in late if others) >= 3:
            break
        calls = _calls(run_seed(seed).history)
        for at, (when, client, call, what) in enumerate(calls):
            if what != "delayed":
                continue
            answered = next(i for i in range(at + 1, len(calls)) if calls[i][1] == client)
            assert calls[answered][2:] == (call, "ok")  # the reply, then the client goes on
            between = {c[1] for c in calls[at + 1 : answered]}
            late.append((calls[answered][0] - when, between))
    assert len(late) >= 5
    assert all(delay > 0 for delay, _ in late)
    assert sum(1 for _, others in late if others) >= 3


def test_retries_run_out_after_a_lost_reply_whose_write_applied():
    """A burst of lost replies: a keyed purchase's transaction is applied, its reply lost, and
    every resend lost too, until its four tries (the workload's backoff) run out."""
    found = 0
    for seed in range(40):
        by_client: dict[str, list[tuple[str, str]]] = {}
        for _, client, call, what in _calls(run_seed(seed, PURCHASES_ONLY).history):
            by_client.setdefault(client, []).append((call, what))
        for calls in by_client.values():
            for at in range(1, len(calls) - 3):
                tries = calls[at : at + 4]
                found += (
                    calls[at - 1][0] == "get_item"  # the read the transaction was decided on
                    and tries[0] == ("transact_write_items", "lost-after")
                    and all(c == "transact_write_items" and w.startswith("lost-") for c, w in tries)
                )
        if found >= 2:
            break
    assert found >= 2


def test_keyed_clients_reuse_keys_and_are_refused_or_run_afresh():
    refused = afresh = stored = 0
    for seed in range(10):
        result = run_seed(seed, PURCHASES_ONLY)
        assert not result.report.violations, [v.message for v in result.report.violations]
        ops = _operations(result.history)
        keyed = [op for op in ops if "key" in op[3]]
        first: dict[str, tuple[str, int]] = {}
        for op in keyed:
            request = (op[3]["product"], op[3]["quantity"])
            earlier = first.setdefault(op[3]["key"], request)
            if earlier == request:
                continue
            if op[6] == FAIL and op[7] == {"error": "IDEMPOTENCY_KEY_REUSED"}:
                refused += 1
                assert op[8] == [[422, {"error": "IDEMPOTENCY_KEY_REUSED"}]]
            elif op[6] == OK:  # the key's first request changed nothing: the key was free
                afresh += 1
                assert (op[7]["productId"], op[7]["quantity"]) == request
        stored += sum(1 for op in keyed if op[6] == OK)
    assert refused >= 5 and stored >= 20
    assert afresh >= 1


def _op(index: int, key: str, product: str, quantity: int, outcome: str, value=None) -> Op:
    op = Op(index, "purchases", "buyer0", "purchase", {}, float(index), index * 1000)
    op.args = {"product": product, "quantity": quantity, "strategy": "keyed", "key": key}
    op.type, op.value = outcome, value
    return op


def _receipt(product: str, quantity: int) -> dict:
    return {"purchaseId": f"{product}{quantity}", "productId": product, "quantity": quantity}


def _record(product: str, quantity: int) -> dict:
    return {
        "status": idempotency.COMPLETED,
        "fingerprint": idempotency.fingerprint(product, quantity),
        "answer": _receipt(product, quantity),
    }


def _checks(report) -> list[str]:
    return [v.check for v in report.violations]


def test_keyed_answers_accepts_a_refused_reuse_and_a_retry_that_replays():
    ops = [
        _op(0, "k", "p0", 2, OK, _receipt("p0", 2)),
        _op(1, "k", "p1", 2, FAIL, {"error": "IDEMPOTENCY_KEY_REUSED"}),
        _op(2, "j", "p0", 1, UNKNOWN),
    ]
    report = keyed_answers(ops, {"k": _record("p0", 2), "j": _record("p0", 1)})
    assert report.violations == [] and report.checks == 4


def test_keyed_answers_rejects_an_answer_replayed_for_another_request():
    ops = [
        _op(0, "k", "p0", 2, OK, _receipt("p0", 2)),
        _op(1, "k", "p1", 2, OK, _receipt("p0", 2)),
    ]
    assert _checks(keyed_answers(ops, {"k": _record("p0", 2)})) == [
        "an answer under a key is for its own request"
    ]


def test_keyed_answers_rejects_a_refusal_for_a_key_never_used_before():
    ops = [_op(0, "k", "p0", 2, FAIL, {"error": "IDEMPOTENCY_KEY_REUSED"})]
    assert _checks(keyed_answers(ops, {})) == ["a key is refused as reused only when it was"]


def test_keyed_answers_rejects_a_stored_answer_for_a_request_answered_not_applied():
    throttled = [_op(0, "k", "p0", 2, FAIL, {"error": "THROTTLED"})]
    assert _checks(keyed_answers(throttled, {"k": _record("p0", 2)})) == [
        'a stored answer was not answered "not applied"'
    ]
    # the reused key's other request took the key although it was refused
    refused = [
        _op(0, "k", "p0", 2, OK, _receipt("p0", 2)),
        _op(1, "k", "p1", 1, FAIL, {"error": "IDEMPOTENCY_KEY_REUSED"}),
    ]
    assert _checks(keyed_answers(refused, {"k": _record("p1", 1)})) == [
        'a stored answer was not answered "not applied"'
    ]


def test_a_key_every_request_went_under_is_not_reused_and_the_run_goes_on():
    """A client that had sent every request (each product, each quantity) under one key had no
    request left to reuse it for, and died choosing one (seed 8305 of a 10,000-seed run)."""
    from sim.workloads import Purchases

    purchases = Purchases([("p0", 40), ("p1", 10)])
    every = {(p, q) for p in ("p0", "p1") for q in (1, 2, 3)}
    sent = {"b0-1": set(every), "b0-2": {("p0", 1)}, "b0-0": every - {("p1", 3)}}
    assert purchases._reusable(sent) == ["b0-0", "b0-2"]
    assert purchases._reusable({"b0-1": set(every)}) == []
    result = run_seed(8305)
    assert result.violations == 0, [v.message for v in result.report.violations]
