"""The chaos nemesis's hands inside one worker: local only, loaded only by ``make chaos``.

Never deployed, never loaded by ``make local`` or the e2e tier: the local runtime's bootstrap
(``bootstrap.py``) loads this file only when its config carries ``"chaos"`` settings, and the
function's asset and layer stay exactly what Lambda loads. Standard library only (botocore and the
service's modules are reached through the asset and the layer, after the handler is imported).

What it does, per invocation (the caller sends ``{"target", "skew", "pause"}`` with the event):

* **tags** every DynamoDB request the invocation's thread sends with ``X-Turnstile-Target: <name>``
  (the chaos client or stream consumer that caused it), so the fault proxy in front of DynamoDB
  Local (``local.dynamo_proxy``) decides that request's fate with that client's seeded stream;
* **crashes**: a proxy answer carrying ``X-Turnstile-Crash`` raises :class:`Crash` (a
  ``BaseException``: no ``except Exception`` in the function swallows it) inside the call, and every
  later call of the invocation raises it too, before sending: the instance died there. The
  bootstrap answers the invocation as Lambda answers for a dead runtime (``Runtime.ExitError``);
* **clock skew**: the leases the function builds (``service.domain.locks.leases``, used by the
  locks and wallets functions) read this thread's skewed clock, as the in-process runner did;
* **pauses** a wallet charge (the payment provider's ``before_charge``) for ``pause`` seconds, and
  reports it in the invocation's answer so the nemesis logs it;
* **shorter settings**, as the in-process runner injected them: the idempotency lock (so a crashed
  keyed request resumes within a run) and the wallet lease (so a paused charge outlives it);
* serves the payment provider's call log (``GET /chaos/provider``) for the wallet checker: the
  fake provider lives in the wallets function's process, as it does deployed.

Threads the function starts itself (a pool for parallel reads) carry no tag: their calls are not
faulted and read the true clock.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import time
from collections.abc import Iterator
from typing import Any

TARGET_HEADER = "X-Turnstile-Target"
CRASH_HEADER = "X-Turnstile-Crash"
CRASH_ERROR = "Runtime.ExitError"  # what Lambda reports when the runtime process dies


class Crash(BaseException):
    """The function instance died here: nothing after this point runs."""


class Agent:
    """One worker's chaos state; ``settings``: ``idempotency_lock_ms``, ``wallet_lease_ms``."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self._local = threading.local()
        self.provider: Any = None

    # -- per invocation --------------------------------------------------------------------------

    @contextlib.contextmanager
    def invocation(self, chaos: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
        """The caller's chaos context for this thread; yields the report for the answer."""
        report: dict[str, Any] = {}
        local = self._local
        local.target = (chaos or {}).get("target")
        local.skew = float((chaos or {}).get("skew") or 0.0)
        local.pause = float((chaos or {}).get("pause") or 0.0)
        local.crashed = False
        local.report = report
        try:
            yield report
        finally:
            local.target, local.skew, local.pause, local.crashed = None, 0.0, 0.0, False

    def clock(self) -> float:
        """Epoch seconds by this invocation's (possibly skewed) clock."""
        return time.time() + getattr(self._local, "skew", 0.0)

    def before_charge(self, wallet_id: str, amount: int, reference: str) -> None:
        seconds = getattr(self._local, "pause", 0.0)
        if seconds > 0:
            self._local.pause = 0.0
            self._local.report["paused"] = {"wallet": wallet_id, "seconds": seconds}
            time.sleep(seconds)

    # -- botocore hooks (on every session the function creates) -----------------------------

    def before_send(self, **kwargs: Any) -> None:
        request = kwargs["request"]
        target = getattr(self._local, "target", None)
        if target is None:
            return
        if self._local.crashed:
            raise Crash(f"{target} (already crashed)")
        request.headers[TARGET_HEADER] = target

    def before_parse(self, **kwargs: Any) -> None:
        headers = kwargs["response_dict"].get("headers") or {}
        where = headers.get(CRASH_HEADER) or headers.get(CRASH_HEADER.lower())
        if where and getattr(self._local, "target", None) is not None:
            self._local.crashed = True
            raise Crash(where)

    def install(self) -> None:
        """Hook every botocore session created from now on (the function's own clients)."""
        import botocore.session

        original = botocore.session.get_session

        def get_session(env_vars: Any = None) -> Any:
            session = original(env_vars)
            session.register("before-send.dynamodb", self.before_send)
            session.register("before-parse.dynamodb", self.before_parse)
            return session

        botocore.session.get_session = get_session

    # -- after the handler is imported ----------------------------------------------------------

    def configure(self, handler_module: Any) -> None:
        """The shorter settings, skewed lease clocks, the pausing provider (what applies)."""
        config = importlib.import_module("service.config")
        if "idempotency_lock_ms" in self.settings:
            config.IDEMPOTENCY_LOCK_MS = int(self.settings["idempotency_lock_ms"])  # type: ignore[attr-defined]
        locks = importlib.import_module("service.domain.locks")
        build_leases = locks.leases
        agent = self

        def skewed_leases(client: Any, table: str) -> Any:
            leases = build_leases(client, table)
            leases.clock = agent.clock
            return leases

        locks.leases = skewed_leases  # type: ignore[attr-defined]
        if hasattr(handler_module, "provider") and hasattr(handler_module, "Wallets"):
            payments = importlib.import_module("service.domain.payments")
            self.provider = payments.FakeProvider(before_charge=self.before_charge)
            handler_module.provider.set(self.provider)
            if "wallet_lease_ms" in self.settings:
                handler_module.Wallets = functools.partial(
                    handler_module.Wallets, lease_ms=int(self.settings["wallet_lease_ms"])
                )

    def get(self, path: str) -> Any:
        """``GET`` routes of the worker for the chaos runner (None: no such route)."""
        if path == "/chaos/provider":
            calls = self.provider.calls() if self.provider is not None else []
            return [
                {
                    "kind": c.kind,
                    "wallet_id": c.wallet_id,
                    "amount": c.amount,
                    "reference": c.reference,
                    "charge_id": c.charge_id,
                }
                for c in calls
            ]
        return None
