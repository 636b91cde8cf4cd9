"""The functions under the nemesis as deployed: each in its worker, faults through the proxy.

``make chaos`` runs every function (API and stream consumers) as ``make local`` and the e2e tier
do: from its synthesized asset and the layer, in a clean interpreter of its own, its role's policy
enforced (``local.workers``). The nemesis reaches into those processes in two places only, both
local-only and neither part of the asset:

* DynamoDB: every worker's endpoint is a :class:`local.dynamo_proxy.DynamoProxy` whose fault policy
  is :meth:`chaos.nemesis.Nemesis.decide`: throttles, lost replies (before or after the request
  was applied), ``TransactionConflict`` cancellations and crashes are decided there, per request,
  from the seeded stream of the client whose invocation sent it;
* the runtime: the worker's chaos agent (``local/sandbox/chaos_agent.py``, loaded by the local
  bootstrap only when asked) tags each request with that client, raises the crash inside the
  function, skews the leases' clock, pauses a wallet charge and shortens two settings.

:class:`Function` is what the bridge and the stream pumps call in place of a handler: it sends the
calling thread's fault context (client name, clock skew, a drawn pause) with the event, turns a
crashed invocation into the nemesis's :class:`~chaos.nemesis.Crash` (what the workloads and the
stream wrapper expect of a dead instance) and any other function error into API Gateway's 502.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from chaos.nemesis import Crash, Nemesis
from local.sandbox.chaos_agent import CRASH_ERROR
from local.workers import FunctionError, Worker
from service.domain.payments import Call


@dataclass
class Function:
    """A worker called like a handler, under the nemesis. ``pause_seconds``: the length of a
    wallet charge's pause (the wallets function only)."""

    worker: Worker
    nemesis: Nemesis
    pause_seconds: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: Any, context: Any = None) -> Any:
        state = self.nemesis.current()
        chaos: dict[str, Any] | None = None
        if state is not None:
            chaos = {"target": state.name, "skew": state.skew}
            writes = isinstance(event, dict) and event.get("httpMethod") == "POST"
            if self.pause_seconds and writes and self.nemesis.draw_pause(state):
                chaos["pause"] = self.pause_seconds
        started = time.monotonic()
        request_id = getattr(context, "aws_request_id", None) or str(uuid.uuid4())
        try:
            answer = self.worker.invoke_answer(event, request_id, chaos)
        except FunctionError as error:
            if error.error_type == CRASH_ERROR:
                raise Crash(str(error)) from None
            with self._lock:
                self.errors[error.error_type] += 1
            if isinstance(event, dict) and "httpMethod" in event:
                # API Gateway's answer to a function error
                return {"statusCode": 502, "body": json.dumps({"message": "Internal server error"})}
            raise
        paused = (answer.get("chaos") or {}).get("paused")
        if paused and state is not None:
            self.nemesis.log(
                "pause",
                f"{state.name} wallet {paused['wallet']} charge {paused['seconds']:.1f}s",
                at=started,
            )
        return answer["result"]


class RemoteProvider:
    """The payment provider's call log, read from the wallets function's worker."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def calls(self, kind: str | None = None) -> list[Call]:
        return [
            Call(c["kind"], c["wallet_id"], int(c["amount"]), c["reference"], c["charge_id"])
            for c in self.worker.get("/chaos/provider")
            if kind is None or c["kind"] == kind
        ]
