"""Transactional writes across items and tables, with exact reasons when they are cancelled.

``TransactWriteItems`` is all-or-nothing. When any condition fails, DynamoDB cancels the whole
transaction and returns one ``CancellationReason`` per item, in request order: ``None`` for the
items that were fine, ``ConditionalCheckFailed`` (with the item's old image when the item asked
for ``ReturnValuesOnConditionCheckFailure=ALL_OLD``) for the ones that were not, and
``TransactionConflict`` when another transaction held one of the items.

:func:`transact_write` sends a transaction with a ``ClientRequestToken``, which makes a resend
idempotent (within ten minutes DynamoDB recognises the token and does not apply it again), so it is
safe to retry after throttling, after a timeout, and after a ``TransactionConflict``. A
cancellation for a failed condition is final and raised as :class:`Cancelled`, whose ``reasons``
say which item failed and what it held. The helper knows nothing about tables: every item names
its own, which is what lets one transaction keep a counter in one table and a registration in
another (a separate lock table beside the data).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from turnstile_ddb import _contract, _core, codec, errors, metrics, retry

if TYPE_CHECKING:
    pass

__all__ = ["METRICS", "Cancelled", "Reason", "new_token", "reasons_of", "transact_write"]

# The metrics this module counts itself (pattern ``transact``; its calls' retries: retry.METRICS).
METRICS: tuple[str, ...] = ("TransactionRetry",)


@dataclass(frozen=True)
class Reason:
    """Why one item of a cancelled transaction failed ("None" when it did not)."""

    code: str
    message: str
    item: dict[str, Any] | None

    @property
    def failed(self) -> bool:
        return self.code != "None"


class Cancelled(errors.Refused):
    """A transaction was cancelled because a condition failed; ``reasons`` align with the items."""

    def __init__(self, reasons: Sequence[Reason]) -> None:
        codes = ",".join(reason.code for reason in reasons)
        super().__init__(f"transaction cancelled: [{codes}]")
        self.reasons = list(reasons)

    def failed_at(self, index: int) -> bool:
        return index < len(self.reasons) and self.reasons[index].code == "ConditionalCheckFailed"


def reasons_of(exc: ClientError) -> list[Reason]:
    raw = exc.response.get("CancellationReasons") or []
    return [
        Reason(
            code=str(reason.get("Code", "None")),
            message=str(reason.get("Message", "")),
            item=codec.decode_item(reason.get("Item")),
        )
        for reason in raw
    ]


_THROTTLED = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})


def _is_conflict(exc: BaseException, *, conflicts: bool = True) -> bool:
    if retry.error_code(exc) == "TransactionConflictException":
        return conflicts
    if retry.error_code(exc) == "InternalServerError":
        # A 500 is retryable, and a resend under the same token is applied at most once.
        # (DynamoDB Local also answers it when a transaction waits too long for an item lock,
        # where DynamoDB would cancel with TransactionConflict or simply succeed.)
        metrics.count("TransactionRetry", pattern="transact")
        return True
    if retry.error_code(exc) != "TransactionCanceledException":
        return False
    codes = {reason.code for reason in reasons_of(exc)}  # type: ignore[arg-type]
    # Retry only when nothing failed for a reason that a resend would not change.
    retryable = _THROTTLED | ({"TransactionConflict"} if conflicts else set())
    return codes <= retryable | {"None"} and bool(codes & retryable)


def new_token() -> str:
    return uuid.uuid4().hex


def transact_write_protocol(
    items: Sequence[dict[str, Any]],
    *,
    backoff: retry.Backoff,
    token: str | None = None,
    pattern: str = "transact",
    retry_conflicts: bool = True,
) -> _core.Steps[None]:
    """Apply ``items`` atomically, or raise :class:`Cancelled` with a reason per item.

    Retries throttling, timeouts and ``TransactionConflict`` under ``backoff``, resending the same
    ``ClientRequestToken`` each time so a transaction that was applied but not acknowledged is
    not applied twice. Retries count under ``pattern`` (``turnstile_ddb.metrics``). With
    ``retry_conflicts=False`` a ``TransactionConflict`` is final too (:class:`Cancelled`): for
    callers that would rather pick another item than wait for this one.
    """
    # The elements are built as plain dicts by each pattern; their shape is the API's.
    request = {"TransactItems": list(items), "ClientRequestToken": token or new_token()}
    try:
        yield from retry.retrying(
            _core.Call("transact_write_items", request),
            backoff=backoff,
            idempotent=True,
            retry_on=lambda exc: _is_conflict(exc, conflicts=retry_conflicts),
            pattern=pattern,
        )
    except ClientError as exc:
        if retry.error_code(exc) == "TransactionCanceledException":
            raise Cancelled(reasons_of(exc)) from exc
        raise


transact_write = _contract.write(_core.driven(transact_write_protocol))
