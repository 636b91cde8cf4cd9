"""Logs, metrics and traces for every function, wired by one decorator: ``@observed``.

Each function module applies it to its entry point, and that is all the wiring there is::

    @observed
    def handler(event, context): ...

Per invocation it does what Powertools' own decorators do, in this order:

* **Tracer** (``capture_lambda_handler``, response not captured: bodies may hold user data). The
  ``Tracer`` is built on the first invocation with ``patch_modules=("botocore",)``, so every
  DynamoDB call is a subsegment. Outside Lambda Powertools disables tracing by itself.
* **Logger** (``inject_lambda_context``): function name, memory, ARN, request id and cold start in
  every line, the API Gateway request id (``requestContext.requestId``) as ``correlation_id``,
  and the verified caller's ``sub`` as ``caller``.
  The service name comes from ``POWERTOOLS_SERVICE_NAME``, which the stack sets per function.
  Powertools keeps those keys in one dictionary per logger; the local bridge runs many
  invocations at once in one process, so the request's own keys are also set with
  ``thread_safe_append_keys`` (per thread, and they win), and cleared when the invocation ends.
* **Metrics**: the library reports contention to ``turnstile_ddb.metrics``; :class:`Pending` is the
  sink that collects those figures, and :func:`flush` writes them as CloudWatch EMF once per
  invocation, in the decorator's ``finally`` (namespace ``turnstile``, one dimension,
  ``pattern``). Answers the client sees as contention (``CONFLICT``, ``THROTTLED``,
  ``HOLD_LAPSED``, ``OUTCOME_UNKNOWN``) are counted here too, under pattern ``api``.

Why not Powertools' ``Metrics`` singleton and ``log_metrics``: its metric set is one module-level
dictionary shared by every instance, mutated without a lock, and serialized then cleared by a
flush. With the local bridge serving 100 threads from one process, a figure added between another
thread's serialize and clear is lost, and one added while it iterates can raise. Here every figure
goes into :class:`Pending` under a lock, and a flush *takes* everything pending in one step (swap
under the lock) and writes it through a fresh ``EphemeralMetrics`` per pattern (Powertools' EMF
writer without shared state). So a figure is flushed exactly once: by the first flush after it was
counted. In Lambda one environment runs one invocation at a time, so that is the invocation's own
figures; in the bridge a flush may carry a concurrent request's figures too, which keeps the totals
exact (nothing lost, nothing twice) but not their attribution to one request.

``service`` is written as EMF metadata (searchable in Logs Insights), not as a dimension: alarms and
the dashboard read a pattern's figures across functions with one metric each.

The process-wide ``turnstile_ddb.metrics.tally`` sees the very same figures; the bench and the tests
compare it with what they counted themselves.

Import time: nothing is built and nothing is patched when this module is imported; the Logger,
the Tracer (which patches botocore) and the sink registration happen on the first invocation.
The Tracer is built only where it traces (:func:`tracing_enabled`): Powertools' ``Tracer``
imports the X-Ray SDK even when it is disabled, and that import builds the SDK's global recorder
and its X-Ray client (botocore loading the X-Ray model): the largest part of a first request
outside Lambda. In Lambda, with SnapStart, :func:`parts` runs before the snapshot
(``service.snapstart.before_snapshot``), so a restored environment does not pay it either.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from service import snapstart
from turnstile_ddb import metrics

NAMESPACE = "turnstile"
DIMENSION = "pattern"
API_PATTERN = "api"
CORRELATION_PATH = "requestContext.requestId"  # Powertools' correlation_paths.API_GATEWAY_REST
ANSWERS = {
    "CONFLICT": "ConflictAnswer",
    "THROTTLED": "ThrottledAnswer",
    "HOLD_LAPSED": "HoldLapsedAnswer",
    "OUTCOME_UNKNOWN": "OutcomeUnknownAnswer",
}

# Every metric turnstile writes, per pattern: what the dashboard draws and docs/operations.md
# lists (:func:`catalog`). Built from what each module declares it counts (``METRICS``, next to its
# code: a unit test checks each declaration against its module's sources), so a metric is listed
# once, where it is counted. Patterns that call DynamoDB through ``turnstile_ddb.retry`` also carry
# its retry figures. The declarations are read from the modules' sources, not imported: the
# catalogue is wanted at deploy time (the dashboard and alarms, ``infra.monitoring``), which must
# not load the Lambda runtime (boto3, the domain modules: tests/infra/test_deploy_time_imports.py),
# and no function needs it at run time.
ALL_PATTERNS = "all"
ROLLUPS = frozenset({"Throttle"})
_FUNCTIONS_DIR = Path(__file__).resolve().parents[1]


def declared(module: str) -> tuple[str, ...]:
    """The names ``module`` (``"turnstile_ddb.claims"``) declares in its ``METRICS``, a literal
    tuple of strings, read from its source file without importing it."""
    path = _FUNCTIONS_DIR.joinpath(*module.split(".")).with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "METRICS"
            and node.value is not None
        ):
            names = ast.literal_eval(node.value)
            if isinstance(names, tuple) and all(isinstance(name, str) for name in names):
                return names
            raise TypeError(f"{module}.METRICS is not a literal tuple of names")
    raise LookupError(f"{module} declares no METRICS")


def _names(*declared_names: tuple[str, ...]) -> tuple[str, ...]:
    """The names given, in order, each once (modules sharing a pattern share names)."""
    return tuple(dict.fromkeys(name for names in declared_names for name in names))


def catalog() -> dict[str, tuple[str, ...]]:
    """Every metric per pattern (``ALL_PATTERNS``: the figures also written summed over them)."""
    lib = "turnstile_ddb."
    retry = declared(lib + "retry")
    return {
        "atomic": retry,
        "versioned": _names(declared(lib + "versioned"), retry),
        "capacity": retry,
        "claims": _names(declared(lib + "claims"), retry),
        # the products domain retries the catalogue read and counts a multi-shard write's conflict
        "sharded": _names(declared(lib + "sharded"), ("CatalogueRetry",), retry),
        # a resize policy's decisions (turnstile_ddb.adaptive's Resizer); products and events
        # count a resizer that raised after a request (service.domain.resizing)
        "adaptive": _names(declared(lib + "adaptive"), ("ResizeError",)),
        "inventory": _names(declared("service.domain.inventory"), retry),
        "slots": _names(declared(lib + "slots"), retry),
        "lease": _names(declared(lib + "lease"), declared(lib + "lease_queue"), retry),
        # the HTTP layer counts a claim it could not give back (service.api.keyed)
        "idempotency": _names(declared(lib + "idempotency"), ("ClaimReleaseFailed",), retry),
        "wallets": ("ChargeAlreadySettled", "RefundRefused"),
        "transact": _names(declared(lib + "transact"), retry),
        # every call a function's client makes, and the units DynamoDB said it consumed
        "dynamodb": _names(declared(lib + "consumption"), retry),
        "decider": (
            "RequestAccepted",
            "RequestRejected",
            "AlreadyDecided",
            "PendingAge",
            "StreamLag",
            "RecordFailed",
            "RecordNotRun",
        ),
        "summary": (
            "SummaryApplied",
            "SummarySkipped",
            "StreamLag",
            "RecordFailed",
            "RecordNotRun",
        ),
        "streams": ("DeadLettered",),
        API_PATTERN: tuple(ANSWERS.values()),
        ALL_PATTERNS: tuple(sorted(ROLLUPS)),
    }


DURATIONS = frozenset({"LeaseWait", "PendingAge", "StreamLag"})  # milliseconds; the rest count

_CONTEXT_FIELDS = ("function_name", "memory_limit_in_mb", "invoked_function_arn", "aws_request_id")

Handler = TypeVar("Handler", bound=Callable[..., Any])


class Pending:
    """Figures counted since the last flush, per (pattern, name): counts summed, durations kept
    one by one (CloudWatch then has their distribution). Thread-safe; :meth:`take` empties it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], float] = {}
        self._durations: dict[tuple[str, str], list[float]] = {}

    def __call__(self, figure: metrics.Figure) -> None:
        key = (figure.pattern, figure.name)
        with self._lock:
            if figure.unit == metrics.COUNT:
                self._counts[key] = self._counts.get(key, 0.0) + figure.value
            else:
                self._durations.setdefault(key, []).append(figure.value)

    def take(self) -> list[metrics.Figure]:
        """Everything pending, removed in the same step (a concurrent take gets none of it)."""
        with self._lock:
            counts, self._counts = self._counts, {}
            durations, self._durations = self._durations, {}
        taken = [
            metrics.Figure(pattern, name, value, metrics.COUNT)
            for (pattern, name), value in counts.items()
        ]
        for (pattern, name), values in durations.items():
            taken += [metrics.Figure(pattern, name, v, metrics.MILLISECONDS) for v in values]
        return taken


def write_emf(figures: list[metrics.Figure], service: str | None, out: TextIO | None = None) -> int:
    """Write ``figures`` as EMF to ``out`` (stdout, which Lambda sends to CloudWatch Logs): one
    document per pattern, more if a metric has over :data:`MAX_VALUES` values. Returns how many
    documents were written.

    Powertools builds and validates each document; it is written here with one ``write`` call
    rather than ``flush_metrics``' ``print``, which writes the line and its newline separately, so
    concurrent flushes (the local bridge) could glue two documents into one unreadable line.
    """
    from aws_lambda_powertools.metrics import EphemeralMetrics
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    if is_metrics_disabled():
        return 0
    stream = out or sys.stdout
    by_pattern: dict[str, list[metrics.Figure]] = defaultdict(list)
    for figure in figures:
        by_pattern[figure.pattern].append(figure)
        if figure.name in ROLLUPS:
            by_pattern[ALL_PATTERNS].append(figure._replace(pattern=ALL_PATTERNS))
    written = 0
    for pattern, group in sorted(by_pattern.items()):
        for chunk in _chunks(group):
            emf = EphemeralMetrics(namespace=NAMESPACE)
            emf.service = ""  # no "service" dimension (see the module docstring): metadata instead
            emf.add_dimension(name=DIMENSION, value=pattern)
            if service:
                emf.add_metadata(key="service", value=service)
            for figure in chunk:
                emf.add_metric(name=figure.name, unit=figure.unit, value=figure.value)
            document = json.dumps(emf.serialize_metric_set(), separators=(",", ":"))
            stream.write(document + "\n")
            written += 1
    stream.flush()
    return written


MAX_VALUES = 99  # Powertools prints a document by itself at 100 values of one metric


def _chunks(group: list[metrics.Figure]) -> list[list[metrics.Figure]]:
    """Split one pattern's figures: at most MAX_VALUES values of a metric per document."""
    chunks: list[list[metrics.Figure]] = [[]]
    seen: dict[str, int] = defaultdict(int)
    for figure in group:
        if seen[figure.name] == MAX_VALUES:
            chunks.append([])
            seen.clear()
        seen[figure.name] += 1
        chunks[-1].append(figure)
    return chunks


@dataclass
class _Parts:
    logger: Any
    tracer: Any  # None where tracing is off (see tracing_enabled)
    pending: Pending


_TRUTHY = ("1", "true", "yes", "on", "y")


def tracing_enabled() -> bool:
    """Whether Powertools' Tracer would trace here: in Lambda (``LAMBDA_TASK_ROOT``), not in an
    emulator (SAM CLI, Chalice), and not turned off by ``POWERTOOLS_TRACE_DISABLED``. Powertools
    decides the same in a private method; these are the environment variables it documents."""
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in _TRUTHY:
        return False
    if os.environ.get("AWS_SAM_LOCAL") or os.environ.get("AWS_CHALICE_CLI_MODE"):
        return False
    return bool(os.environ.get("LAMBDA_TASK_ROOT"))


_parts: _Parts | None = None
_parts_lock = threading.Lock()


def parts() -> _Parts:
    """Logger, Tracer and the metrics sink, built once per process on first use."""
    global _parts
    if _parts is None:
        with _parts_lock:
            if _parts is None:
                from aws_lambda_powertools.logging import Logger

                tracer = None
                if tracing_enabled():
                    from aws_lambda_powertools.tracing import Tracer

                    tracer = Tracer(patch_modules=("botocore",))
                pending = Pending()
                metrics.add_sink(pending)
                _parts = _Parts(Logger(), tracer, pending)
    return _parts


def _prime() -> None:
    parts()


# SnapStart: build the Logger and Tracer before the snapshot, not in each restored environment.
snapstart.before_snapshot(_prime)


def flush() -> int:
    """Write everything counted since the last flush, once (see the module docstring)."""
    built = parts()
    return write_emf(built.pending.take(), os.environ.get("POWERTOOLS_SERVICE_NAME"))


def count_answer(response: Any) -> None:
    """Count a contention answer the client got (409 ``CONFLICT``, 503s) under pattern ``api``."""
    if not isinstance(response, Mapping) or response.get("statusCode") not in (409, 503):
        return
    try:
        code = json.loads(response.get("body") or "{}").get("error")
    except (ValueError, AttributeError):
        return
    if code in ANSWERS:
        metrics.count(ANSWERS[code], pattern=API_PATTERN)


class _ContextView:
    """A context for ``inject_lambda_context`` from one that lacks some Lambda fields (the local
    bridge and pump); everything else is the caller's context."""

    def __init__(self, context: Any) -> None:
        self._context = context
        self.function_name = getattr(context, "function_name", "local")
        self.memory_limit_in_mb = getattr(context, "memory_limit_in_mb", 0)
        self.invoked_function_arn = getattr(context, "invoked_function_arn", "local")
        self.aws_request_id = getattr(context, "aws_request_id", "local")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def observed(handler: Handler) -> Handler:
    """The one decorator for a function's ``handler(event, context)``: see the module docstring."""
    wrapped: dict[str, Callable[..., Any]] = {}

    def build() -> tuple[_Parts, Callable[..., Any], Callable[..., Any]]:
        built = parts()
        if not wrapped:
            traced = handler
            if built.tracer is not None:
                traced = built.tracer.capture_lambda_handler(handler, capture_response=False)
            wrapped["traced"] = traced
            wrapped["logged"] = built.logger.inject_lambda_context(
                traced, correlation_id_path=CORRELATION_PATH
            )
        return built, wrapped["traced"], wrapped["logged"]

    @functools.wraps(handler)
    def entry(event: Any, context: Any) -> Any:
        built, traced, logged = build()
        keys = _request_keys(event, context)
        if keys:
            built.logger.thread_safe_append_keys(**keys)
        try:
            if context is None:  # a test calling the handler directly: no context to log
                response = traced(event, context)
            else:
                if not all(hasattr(context, name) for name in _CONTEXT_FIELDS):
                    context = _ContextView(context)
                response = logged(event, context)
            count_answer(response)
            return response
        finally:
            if keys:
                built.logger.thread_safe_clear_keys()
            flush()

    return entry  # type: ignore[return-value]


def _request_keys(event: Any, context: Any) -> dict[str, str]:
    keys: dict[str, str] = {}
    request_context = event.get("requestContext") if isinstance(event, Mapping) else None
    if isinstance(request_context, Mapping) and request_context.get("requestId"):
        keys["correlation_id"] = str(request_context["requestId"])
    # who called: the verified sub (an opaque id, not a name), so one user's requests can be
    # followed through the logs; unverified input is never logged as the caller
    authorizer = request_context.get("authorizer") if isinstance(request_context, Mapping) else None
    claims = authorizer.get("claims") if isinstance(authorizer, Mapping) else None
    if isinstance(claims, Mapping) and isinstance(claims.get("sub"), str):
        keys["caller"] = claims["sub"]
    request_id = getattr(context, "aws_request_id", None)
    if request_id:
        keys["function_request_id"] = str(request_id)
    return keys


def summary(totals: Mapping[tuple[str, str], float]) -> str:
    """One readable line of running totals, grouped by pattern (the local runner logs it);
    durations are summed milliseconds."""
    by_pattern: dict[str, list[str]] = defaultdict(list)
    for (pattern, name), value in sorted(totals.items()):
        shown = f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
        unit = "ms" if name in DURATIONS else ""
        by_pattern[pattern].append(f"{name}={shown}{unit}")
    return " | ".join(f"{pattern}: {' '.join(names)}" for pattern, names in by_pattern.items())
