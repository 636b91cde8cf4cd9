"""What each DynamoDB call consumed, counted on the client itself: one adapter, every call site.

:func:`count_consumption` registers three botocore event hooks on a low-level DynamoDB client:

* ``provide-client-params.dynamodb``: every operation whose input accepts
  ``ReturnConsumedCapacity`` (reads, writes, queries, batches, transactions) asks for ``TOTAL``,
  unless the caller chose already (``INDEXES`` is kept: it includes the total);
* ``after-call.dynamodb``: the call is counted (``DynamoDBCall``) and the ``ConsumedCapacity``
  of its answer (one dict, or a list of them for transactions and batches) is added up into
  ``ReadUnits`` and ``WriteUnits``;
* ``after-call-error.dynamodb``: a call that got no answer (a timeout, a refused connection) is
  counted too, with no units.

A call DynamoDB refused (a condition that failed, a cancelled transaction, a throttle) carries no
figure in its error, although AWS charges a refused write its units. Such an answer is counted as
``UnitsUnreported`` instead of being guessed at: the units are what DynamoDB said, never an
estimate.

All figures go to :mod:`turnstile_ddb.metrics` under :data:`PATTERN`, so the host's sinks see them
(the service writes them as EMF once per invocation; the bench reads ``metrics.tally``). Nothing
is registered at import time; registering twice on one client counts once (each hook has its own
``unique_id``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from turnstile_ddb import metrics

__all__ = ["METRICS", "PATTERN", "count_consumption"]

PATTERN = "dynamodb"

# The metrics this module counts (under ``PATTERN``), declared next to the code that counts them.
METRICS: tuple[str, ...] = ("DynamoDBCall", "ReadUnits", "WriteUnits", "UnitsUnreported")

C = TypeVar("C")

_ASKED = "TOTAL"
_HOOKS = "turnstile-consumption"


def _consumed_units(consumed: Any) -> tuple[float, float]:
    """(read units, write units) in one ``ConsumedCapacity`` value: a dict, a list of dicts (one
    per table of a transaction or batch), or nothing. A dict that names only ``CapacityUnits``
    is split by the operation's kind by the caller; here it counts as neither."""
    parts = consumed if isinstance(consumed, list) else [consumed]
    read = write = 0.0
    for part in parts:
        if isinstance(part, dict):
            read += float(part.get("ReadCapacityUnits", 0) or 0)
            write += float(part.get("WriteCapacityUnits", 0) or 0)
    return read, write


def _ask(params: dict[str, Any], model: Any, **_: Any) -> None:
    if "ReturnConsumedCapacity" in model.input_shape.members:
        params.setdefault("ReturnConsumedCapacity", _ASKED)


def _unanswered(**_: Any) -> None:
    metrics.count("DynamoDBCall", pattern=PATTERN)


_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})


def _answer(parsed: dict[str, Any], model: Any, **_: Any) -> None:
    metrics.count("DynamoDBCall", pattern=PATTERN)
    if "Error" in parsed:
        metrics.count("UnitsUnreported", pattern=PATTERN)
        return
    consumed = parsed.get("ConsumedCapacity")
    if consumed is None:
        return
    read, write = _consumed_units(consumed)
    if not read and not write:
        # DynamoDB may name only the total: its kind is the operation's
        total = sum(
            float(part.get("CapacityUnits", 0) or 0)
            for part in (consumed if isinstance(consumed, list) else [consumed])
            if isinstance(part, dict)
        )
        read, write = (total, 0.0) if model.name in _READS else (0.0, total)
    if read:
        metrics.count("ReadUnits", pattern=PATTERN, value=read)
    if write:
        metrics.count("WriteUnits", pattern=PATTERN, value=write)


def count_consumption(client: C) -> C:
    """``client`` (a low-level boto3 DynamoDB client), now counting every call it makes and the
    units DynamoDB says each consumed; returned for chaining. Registering twice counts once."""
    events = client.meta.events  # type: ignore[attr-defined]
    events.register("provide-client-params.dynamodb", _ask, unique_id=f"{_HOOKS}-ask")
    events.register("after-call.dynamodb", _answer, unique_id=f"{_HOOKS}-answer")
    events.register("after-call-error.dynamodb", _unanswered, unique_id=f"{_HOOKS}-unanswered")
    return client
