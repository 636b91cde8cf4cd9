"""Lazily built, shared, injectable dependencies. Nothing is created at import time.

Lambda builds each dependency on first use and keeps it for the life of the execution environment.
Tests and the local runner inject their own (``Lazy.set``). boto3 *clients* are thread-safe and are
shared; boto3 resources and sessions are not, so this module hands out clients only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

import boto3

from service import config, snapstart
from turnstile_ddb import retry, sharded
from turnstile_ddb.consumption import count_consumption
from turnstile_ddb.idempotency import IdempotencyStore

T = TypeVar("T")


class Lazy(Generic[T]):
    _all: ClassVar[list[Lazy[Any]]] = []

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._value: T | None = None
        self._lock = threading.Lock()
        Lazy._all.append(self)

    @classmethod
    def reset_all(cls) -> None:
        """Forget every built value (tests switching between moto and DynamoDB Local)."""
        for lazy in cls._all:
            lazy.set(None)

    def get(self) -> T:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._build()
                value = self._value
        return value

    def set(self, value: T | None) -> None:
        """Inject a value (tests, local runner); ``None`` rebuilds on next use."""
        with self._lock:
            self._value = value


# A restored SnapStart environment builds its own clients (and their connections) on first use.
snapstart.after_restore(Lazy.reset_all)


def _build_dynamodb() -> Any:
    # every call counts itself and the units DynamoDB says it consumed (pattern ``dynamodb``)
    return count_consumption(
        boto3.session.Session().client("dynamodb", config=retry.client_config())
    )


dynamodb: Lazy[Any] = Lazy(_build_dynamodb)


def _build_idempotency() -> IdempotencyStore:
    return IdempotencyStore(
        client=dynamodb.get(),
        table=config.Tables.from_env(config.IDEMPOTENCY)[config.IDEMPOTENCY],
        backoff=config.call_backoff(),
        lock_ms=config.IDEMPOTENCY_LOCK_MS,
        keep_seconds=config.IDEMPOTENCY_KEEP_SECONDS,
        expiry_attr=config.TTL_ATTRIBUTE,  # the TTL attribute infra.tables gives the table
    )


# The Idempotency-Key records, shared by every function that accepts the header.
idempotency: Lazy[IdempotencyStore] = Lazy(_build_idempotency)


def _build_load() -> Any:
    from turnstile_ddb import adaptive

    return adaptive.LoadWindow()


# What this environment's requests observed of each sharded counter's load (taken, throttled,
# refused...): what the resizer decides from. Told by the hints' takes and joins.
load: Lazy[Any] = Lazy(_build_load)


# What this execution environment learnt of sharded counters (shard counts, throttles, sold out),
# shared by every domain object that takes from or restocks them, so a restock here makes every
# take here forget. Built on first use, like the clients; the library keeps no state of its own.
sharded_hints: Lazy[sharded.Hints] = Lazy(lambda: sharded.Hints(load=load.get()))


def _build_resizer() -> Any:
    from turnstile_ddb import adaptive, lease

    leases = lease.Leases(
        client=dynamodb.get(),
        table=config.Tables.from_env(config.LEASES)[config.LEASES],
        backoff=config.call_backoff(),
    )
    return adaptive.Resizer(dynamodb.get(), leases, load=load.get(), hints=sharded_hints.get())


# Decides after a request on an adaptive product or event whether to resize its shards (the
# policy's defaults: one key's 1000 writes a second), one resizer at a time across environments
# (a lease on the leases table). Built with the products and events domain objects.
resizer: Lazy[Any] = Lazy(_build_resizer)
