"""The contention metrics agree with what really happened, under real threads on DynamoDB Local.

What "really happened" is counted independently of the library: a botocore ``after-call`` hook sees
every DynamoDB answer the code got (refused writes included), and the test's own history records
every outcome. The metrics come from a ``turnstile_ddb.metrics`` sink added for the test, and,
through
the handler, from the EMF lines it writes.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from service.domain.errors import DomainError
from service.domain.products import Products
from service.handlers import products
from tests.helpers import Faults, emf_documents, invoke, purchase, totals
from turnstile_ddb import metrics, retry

WORKERS = 20
PER_WORKER = 5
STOCK = 60


class Answers:
    """Every answer DynamoDB gave this client, per (operation, error code or "ok")."""

    def __init__(self, client: Any) -> None:
        self.seen: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        client.meta.events.register("after-call.dynamodb", self._after_call)

    def _after_call(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        code = (parsed.get("Error") or {}).get("Code") or "ok"
        with self._lock:
            self.seen[(model.name, code)] += 1


class Recording:
    """A tally that only sees the figures made while the test runs."""

    def __enter__(self) -> metrics.Tally:
        self.tally = metrics.Tally()
        metrics.add_sink(self.tally)
        return self.tally

    def __exit__(self, *exc: object) -> None:
        metrics.remove_sink(self.tally)


def test_versioned_purchases_from_20_threads_count_every_refused_write(
    dynamodb_local, ddb, tables, unique
):
    # Given a product with 60 units and a client whose every answer is recorded
    client = dynamodb_local.client(config=retry.client_config())
    answers = Answers(client)
    shop = Products(client=client, table=tables["products"])
    Products(client=ddb, table=tables["products"]).create(unique, "Contended", STOCK)
    barrier = threading.Barrier(WORKERS)

    def worker(_: int) -> list[str]:
        barrier.wait()
        outcomes = []
        for _ in range(PER_WORKER):
            try:
                shop.purchase(unique, 1, "versioned")
                outcomes.append("sold")
            except DomainError as exc:
                outcomes.append(exc.code)
        return outcomes

    # When 20 threads make 100 versioned purchase attempts at once
    with Recording() as tally, ThreadPoolExecutor(WORKERS) as pool:
        history = Counter(o for part in pool.map(worker, range(WORKERS)) for o in part)

    # Then the stock is sold exactly once per unit
    assert history["sold"] == STOCK
    assert history["sold"] + history["OUT_OF_STOCK"] + history["CONFLICT"] == 100
    # And the metrics count exactly the refused version-checked writes the code was answered
    refused = answers.seen[("UpdateItem", "ConditionalCheckFailedException")]
    assert refused > 0, "20 threads on one item must have collided at least once"
    assert tally.get("versioned", "VersionConflict") == refused
    # And exactly the writes that landed, and the purchases that gave up with CONFLICT
    assert tally.get("versioned", "VersionedWrite") == answers.seen[("UpdateItem", "ok")]
    assert tally.get("versioned", "VersionedWrite") == STOCK
    assert tally.get("versioned", "ConflictGiveUp") == history["CONFLICT"]
    # And nothing was throttled (DynamoDB Local never throttles)
    assert tally.get("versioned", "Throttle") == 0


def test_an_injected_throttle_counts_a_throttle_in_the_tally_and_the_emf(
    wired, dynamodb_local, ddb, tables, unique, capsys
):
    # Given a product, and DynamoDB throttling the next two updates
    Products(client=ddb, table=tables["products"]).create(unique, "P", 10)
    client = dynamodb_local.client(config=retry.client_config())
    faults = Faults(client)
    faults.throttle("UpdateItem", 2)
    wired(client)
    capsys.readouterr()
    # When a purchase arrives through the handler
    with Recording() as tally:
        status, _, _ = invoke(products.handler, purchase(unique, {"quantity": 1}))
    # Then it succeeded after two throttles, and both were counted for the atomic pattern
    assert status == 201
    assert faults.sent["UpdateItem"] == 3
    assert tally.get("atomic", "Throttle") == 2
    assert tally.get("atomic", "RetriesExhausted") == 0
    # And the invocation flushed them as EMF, once
    emitted = totals(emf_documents(capsys.readouterr().out))
    assert emitted[("atomic", "Throttle")] == 2


def test_lasting_throttling_counts_the_give_up_and_the_503_answer(
    wired, dynamodb_local, ddb, tables, unique, capsys
):
    # Given DynamoDB throttling every update
    Products(client=ddb, table=tables["products"]).create(unique, "P", 10)
    client = dynamodb_local.client(config=retry.client_config())
    Faults(client).throttle("UpdateItem", 100)
    wired(client)
    capsys.readouterr()
    # When a purchase arrives
    with Recording() as tally:
        status, _, body = invoke(products.handler, purchase(unique, {"quantity": 1}))
    # Then the client got 503 THROTTLED, and the metrics say how it came to that
    assert (status, body["error"]) == (503, "THROTTLED")
    attempts = products.products.get().backoff.attempts
    assert tally.get("atomic", "Throttle") == attempts
    assert tally.get("atomic", "RetriesExhausted") == 1
    assert tally.get("api", "ThrottledAnswer") == 1
    emitted = totals(emf_documents(capsys.readouterr().out))
    assert emitted[("api", "ThrottledAnswer")] == 1
