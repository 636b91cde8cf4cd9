"""Helpers several test modules share (builders, readers, a test clock): plain functions, so a
test module never imports another test module (which would also collect its tests twice)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import requests
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ReadTimeoutError

from local import iam
from local import template as cfn
from local.dynamodb_local import CREDENTIALS
from service.domain.errors import OutOfStock
from service.domain.events import REGISTRATION_PREFIX
from service.domain.inventory import SUMMARY, UNIT, Inventory, pool_names, unit_id
from service.domain.products import Products
from service.handlers import wallets
from tests.docs_runner import assume_installed
from turnstile_ddb import claims, codec, metrics, retry

_PATIENT: dict[str, Any] = {}


@dataclass
class History:
    """What every attempt got back, recorded by the threads themselves."""

    succeeded: list[dict[str, Any]] = field(default_factory=list)
    out_of_stock: int = 0
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def api_methods(template: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Every API Gateway method by (HTTP method, full path), the path rebuilt from the
    resources' PathPart and ParentId chain."""
    resources = cfn.resources(template, "AWS::ApiGateway::Resource")

    def path(ref: Any) -> str:
        if isinstance(ref, dict) and "Ref" in ref and ref["Ref"] in resources:
            properties = resources[ref["Ref"]]["Properties"]
            return path(properties["ParentId"]) + "/" + properties["PathPart"]
        return ""  # the API's root resource

    return {
        (m["Properties"]["HttpMethod"], path(m["Properties"]["ResourceId"])): m["Properties"]
        for m in cfn.resources(template, "AWS::ApiGateway::Method").values()
    }


def put(ddb: Any, table: str, *keys: str) -> None:
    for key in keys:
        ddb.put_item(TableName=table, Item={"pk": {"S": key}})


def keys_of(event: dict[str, Any]) -> list[str]:
    return [record["dynamodb"]["Keys"]["pk"]["S"] for record in event["Records"]]


def registration_items(ddb: Any, table: str, event_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "eventId = :e AND begins_with(sk, :p)",
        "ExpressionAttributeValues": codec.values(e=event_id, p=REGISTRATION_PREFIX),
        "ConsistentRead": True,
    }
    while True:
        response = ddb.query(**kwargs)
        items.extend(codec.decode_item(raw) or {} for raw in response["Items"])
        if "LastEvaluatedKey" not in response:
            return items
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def emf_documents(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws"')]


def totals(documents: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """Sum of every value per (pattern, metric) over EMF documents."""
    summed: dict[tuple[str, str], float] = {}
    for document in documents:
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for definition in directive["Metrics"]:
                name = definition["Name"]
                values = document[name]
                values = values if isinstance(values, list) else [values]
                key = (document["pattern"], name)
                summed[key] = summed.get(key, 0.0) + sum(values)
    return summed


def keyed_post(
    resource: str, params: dict[str, str], body: dict[str, Any], key: str | None = None
) -> dict[str, Any]:
    """A JSON ``POST`` to ``resource`` (a path template filled from ``params``), with an
    ``Idempotency-Key`` when ``key`` is given."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = key
    return proxy_event(
        "POST",
        resource,
        resource.format(**params),
        body=json.dumps(body),
        headers=headers,
        params=params,
    )


def top_up(wallet_id: str, amount: int, key: str | None) -> dict[str, Any]:
    return keyed_post(
        "/wallets/{walletId}/top-ups", {"walletId": wallet_id}, {"amount": amount}, key
    )


def balance(wallet_id: str) -> int:
    status, _, body = invoke(
        wallets.handler,
        proxy_event(
            "GET", "/wallets/{walletId}", f"/wallets/{wallet_id}", params={"walletId": wallet_id}
        ),
    )
    assert status == 200
    return int(body["balance"])


class Clock:
    """An injected wall clock (epoch seconds) that only moves when told to."""

    def __init__(self, now: float = 1_900_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        """A sleep on this clock: time moves by what was asked, at once."""
        self.now += max(0.0, seconds)


def inventory_on(ddb: Any, tables: Any, clock: Any = None, **options: Any) -> Inventory:
    """The inventory domain on the test's tables, with a patient client (and ``clock`` when
    given; ``options`` are Inventory's own)."""
    if clock is not None:
        options["clock"] = clock
    return Inventory(
        client=patient(ddb),
        table=tables["inventory"],
        summary_table=tables["inventory_summary"],
        **options,
    )


def item(ddb: Any, table: str, key: str) -> dict[str, Any] | None:
    response = ddb.get_item(
        TableName=table, Key=codec.encode_item({"resource": key}), ConsistentRead=True
    )
    return codec.decode_item(response.get("Item"))


def purchase(product_id: str, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    return keyed_post("/products/{productId}/purchases", {"productId": product_id}, body, key)


def stock_of(ddb: Any, tables: Any, product_id: str) -> tuple[int, int]:
    item = Products(client=ddb, table=tables["products"]).get(product_id)
    return item["stock"], item["version"]


def patient(client: Any) -> Any:
    """The same DynamoDB Local, with a client that waits long for answers: DynamoDB Local makes a
    transaction wait for item locks, and on a loaded shared machine that wait can pass the usual
    5 s read timeout."""
    endpoint = client.meta.endpoint_url
    if endpoint in _PATIENT:
        return _PATIENT[endpoint]
    _PATIENT[endpoint] = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=client.meta.region_name,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=retry.client_config(read_timeout=60),
    )
    return _PATIENT[endpoint]


def units_in_table(ddb: Any, table: str, sku: str) -> list[dict[str, Any]]:
    """Every unit of the sku as the table holds it (one consistent Query per pool partition)."""
    header = codec.decode_item(
        ddb.get_item(
            TableName=table, Key=codec.encode_item({"sku": sku, "sk": "sku"}), ConsistentRead=True
        ).get("Item")
    )
    assert header is not None, f"no sku {sku}"
    items = []
    for pool in pool_names(sku, int(header["pools"])):
        start = None
        while True:
            request: dict[str, Any] = {
                "TableName": table,
                "KeyConditionExpression": "sku = :sku AND begins_with(sk, :unit)",
                "ExpressionAttributeValues": codec.values(sku=pool, unit=UNIT),
                "ConsistentRead": True,
            }
            if start:
                request["ExclusiveStartKey"] = start
            response = ddb.query(**request)
            decoded = (codec.decode_item(raw) for raw in response["Items"])
            items += [item for item in decoded if item is not None]
            start = response.get("LastEvaluatedKey")
            if not start:
                break
    return items


def storm(service: Inventory, sku: str, *, quantity: int, attempts: int, workers: int) -> History:
    history = History()
    barrier = threading.Barrier(workers)

    def worker(count: int) -> None:
        barrier.wait()
        for _ in range(count):
            try:
                reservation = service.reserve(sku, quantity, hold_seconds=600)
            except OutOfStock:
                with history.lock:
                    history.out_of_stock += 1
            except Exception as exc:  # noqa: BLE001 - recorded, then asserted empty
                with history.lock:
                    history.errors.append(exc)
            else:
                with history.lock:
                    history.succeeded.append(reservation)

    per_worker = attempts // workers
    threads = [threading.Thread(target=worker, args=(per_worker,)) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return history


def claims_of(sub: str, *, admin: bool = False) -> dict[str, str]:
    """A caller's claims in API Gateway's REST shape (every value a string, groups joined)."""
    claims = {"sub": sub, "token_use": "id", "cognito:username": sub}
    if admin:
        claims["cognito:groups"] = "admins"
    return claims


ADMIN = claims_of("test-admin", admin=True)


ALICE = claims_of("alice")


BOB = claims_of("bob")


def signed_in(event: dict[str, Any], claims: dict[str, str] | None) -> dict[str, Any]:
    """``event`` as the authorizer passes it on for ``claims`` (``None``: no authorizer ran)."""
    context = dict(event.get("requestContext") or {})
    context.pop("authorizer", None)
    if claims is not None:
        context["authorizer"] = {"claims": claims}
    return {**event, "requestContext": context}


def table_environment(template: dict[str, Any]) -> dict[str, str]:
    """The table variables every function gets, with physical name = logical id (as locally)."""
    names = {logical: logical for logical in cfn.resources(template, "AWS::DynamoDB::Table")}
    return cfn.merged_environment(cfn.function_environments(template, names))


def scan_all(client: Any, table: str) -> list[dict[str, Any]]:
    return client.scan(TableName=table, ConsistentRead=True)["Items"]


def proxy_event(
    method: str,
    resource: str,
    path: str,
    *,
    body: str | None = None,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    caller: dict[str, str] | None = ADMIN,
) -> dict[str, Any]:
    """A REST proxy event as API Gateway sends it, after its authorizer verified ``caller``'s
    token (an administrator unless said; ``None``: no claims at all)."""
    return signed_in(
        {
            "resource": resource,
            "path": path,
            "httpMethod": method,
            "headers": headers if headers is not None else {"Content-Type": "application/json"},
            "pathParameters": params,
            "body": body,
            "isBase64Encoded": False,
            "requestContext": {"requestId": "test"},
        },
        caller,
    )


# Every function's role policy by handler path, filled once per session by the integration tier's
# ``role_policies`` fixture: :func:`invoke` calls a handler as its function, under that policy.
POLICIES: dict[str, iam.RolePolicy] = {}


def invoke(handler: Callable[..., dict[str, Any]], event: dict[str, Any]) -> tuple[int, dict, Any]:
    """Call ``handler`` as its function: its role's policy applies to the wired clients."""
    policy = POLICIES.get(f"{handler.__module__}.{handler.__name__}")
    if policy is None:
        raise LookupError(f"no function of the template runs {handler.__module__}")
    with iam.acting_as(policy):
        response = handler(event, None)
    body = json.loads(response["body"]) if response.get("body") else None
    return response["statusCode"], response.get("headers") or {}, body


class Faults:
    """botocore ``before-send`` hooks: decide, per call, what DynamoDB "says".

    ``throttle(op, times)`` answers the next ``times`` calls of ``op`` with a throttling error
    without sending them. ``lose_reply(op, times)`` sends the next ``times`` calls of ``op`` to
    DynamoDB for real (so they are applied) and then raises a read timeout, as if the reply had
    been lost on the way back.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.plans: dict[str, list[str]] = {}
        self.sent: dict[str, int] = {}
        client.meta.events.register("before-send.dynamodb", self._before_send)

    def throttle(self, operation: str, times: int) -> None:
        self.plans.setdefault(operation, []).extend(["throttle"] * times)

    def lose_reply(self, operation: str, times: int = 1) -> None:
        self.plans.setdefault(operation, []).extend(["lose_reply"] * times)

    def _before_send(self, request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse | None:
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        self.sent[operation] = self.sent.get(operation, 0) + 1
        plan = self.plans.get(operation)
        if not plan:
            return None
        action = plan.pop(0)
        if action == "throttle":
            body = json.dumps(
                {
                    "__type": "com.amazonaws.dynamodb.v20120810#"
                    "ProvisionedThroughputExceededException",
                    "message": "injected throttle",
                }
            ).encode()
            raw = _Raw(body)
            headers = HTTPHeaders.from_dict({"Content-Type": "application/x-amz-json-1.0"})
            return AWSResponse(request.url, 400, headers, raw)
        # lose_reply: apply it for real, then pretend the answer never came
        requests.post(request.url, data=request.body, headers=dict(request.headers), timeout=10)
        raise ReadTimeoutError(endpoint_url=request.url)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body


class Person(requests.Session):
    """An authenticated client: every request carries ``Authorization: Bearer <ID token>``."""

    def __init__(self, username: str, token: str, sub: str) -> None:
        super().__init__()
        self.username = username
        self.token = token
        self.sub = sub
        self.headers["Authorization"] = f"Bearer {token}"

    @property
    def authorization(self) -> dict[str, str]:
        """The header, for a request sent on another connection."""
        return {"Authorization": f"Bearer {self.token}"}

    def session(self) -> Person:
        """Another connection for the same person (a ``requests.Session`` is one per thread)."""
        return Person(self.username, self.token, self.sub)


def check_table(client: Any, tables: Any, sku: str, quantity: int) -> dict[str, list[str]]:
    """The table's own word: holder -> units; every holder's lead unit lists exactly its units."""
    units = units_in_table(client, tables["inventory"], sku)
    by_id = {unit_id(u["sk"]): u for u in units}
    holders: dict[str, list[str]] = defaultdict(list)
    for unit in units:
        if unit["status"] in ("held", "sold"):
            holders[unit["holder"]].append(unit_id(unit["sk"]))
    for holder, held in holders.items():
        lead = by_id[holder.split("-")[0]]
        assert lead.get("holder") == holder, f"{held} held by {holder}, whose lead is not its own"
        members = sorted(unit_id(m["sk"]) for m in lead["members"])
        assert members == sorted(held), (holder, members, held)
        assert len(held) == quantity
    return holders


def summary_of(client: Any, tables: Any, sku: str) -> dict[str, Any]:
    response = client.get_item(
        TableName=tables["inventory_summary"],
        Key=codec.encode_item({"sku": sku, "sk": SUMMARY}),
        ConsistentRead=True,
    )
    return codec.decode_item(response.get("Item")) or {}


def claim_one(client: Any, inventory: Inventory, sku: str) -> dict[str, Any]:
    """One unit of ``sku`` held for a minute, claimed by the library without the API's filter
    (the API offers no unit of a chunk not yet recorded)."""
    now_ms = int(time.time() * 1000)
    taken = claims.reserve(
        client,
        inventory.units,
        pools=pool_names(sku, int(inventory.header(sku)["pools"])),
        quantity=1,
        holder=lambda lead: f"direct-{unit_id(lead['sk'])}",
        now_ms=now_ms,
        until_ms=now_ms + 60_000,
        options=claims.ReserveOptions(backoff=retry.Backoff()),
    )
    return {"reservationId": taken.holder}


def pooled_service(client: Any, tables: Any, **extra: Any) -> Inventory:
    """An inventory service with pool hints of its own (none learnt from other tests)."""
    return Inventory(
        client=client,
        table=tables["inventory"],
        summary_table=tables["inventory_summary"],
        pool_hints=claims.PoolHints(),
        **extra,
    )


def patient_client(dynamodb_local: Any) -> Any:
    """A client of DynamoDB Local that waits a minute for an answer (a loaded machine)."""
    return dynamodb_local.client(config=retry.client_config(read_timeout=60))


def hold_as_rival(client: Any, table: str, key: dict[str, Any]) -> str:
    """Hold the unit at ``key`` for a rival, for ever (as if another reservation took it just
    before ours); returns its unit id."""
    client.update_item(
        TableName=table,
        Key=codec.encode_item(key),
        UpdateExpression="SET #s = :held, holder = :h, holdUntil = :u, claimableAt = :u",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues=codec.values(held="held", h="rival", u=2**52),
    )
    return unit_id(key["sk"])


@contextmanager
def metric_totals() -> Iterator[metrics.Tally]:
    """The metrics counted inside the ``with`` block, and only those."""
    tally = metrics.Tally()
    metrics.add_sink(tally)
    try:
        yield tally
    finally:
        metrics.remove_sink(tally)


REPO = Path(__file__).resolve().parent.parent


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``make ARGS`` in the repository, as a user runs it, output captured. With ``VENV`` set to
    this interpreter's venv and each of its install steps marked done (``-o $(VENV)/.installed``
    and the others, ``docs_runner.assume_installed``): the test runs inside that venv, and must
    never make it rebuild itself underneath."""
    venv = sys.prefix
    return subprocess.run(
        ["make", "--no-print-directory", *assume_installed(venv), f"VENV={venv}", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


# A module's source says it runs make or a docs page here: make() imported from tests.helpers (in
# a one-line or a parenthesized import), a ["make", ...] command of its own, or the docs runner.
_CHECKOUT_USE = re.compile(
    r"from tests\.helpers import ([^\n(]*|\([^)]*)\bmake\b"
    r"|\[\s*[\"']make[\"']"
    r"|docs_runner\.run_page"
)


def runs_in_the_checkout(source: str) -> bool:
    """Whether a test module's ``source`` runs ``make`` or a docs page's commands in this checkout,
    where two workers at once would write the same files."""
    return _CHECKOUT_USE.search(source) is not None
