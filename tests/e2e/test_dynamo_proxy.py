"""Functions as deployed, behind ``local.dynamo_proxy``: the capacity model and the nemesis's faults
reach the workers (their asset, the layer, their role), which no botocore hook in this process can.

* ``make local`` with ``TURNSTILE_CAPACITY_SCALE``: a purchase over its product key's write limit,
  served through the bridge by the products worker, is refused as AWS refuses it, and the handler
  answers as it would on AWS (503 THROTTLED, ``Retry-After``), nothing applied.
* ``make chaos``: the worker's chaos agent tags each request with the calling client; the proxy's
  fault policy sees the tag and can throttle (the nemesis itself), drop a reply after the write was
  applied, or crash the invocation (``Runtime.ExitError``, the nemesis's ``Crash``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos import deployed
from chaos.nemesis import Crash, Nemesis, Rates
from local import bridge, dynamo_proxy, run, workers
from local.dynamodb_local import DynamoDBLocal
from local.sandbox.chaos_agent import CRASH_ERROR, CRASH_HEADER
from local.tokens import TokenVerifier
from service import catalog, config
from tests.helpers import Person, proxy_event
from turnstile_ddb import codec

PRODUCTS = catalog.spec("products").handler
LOCKS = catalog.spec("locks").handler
WALLETS = catalog.spec("wallets").handler


class FrozenClock:
    """The capacity model's buckets never refill: what fits is exact on any machine."""

    def __call__(self) -> float:
        return 0.0


def stock_of(ddb: Any, tables: config.Tables, product_id: str) -> int | None:
    item = ddb.get_item(
        TableName=tables["products"],
        Key=codec.encode_item({"productId": product_id}),
        ConsistentRead=True,
    ).get("Item")
    return None if item is None else int(item["stock"]["N"])


def test_a_request_over_its_keys_limit_is_throttled_in_the_worker_as_on_aws(
    dynamodb_local: DynamoDBLocal,
    tables: config.Tables,
    template: dict[str, Any],
    assembly: Any,
    verifier: TokenVerifier,
    admin: Person,
    alice: Person,
    unique: str,
    ddb: Any,
) -> None:
    # 0.5 WCU per key and no refill: the product's creation takes the bucket, nothing more fits.
    front, model = run.capacity_front(dynamodb_local, 0.0005, clock=FrozenClock())
    try:
        with workers.running(
            template,
            Path(assembly.directory),
            front.environment(dynamodb_local.environment()),
            only={PRODUCTS},
        ) as functions:
            served = bridge.Bridge(
                [catalog.spec("products")],
                verifier=bridge.CachedVerifier(verifier),
                functions=functions,
            )
            server = bridge.serve(served, "127.0.0.1", 0)
            url = f"http://127.0.0.1:{server.server_port}"
            try:
                created = admin.post(
                    f"{url}/products", json={"productId": unique, "name": "hot", "stock": 5}
                )
                assert created.status_code == 201, created.text
                bought = alice.post(f"{url}/products/{unique}/purchases", json={"quantity": 1})
            finally:
                server.shutdown()
    finally:
        front.stop()
    assert bought.status_code == 503, bought.text
    assert bought.json()["error"] == "THROTTLED"
    assert int(bought.headers["Retry-After"]) >= 1
    assert stock_of(ddb, tables, unique) == 5  # refused before DynamoDB Local: nothing applied
    assert model.stats.throttled >= 1
    assert front.counts.throttled == model.stats.throttled
    assert any(key.startswith(f"{tables['products']}/-/") for key in model.stats.throttled_by_key)


class Script:
    """A fault policy for the proxy: per client tag, the decisions to take, in order."""

    def __init__(self) -> None:
        self.plan: dict[str, list[dynamo_proxy.Decision]] = {}
        self.seen: list[tuple[str | None, str]] = []
        self.lock = threading.Lock()
        self.delegate: dynamo_proxy.FaultPolicy | None = None  # e.g. a nemesis's decide

    def __call__(
        self, target: str | None, operation: str, body: dict[str, Any]
    ) -> dynamo_proxy.Decision:
        with self.lock:
            self.seen.append((target, operation))
            planned = self.plan.get(target or "")
            if planned:
                return planned.pop(0)
        return self.delegate(target, operation, body) if self.delegate is not None else None


@pytest.fixture(scope="module")
def agents(
    dynamodb_local: DynamoDBLocal,
    tables: config.Tables,
    template: dict[str, Any],
    assembly: Any,
) -> Iterator[tuple[workers.Workers, Script]]:
    """The products, locks and wallets functions in their workers with the chaos agent (the
    wallet lease shortened as make chaos shortens it), their endpoint a scripted proxy."""
    script = Script()
    with (
        dynamo_proxy.DynamoProxy(dynamodb_local.endpoint, faults=script) as proxy,
        workers.running(
            template,
            Path(assembly.directory),
            proxy.environment(dynamodb_local.environment()),
            only={PRODUCTS, LOCKS, WALLETS},
            chaos={"wallet_lease_ms": 1_500},
        ) as functions,
    ):
        yield functions, script


@pytest.fixture
def faulted(agents: tuple[workers.Workers, Script]) -> tuple[workers.Worker, Script]:
    return agents[0][PRODUCTS], agents[1]


def create(product_id: str) -> dict[str, Any]:
    body = json.dumps({"productId": product_id, "name": "x", "stock": 3})
    return proxy_event("POST", "/products", "/products", body=body)


def test_untagged_requests_pass_and_tagged_ones_carry_their_client(
    faulted: tuple[workers.Worker, Script], ddb: Any, tables: config.Tables, unique: str
) -> None:
    worker, script = faulted
    assert worker.invoke(create(f"{unique}-a"))["statusCode"] == 201
    answer = worker.invoke_answer(create(f"{unique}-b"), chaos={"target": "client-7"})
    assert answer["result"]["statusCode"] == 201
    assert (None, "PutItem") in script.seen
    assert ("client-7", "PutItem") in script.seen
    assert stock_of(ddb, tables, f"{unique}-b") == 3


def test_a_reply_lost_after_the_write_leaves_the_write_applied(
    faulted: tuple[workers.Worker, Script], ddb: Any, tables: config.Tables, unique: str
) -> None:
    worker, script = faulted
    script.plan["lossy"] = [dynamo_proxy.DROP_AFTER]
    answer = worker.invoke_answer(create(unique), chaos={"target": "lossy"})
    # The function never learnt the outcome of its write; the write happened.
    assert stock_of(ddb, tables, unique) == 3
    # ... and says so, as on AWS when a write's reply is lost (ConnectionClosedError).
    assert answer["result"]["statusCode"] == 503, answer
    assert json.loads(answer["result"]["body"])["error"] == "OUTCOME_UNKNOWN"
    assert script.plan["lossy"] == []


def test_a_crash_marker_kills_the_invocation_as_a_dead_runtime(
    faulted: tuple[workers.Worker, Script], ddb: Any, tables: config.Tables, unique: str
) -> None:
    worker, script = faulted
    crash = dynamo_proxy.Reply(500, {"message": "x"}, {CRASH_HEADER: "crashy PutItem"})
    script.plan["crashy"] = [crash]
    with pytest.raises(workers.FunctionError) as caught:
        worker.invoke_answer(create(unique), chaos={"target": "crashy"})
    assert caught.value.error_type == CRASH_ERROR
    assert stock_of(ddb, tables, unique) is None  # the crash answered in DynamoDB's place


def test_the_nemesis_throttles_a_worker_and_a_crash_reaches_the_client_as_crash(
    faulted: tuple[workers.Worker, Script], unique: str
) -> None:
    worker, script = faulted
    quiet = Rates(throttle=0, lost_before=0, lost_after=0, conflict=0, crash=0)
    nemesis = Nemesis(3, Rates(throttle=1.0, lost_before=0, lost_after=0, conflict=0, crash=0))
    script.delegate = nemesis.decide  # the proxy asks the nemesis, as make chaos's proxy does
    try:
        with nemesis.target("thrower"):
            answer = deployed.Function(worker, nemesis)(create(unique), None)
    finally:
        script.delegate = None
    assert answer["statusCode"] == 503, answer
    assert json.loads(answer["body"])["error"] == "THROTTLED"
    assert nemesis.counts()["throttle"] >= 1
    assert {target for target, _ in script.seen if target == "thrower"} == {"thrower"}
    script.plan["crashy2"] = [dynamo_proxy.Reply(500, {}, {CRASH_HEADER: "crashy2 PutItem"})]
    crashing = Nemesis(4, quiet)
    with crashing.target("crashy2"), pytest.raises(Crash):
        deployed.Function(worker, crashing)(create(f"{unique}-c"), None)


def test_a_skewed_client_clock_reaches_the_leases_the_locks_function_builds(
    agents: tuple[workers.Workers, Script], unique: str
) -> None:
    functions, _ = agents
    worker = functions[LOCKS]

    def acquire(resource: str, chaos: dict[str, Any] | None) -> dict[str, Any]:
        body = json.dumps({"owner": "o", "ttlSeconds": 1})
        event = proxy_event(
            "POST",
            "/locks/{resource}",
            f"/locks/{resource}",
            body=body,
            params={"resource": resource},
        )
        answer = worker.invoke_answer(event, chaos=chaos)["result"]
        assert answer["statusCode"] == 201, answer
        return dict(json.loads(answer["body"]))

    before = time.time() * 1000
    true = acquire(f"{unique}-a", None)
    ahead = acquire(f"{unique}-b", {"target": "skewed", "skew": 600.0})
    after = time.time() * 1000
    assert before + 1000 <= true["expiresAt"] <= after + 1000
    # the lease was taken by a clock ten minutes ahead: it expires ten minutes later
    assert before + 601_000 <= ahead["expiresAt"] <= after + 601_000


def test_a_drawn_pause_stops_the_wallet_charge_and_the_provider_log_is_served(
    agents: tuple[workers.Workers, Script], unique: str
) -> None:
    functions, _ = agents
    worker = functions[WALLETS]
    wallet = f"{unique}-w"
    body = json.dumps({"amount": 7})
    event = proxy_event(
        "POST",
        "/wallets/{walletId}/top-ups",
        f"/wallets/{wallet}/top-ups",
        body=body,
        params={"walletId": wallet},
    )
    answer = worker.invoke_answer(event, chaos={"target": "payer", "pause": 0.2})
    assert answer["result"]["statusCode"] == 201, answer
    assert answer["chaos"]["paused"] == {"wallet": wallet, "seconds": 0.2}
    charges = deployed.RemoteProvider(worker).calls("charge")
    assert [(c.wallet_id, c.amount) for c in charges if c.wallet_id == wallet] == [(wallet, 7)]
    plain = worker.invoke_answer(event, chaos={"target": "payer"})
    assert "paused" not in plain["chaos"]


def test_a_hung_dynamodb_cannot_hang_the_function(
    faulted: tuple[workers.Worker, Script], ddb: Any, tables: config.Tables, unique: str
) -> None:
    """The worker's client has the deployed timeouts (``turnstile_ddb.retry.client_config``: 2 s to
    connect, 5 s to read, built by ``service.runtime``): a request DynamoDB never answers ends in
    the function's own 503, well inside the worker harness's bound (the function's timeout +
    30 s; botocore's default 60 s read timeout would exceed it and fail this test)."""
    worker, script = faulted
    script.plan["hung"] = [dynamo_proxy.STALL] * 5
    answer = worker.invoke_answer(create(unique), chaos={"target": "hung"})
    assert answer["result"]["statusCode"] == 503, answer
    assert json.loads(answer["result"]["body"])["error"] == "OUTCOME_UNKNOWN"
    assert stock_of(ddb, tables, unique) is None  # the stalled write never reached DynamoDB Local
