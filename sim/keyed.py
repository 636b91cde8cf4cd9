"""The keyed workload, run through either front door: the idempotency store.

Each client sends requests under two idempotency keys: it begins the key with its request's
fingerprint, works for a while (sometimes past the key's short lock, so another client takes
the claim over), then completes the key with its answer, or releases it. A request is the key's
own request (fingerprint ``<key>:A``) most of the time, and now and then another one reusing the
key (``<key>:B``), as a buggy client would. Like :mod:`sim.stock`, the client is written once
and runs the synchronous ``IdempotencyStore`` or ``turnstile_ddb.aio``'s on an event loop of
its own (:class:`sim.ddb.Awaited`), so one seed gives one history through both drivers.

Judged from the history and the table:

* a replay answers only the request that stored it: the replayed answer names the fingerprint
  of the begin that got it;
* a claim taken over cannot be completed by its first owner: no completion is acknowledged
  after another client's begin of the same key took the claim over (sent after the first
  owner's begin was answered, answered before the completion was sent);
* a completed record holds the answer of a request with its own fingerprint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.checkers import Report
from chaos.history import OK, Op
from sim.ddb import Awaited, Stats, create_table
from sim.model import Model
from sim.scheduler import Task
from sim.workloads import Blocking, Recorder, settled
from turnstile_ddb import codec, errors, idempotency, retry
from turnstile_ddb.aio.idempotency import IdempotencyStore as AsyncStore
from turnstile_ddb.idempotency import IdempotencyStore as SyncStore

TABLE = "sim-keyed"
PATTERN = "keyed"
KEYS = ("k0", "k1")
LOCK_MS = 300  # short, so that a slow first owner is taken over within a seed
REUSE = 0.2  # how often a request reuses another request's key
REFUSED = (errors.Refused, errors.Retryable, retry.RetriesExhausted)


@dataclass
class Keyed:
    operations: int = 4
    driver: str = "sync"

    def setup(self, client: Any) -> None:
        create_table(client, TABLE, "id")

    def body(self, recorder: Recorder, client: Any) -> Callable[[Task], None]:
        """One client, written once as a coroutine: through the sync driver its store's calls
        block (the synchronous ``IdempotencyStore``, wrapped to be awaited), through the async
        one they are ``turnstile_ddb.aio``'s, on the same event loop of the task's own."""
        if self.driver == "sync":
            return lambda task: asyncio.run(
                self._run(recorder, task, Blocking(self._store(task, client, SyncStore)))
            )
        awaited = Awaited(client)
        return lambda task: asyncio.run(
            self._run(recorder, task, self._store(task, awaited, AsyncStore))
        )

    def _plan(self, task: Task) -> tuple[str, str, float, bool]:
        """The next request (the same draws whichever driver runs it): its key, fingerprint,
        how long it works, and whether it gives the key back instead of completing."""
        key = task.rng.choice(KEYS)
        fingerprint = f"{key}:{'B' if task.rng.random() < REUSE else 'A'}"
        work = task.rng.uniform(0.0, 2 * LOCK_MS / 1000)
        return key, fingerprint, work, task.rng.random() < 0.15

    def _store(self, task: Task, client: Any, kind: Any) -> Any:
        backoff = task.backoff(attempts=4, base=0.005, cap=0.1)
        return kind(client, TABLE, backoff=backoff, lock_ms=LOCK_MS, clock=task.clock)

    async def _run(self, recorder: Recorder, task: Task, store: Any) -> None:
        for _ in range(self.operations):
            key, fingerprint, work, gives_back = self._plan(task)
            begun = recorder.invoke(PATTERN, task.name, "begin", key=key, fingerprint=fingerprint)
            claim = await settled(recorder, begun, store.begin(key, fingerprint), _complete)
            if not isinstance(claim, idempotency.InProgress):
                continue
            task.sleep(work)
            f = "release" if gives_back else "complete"
            op = recorder.invoke(PATTERN, task.name, f, key=key, begun=begun.index)
            if gives_back:
                await settled(recorder, op, store.release(claim), _complete)
            else:
                await settled(
                    recorder, op, store.complete(claim, f"{task.name}={fingerprint}"), _complete
                )

    def final(self, real: Any) -> dict[str, Any]:
        items = [codec.decode_item(i) or {} for i in real.scan(TableName=TABLE)["Items"]]
        return {str(i["id"]): {k: str(v) for k, v in sorted(i.items())} for i in items}

    def check(self, recorder: Recorder, real: Any) -> Report:
        report = Report()
        ops = [op for op in recorder.ops if op.pattern == PATTERN]
        for op in ops:
            if op.f == "begin" and op.type == OK and "replay" in op.value:
                replayed = str(op.value["replay"]).split("=", 1)[-1]
                report.expect(
                    replayed == op.args["fingerprint"],
                    PATTERN,
                    "a replay answers only its own request",
                    f"{op.process} sent {op.args['fingerprint']} and got {op.value['replay']}",
                    [op],
                )
        report.merge(_late_completions(ops))
        for key, row in self.final(real).items():
            if row.get("status") == idempotency.COMPLETED:
                answered = row.get("answer", "").strip('"').split("=", 1)[-1]
                report.expect(
                    answered == row.get("fingerprint"),
                    PATTERN,
                    "a record holds its own request's answer",
                    f"{key}: {row}",
                )
        return report


def _late_completions(ops: list[Op]) -> Report:
    """No completion acknowledged after another client took the same claim over: a begin of the
    same key by another client, sent after this claim's begin was answered (so its write landed
    after this claim's) and answered before this completion was sent. (Ordered by when the
    takeover was sent, not answered: a reply can be delayed past a later writer's.)"""
    report = Report()
    by_index = {op.index: op for op in ops}
    takeovers = [op for op in ops if op.f == "begin" and op.type == OK and "token" in op.value]
    for op in ops:
        if op.f != "complete" or op.type != OK or op.value.get("completed") is not True:
            continue
        mine = by_index[op.args["begun"]]
        later = [
            t
            for t in takeovers
            if t.args["key"] == op.args["key"]
            and t.process != op.process
            and mine.completed < t.invoked
            and t.completed < op.invoked
        ]
        report.expect(
            not later,
            PATTERN,
            "a claim taken over cannot be completed by its first owner",
            f"{op.process} completed {op.args['key']} after {later[0].process if later else ''}"
            " had taken it over",
            [mine, *later, op],
        )
    return report


def _complete(recorder: Recorder, op: Op, exc: BaseException | None, answer: Any = None) -> None:
    if isinstance(answer, idempotency.InProgress):
        shown: dict[str, Any] = {"token": answer.token}
    elif isinstance(answer, idempotency.Replay):
        shown = {"replay": answer.answer}
    else:
        shown = {"completed": answer}
    recorder.outcome(op, exc, shown, REFUSED)


def run(seed: int, driver: str, *, clients: int = 4, operations: int = 4) -> tuple[str, Report]:
    """One seed of the keyed workload alone, through ``driver``: its history and its report."""
    from sim.run import run_alone

    workload = Keyed(operations=operations, driver=driver)

    def check(recorder: Recorder, stats: Stats, real: Model) -> Report:
        return workload.check(recorder, real)

    return run_alone(seed, workload, "keyed", check, clients=clients)
