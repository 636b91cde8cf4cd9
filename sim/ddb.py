"""The DynamoDB the scheduler controls: moto's backend, in-process, one call at a time.

moto loses conditional updates under real concurrency (tests/unit/conftest.py); here only one
client ever runs, so each call is applied whole before the next starts. :class:`SimClient` is
what each simulated client is given instead of a boto3 client: every call is a scheduling point,
takes a little virtual time, and may be hit by a fault the seed chooses (see :class:`Faults`).
Faults are raised as the errors botocore raises, so the library's own retry code sees them.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import ClientError, ReadTimeoutError
from moto import mock_aws

from chaos.checkers import Disturbance
from sim.scheduler import Crashed, Scheduler, Task
from turnstile_ddb import retry

REGION = "us-east-1"
ENDPOINT = f"https://dynamodb.{REGION}.amazonaws.com"
_CLEARED = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODBSTREAMS")
_SET = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}
TOKEN_SECONDS = 600.0  # how long DynamoDB remembers a ClientRequestToken
WRITES = frozenset({"put_item", "update_item", "delete_item", "transact_write_items"})
# What the trace names the injected faults (each counted and recorded as a disturbance).
FAULTS = ("crash", "pause", "throttle", "conflict", "lost-before", "lost-after", "delayed")


@contextlib.contextmanager
def moto_dynamodb() -> Iterator[Any]:
    """A fresh moto DynamoDB and a plain boto3 client for it (local endpoints cleared, fake
    credentials, as tests/unit/conftest.py does); the environment is restored afterwards."""
    saved = {name: os.environ.get(name) for name in (*_CLEARED, *_SET)}
    try:
        for name in _CLEARED:
            os.environ.pop(name, None)
        os.environ.update(_SET)
        with mock_aws():
            yield boto3.client("dynamodb", region_name=REGION, config=retry.client_config())
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def create_table(client: Any, name: str, key: str) -> None:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


@dataclass
class Faults:
    """Per-call fault probabilities; the seed decides which calls they hit."""

    throttle: float = 0.03  # refused before applying (ProvisionedThroughputExceeded)
    conflict: float = 0.05  # a transaction cancelled by TransactionConflict, not applied
    lost_before: float = 0.01  # a read timeout; the request never reached the table
    lost_after: float = 0.02  # a read timeout; the write WAS applied
    pause: float = 0.01  # the client stops this long before sending (GC, a frozen container)
    pause_seconds: float = 3.0  # longer than the workloads' leases
    crash: float = 0.002  # the client dies before sending (its held state abandoned)
    # Of the lost replies, the share that start a burst: for up to ``burst_seconds`` every write
    # of that client loses its reply too (reaching the table or not, in the proportion of
    # lost_before to lost_after), so a call's resends can all be lost and its retries run out.
    burst: float = 0.25
    burst_seconds: float = 0.4
    delay: float = 0.01  # a write applied, its reply delivered late (other clients act meanwhile)
    delay_seconds: float = 0.2  # the longest such delay

    @classmethod
    def none(cls) -> Faults:
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, crash=0.0, burst=0.0, delay=0.0)

    def scaled(self, factor: float) -> Faults:
        """Every probability times ``factor`` (pauses, bursts and delays as long as before; the
        share of lost replies that start a burst as before: the lost replies are scaled)."""
        return Faults(
            throttle=min(1.0, self.throttle * factor),
            conflict=min(1.0, self.conflict * factor),
            lost_before=min(1.0, self.lost_before * factor),
            lost_after=min(1.0, self.lost_after * factor),
            pause=min(1.0, self.pause * factor),
            pause_seconds=self.pause_seconds,
            crash=min(1.0, self.crash * factor),
            burst=self.burst,
            burst_seconds=self.burst_seconds,
            delay=min(1.0, self.delay * factor),
            delay_seconds=self.delay_seconds,
        )


@dataclass
class Stats:
    calls: int = 0
    faults: int = 0
    trace: list[str] = field(default_factory=list)
    # ClientRequestToken -> (the request, its reply, when): moto does not implement the token's
    # idempotency (a replay within 10 minutes answers success without applying again); this does.
    tokens: dict[str, tuple[str, Any, float]] = field(default_factory=dict)
    # Every injected fault as chaos's queue checker reads one: when, what, on whose process (a
    # heartbeat's faults are its holder's).
    disturbances: list[Disturbance] = field(default_factory=list)


def _client_error(operation: str, code: str, **extra: Any) -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": f"simulated {code}"}, **extra}
    return ClientError(response, operation)


class SimClient:
    """A low-level DynamoDB client for one simulated client: the real (moto) client's methods,
    each behind a scheduling point and the seed's faults."""

    def __init__(self, real: Any, scheduler: Scheduler, faults: Faults, stats: Stats) -> None:
        self._real = real
        self._scheduler = scheduler
        self._faults = faults
        self._stats = stats
        self.calls = 0  # calls this client sent (each try counts), faulted or not
        self._burst_until = 0.0  # global virtual time until which every write's reply is lost

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._real, name)

        def call(**params: Any) -> Any:
            return self._call(name, method, params)

        return call

    def _call(self, name: str, method: Callable[..., Any], params: dict[str, Any]) -> Any:
        scheduler, faults = self._scheduler, self._faults
        task: Task = scheduler.point()
        rng = scheduler.rng
        if task.crashed:
            raise Crashed
        if rng.random() < faults.crash:
            task.crashed = True
            self._note(task, name, "crash")
            raise Crashed
        if rng.random() < faults.pause:
            self._note(task, name, "pause")
            task.sleep(faults.pause_seconds * (1 + rng.random()))
        scheduler.advance(round(0.001 + rng.random() * 0.009, 6))
        self._stats.calls += 1
        self.calls += 1
        roll = rng.random()
        write = name in WRITES
        if write and scheduler.now < self._burst_until:
            lost_rate = faults.lost_before + faults.lost_after
            if roll * lost_rate < faults.lost_before:
                self._note(task, name, "lost-before")
                raise ReadTimeoutError(endpoint_url=ENDPOINT)
            return self._deliver(task, name, method, params, lost=True)
        if roll < faults.throttle:
            self._note(task, name, "throttle")
            raise _client_error(name, "ProvisionedThroughputExceededException")
        roll -= faults.throttle
        if name == "transact_write_items":
            if roll < faults.conflict:
                if self._applied(params):  # answered with its first success: no fault
                    return self._deliver(task, name, method, params, lost=False)
                self._note(task, name, "conflict")
                count = len(params.get("TransactItems", []))
                at = rng.randrange(max(count, 1))
                reasons = [
                    {"Code": "TransactionConflict" if i == at else "None"} for i in range(count)
                ]
                raise _client_error(
                    name, "TransactionCanceledException", CancellationReasons=reasons
                )
            # (only a transaction draws from the conflict band: other writes would otherwise
            # meet lost_before in it, six times as often as it says)
            roll -= faults.conflict
        if write and roll < faults.lost_before:
            self._note(task, name, "lost-before")
            self._maybe_burst()
            raise ReadTimeoutError(endpoint_url=ENDPOINT)
        roll -= faults.lost_before
        lost = write and roll < faults.lost_after
        if lost:
            self._maybe_burst()
        return self._deliver(task, name, method, params, lost=lost)

    def _maybe_burst(self) -> None:
        """A lost reply may be the first of a burst (:attr:`Faults.burst`)."""
        rng, faults = self._scheduler.rng, self._faults
        if rng.random() < faults.burst:
            length = faults.burst_seconds * (0.5 + 0.5 * rng.random())
            self._burst_until = self._scheduler.now + length

    def _deliver(
        self,
        task: Task,
        name: str,
        method: Callable[..., Any],
        params: dict[str, Any],
        *,
        lost: bool,
    ) -> Any:
        """Apply the call; then its reply is lost (``lost``), delivered late (a write, by
        :attr:`Faults.delay`: other clients act before it arrives), or delivered."""
        try:
            response = self._send(name, method, params)
        except ClientError as exc:
            self._note(task, name, retry.error_code(exc))
            raise
        if lost:
            self._note(task, name, "lost-after")
            raise ReadTimeoutError(endpoint_url=ENDPOINT)
        rng, faults = self._scheduler.rng, self._faults
        if name in WRITES and rng.random() < faults.delay:
            self._note(task, name, "delayed")
            task.sleep(faults.delay_seconds * rng.random())
        self._note(task, name, "ok")
        return response

    def _applied(self, params: dict[str, Any]) -> bool:
        """Whether this transaction's token already succeeded within the token's 10 minutes: then
        DynamoDB answers the resend with that success (its documented idempotency), so no
        conflict is injected into it; a cancellation would claim it was not applied."""
        seen = self._stats.tokens.get(params.get("ClientRequestToken") or "")
        return seen is not None and self._scheduler.now - seen[2] < TOKEN_SECONDS

    def _send(self, name: str, method: Callable[..., Any], params: dict[str, Any]) -> Any:
        token = params.get("ClientRequestToken")
        if name != "transact_write_items" or token is None:
            return method(**params)
        request = json.dumps(params, sort_keys=True)
        seen = self._stats.tokens.get(token)
        if seen is not None and self._scheduler.now - seen[2] < TOKEN_SECONDS:
            if seen[0] != request:
                raise _client_error(name, "IdempotentParameterMismatchException")
            return seen[1]
        response = method(**params)
        self._stats.tokens[token] = (request, response, self._scheduler.now)
        return response

    def _note(self, task: Task, name: str, what: str) -> None:
        if what in FAULTS:
            self._stats.faults += 1
            # a reply delivered late leaves its client silent, as a pause does
            kind = {"crash": "kill", "delayed": "pause"}.get(what, what)
            process = task.name.split(":")[0]
            self._stats.disturbances.append(Disturbance(self._scheduler.now, kind, process))
        self._stats.trace.append(f"{self._scheduler.now:.6f} {task.name} {name} {what}")


class Awaited:
    """An aiobotocore-like client over a synchronous one (a :class:`SimClient`, a moto client):
    ``await client.update_item(...)`` makes the synchronous call. Under the scheduler, the
    awaited call hands the baton exactly where the synchronous one does (inside that call), so
    a client running the async front doors on its own event loop, in its own thread, is
    scheduled as the same client running the sync ones."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._client, name)

        async def call(**params: Any) -> Any:
            return method(**params)

        return call
