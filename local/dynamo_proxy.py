"""An HTTP proxy in front of DynamoDB Local that can refuse, drop or throttle requests.

Why a proxy: the functions run in worker processes of their own (``local.workers``), from their
synthesized assets, so a botocore hook registered in the test process never sees their calls, and
the worker must load nothing but what Lambda loads. Every worker's DynamoDB endpoint
(``AWS_ENDPOINT_URL_DYNAMODB``) points here instead; each request is judged here before DynamoDB
Local sees it, in this order:

1. ``faults`` (the chaos nemesis, :meth:`chaos.nemesis.Nemesis.decide`): called with the
   request's ``X-Turnstile-Target`` tag (the chaos client whose invocation sent it; the worker's
   chaos agent adds it, ``local/sandbox/chaos_agent.py``), the operation and the JSON body. It may
   answer a :class:`Reply` (a throttle, a ``TransactionConflict`` cancellation, a crash marker)
   without forwarding, or :data:`DROP_BEFORE` / :data:`DROP_AFTER`: the connection is closed with no
   answer, before or after the request reached DynamoDB Local (the client sees
   ``ConnectionClosedError``, a reply lost in transit: maybe applied), or :data:`STALL`: held
   unanswered until the proxy stops, as a hung DynamoDB Local would hold it (only the client's
   own read timeout ends the wait);
2. ``capacity`` (:class:`local.capacity_model.CapacityModel`): DynamoDB's per-partition-key limits;
   a request over them is answered as AWS answers it, without reaching DynamoDB Local.

Anything else is forwarded unchanged (the body untouched, so its ``x-amz-crc32`` stays right) and
DynamoDB Local's answer handed back. The local runtime's standard library server
(``local.sandbox.bootstrap.Server``: a thread per connection, as the workers' pooled clients keep
several open) and a urllib3 pool upstream; bound to 127.0.0.1 only. Streams are not proxied:
the stream pumps read DynamoDB Local directly.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import urllib3

from local.dynamodb_local import INVENTORY_CREATE_PACE_ENV
from local.sandbox.bootstrap import Handler, Server
from local.sandbox.chaos_agent import TARGET_HEADER

if TYPE_CHECKING:
    from local.capacity_model import CapacityModel

log = logging.getLogger("local.dynamo_proxy")

DROP_BEFORE = "drop_before"  # closed unanswered; DynamoDB Local never saw the request
DROP_AFTER = "drop_after"  # forwarded and applied, then closed unanswered
STALL = "stall"  # unanswered while the proxy runs: a hung DynamoDB (the client's timeout ends it)
UPSTREAM_TIMEOUT = 120.0  # the worker's own read timeout decides; this only bounds a hung JVM
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass(frozen=True)
class Reply:
    """An answer given in DynamoDB's place (JSON 1.0 error shape in ``body``)."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def error(cls, code: str, message: str, status: int = 400, **extra: Any) -> Reply:
        body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra}
        return cls(status, body)


Decision = Reply | str | None
FaultPolicy = Callable[[str | None, str, dict[str, Any]], Decision]


@dataclass
class Counts:
    forwarded: int = 0
    replied: int = 0
    dropped: int = 0
    throttled: int = 0


class DynamoProxy:
    """``DynamoProxy(upstream).start()``; ``endpoint`` is the URL to give the workers."""

    def __init__(
        self,
        upstream: str,
        *,
        faults: FaultPolicy | None = None,
        capacity: CapacityModel | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        parts = urlsplit(upstream)
        self.upstream = upstream
        self.faults = faults
        self.capacity = capacity
        self.host = host
        self.counts = Counts()
        self._lock = threading.Lock()
        self._pool = urllib3.HTTPConnectionPool(
            parts.hostname or "127.0.0.1",
            parts.port or 80,
            maxsize=256,
            block=False,
            retries=False,
            timeout=UPSTREAM_TIMEOUT,
        )
        self._server: Server | None = None
        self._stopping = threading.Event()

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://{self.host}:{self._server.server_address[1]}"

    def environment(self, dynamodb_environment: dict[str, str]) -> dict[str, str]:
        """``DynamoDBLocal.environment()`` with the DynamoDB endpoint pointing here. Behind the
        capacity model DynamoDB has limits again: the creation worker is no longer told it has
        none, and paces itself as on a new on-demand table."""
        environment = {**dynamodb_environment, "AWS_ENDPOINT_URL_DYNAMODB": self.endpoint}
        if self.capacity is not None:
            environment.pop(INVENTORY_CREATE_PACE_ENV, None)
        return environment

    def judge(self, target: str | None, operation: str, body: dict[str, Any]) -> Decision:
        """What becomes of one request (None: forward it)."""
        if self.faults is not None:
            decision = self.faults(target, operation, body)
            if decision is not None:
                return decision
        if self.capacity is not None:
            payload = self.capacity.decide(operation, body)
            if payload is not None:
                with self._lock:
                    self.counts.throttled += 1
                return Reply(400, payload, {"x-amzn-RequestId": "capacity-model"})
        return None

    def forward(self, body: bytes, headers: dict[str, str]) -> urllib3.BaseHTTPResponse:
        return self._pool.urlopen(
            "POST", "/", body=body, headers=headers, preload_content=True, release_conn=True
        )

    def start(self) -> DynamoProxy:
        proxy = self

        class Requests(Handler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target = self.headers.get(TARGET_HEADER)
                headers = {
                    key: value
                    for key, value in self.headers.items()
                    if key.lower() not in _HOP_BY_HOP and key.lower() != TARGET_HEADER.lower()
                }
                operation = (self.headers.get("X-Amz-Target") or "").split(".")[-1]
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                decision = proxy.judge(target, operation, body)
                if isinstance(decision, Reply):
                    with proxy._lock:
                        proxy.counts.replied += 1
                    self.send(
                        decision.status,
                        json.dumps(decision.body).encode(),
                        {"Content-Type": "application/x-amz-json-1.0", **decision.headers},
                    )
                    return
                if decision == STALL:
                    proxy._stopping.wait()
                response = None
                if decision in (None, DROP_AFTER):
                    try:
                        response = proxy.forward(raw, headers)
                    except urllib3.exceptions.HTTPError as failed:  # DynamoDB Local went away
                        log.warning("DynamoDB Local did not answer: %s", failed)
                if response is None or decision is not None:
                    with proxy._lock:
                        proxy.counts.dropped += 1
                    self.close_connection = True  # no answer: the client sees the socket close
                    return
                with proxy._lock:
                    proxy.counts.forwarded += 1
                passed = {
                    key: value
                    for key, value in response.headers.items()
                    if key.lower() not in _HOP_BY_HOP and key.lower() not in ("server", "date")
                }
                self.send(response.status, response.data, passed)

        self._server = Server((self.host, 0), Requests)
        serve = self._server.serve_forever
        threading.Thread(target=serve, name="dynamo-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self._pool.close()

    def __enter__(self) -> DynamoProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
