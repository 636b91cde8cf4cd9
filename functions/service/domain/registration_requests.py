"""Asynchronous registration: requests decided one by one, in stream order.

Table layout: partition key ``eventId``, sort key ``requestId``; attributes ``userId``, ``status``
(PENDING, then ACCEPTED or REJECTED), ``reason`` (why it was rejected), ``requestedAt``,
``decidedAt`` and ``expiresAt`` (TTL, cleanup only). The table's stream feeds the decider.

Submitting writes a PENDING item and returns at once (HTTP 202)::

    PutItem  ConditionExpression: attribute_not_exists(eventId)

All requests of one event share a partition key, so their stream records arrive in the order they
were written and the decider sees them first come, first served.

Deciding accepts through the very transaction a synchronous registration uses (event counter
``registered < capacity`` plus registration ``attribute_not_exists``), with one more element that
makes the decision happen once per request::

    Update request  SET #status = :accepted, #decidedAt = :now
                    ConditionExpression: #status = :pending

so the sync and async paths share one counter and together never pass ``capacity``. When the
transaction is refused because the event is full, the user already holds a seat or the event is
gone, the request is rejected with that reason::

    UpdateItem  SET #status = :rejected, #reason = :reason, #decidedAt = :now
                ConditionExpression: #status = :pending

Both writes are conditioned on PENDING, so a redelivered record, a retried batch or a full replay of
the stream finds the request decided and changes nothing: no second seat, no double count. The
decision is keyed by the request id (the item's key), not by anything in the delivery.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from service import config
from service.domain.errors import AlreadyRegistered, EventFull, NotFound
from service.domain.events import Events, now_iso
from turnstile_ddb import capacity, codec, creation, errors, retry, transact, versioned

PENDING = "PENDING"
ACCEPTED = "ACCEPTED"
REJECTED = "REJECTED"


@dataclass(frozen=True)
class Decision:
    request_id: str
    status: str
    reason: str | None = None


def _public(item: dict[str, Any]) -> dict[str, Any]:
    body = {key: item[key] for key in ("requestId", "userId", "status")}
    if item.get("reason"):
        body["reason"] = item["reason"]
    return body


@dataclass
class RegistrationRequests:
    client: Any
    table: str
    events: Events
    backoff: retry.Backoff = field(default_factory=config.call_backoff)
    clock: Callable[[], str] = now_iso
    epoch: Callable[[], float] = time.time
    keep_seconds: int = config.REGISTRATION_REQUEST_KEEP_SECONDS

    def _key(self, event_id: str, request_id: str) -> dict[str, Any]:
        return {"eventId": event_id, "requestId": request_id}

    def submit(self, event_id: str, user_id: str) -> dict[str, Any]:
        """Record a PENDING request for an existing event; the decider takes it from here."""
        self.events.get(event_id)  # 404 for an unknown event; events are never deleted
        request_id = uuid.uuid4().hex
        item = {
            **self._key(event_id, request_id),
            "userId": user_id,
            "status": PENDING,
            "requestedAt": self.clock(),
            config.TTL_ATTRIBUTE: int(self.epoch()) + self.keep_seconds,
        }
        # A fresh request id: the condition only guards against writing over an existing request.
        creation.create_if_absent(
            self.client, table=self.table, item=item, key_attr="eventId", backoff=self.backoff
        )
        return {"requestId": request_id, "status": PENDING}

    def get(self, event_id: str, request_id: str) -> dict[str, Any]:
        item = versioned.read(
            self.client, self.table, self._key(event_id, request_id), self.backoff
        )
        if item is None:
            raise NotFound(f"no registration request {request_id!r} for event {event_id!r}")
        return _public(item)

    def decide(self, event_id: str, request_id: str, user_id: str) -> Decision | None:
        """Accept or reject a PENDING request; None when it was decided before (a redelivery)."""
        still_pending = {
            "Update": {
                "TableName": self.table,
                "Key": codec.encode_item(self._key(event_id, request_id)),
                "UpdateExpression": "SET #status = :accepted, #decidedAt = :now",
                "ConditionExpression": "#status = :pending",
                "ExpressionAttributeNames": {"#status": "status", "#decidedAt": "decidedAt"},
                "ExpressionAttributeValues": codec.values(
                    accepted=ACCEPTED, pending=PENDING, now=self.clock()
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        try:
            self.events.register(event_id, user_id, also=[still_pending], request_id=request_id)
        except transact.Cancelled as exc:
            # Our own "still PENDING" element failed: an earlier delivery decided it.
            if exc.failed_at(capacity.ALSO_OFFSET):
                return None
            raise
        except EventFull:
            return self._reject(event_id, request_id, EventFull.code)
        except AlreadyRegistered:
            return self._reject(event_id, request_id, AlreadyRegistered.code)
        except NotFound:
            return self._reject(event_id, request_id, NotFound.code)
        return Decision(request_id, ACCEPTED)

    def _reject(self, event_id: str, request_id: str, reason: str) -> Decision | None:
        try:
            retry.call(
                lambda: self.client.update_item(
                    TableName=self.table,
                    Key=codec.encode_item(self._key(event_id, request_id)),
                    UpdateExpression=(
                        "SET #status = :rejected, #reason = :reason, #decidedAt = :now"
                    ),
                    ConditionExpression="#status = :pending",
                    ExpressionAttributeNames={
                        "#status": "status",
                        "#reason": "reason",
                        "#decidedAt": "decidedAt",
                    },
                    ExpressionAttributeValues=codec.values(
                        rejected=REJECTED, reason=reason, pending=PENDING, now=self.clock()
                    ),
                ),
                backoff=self.backoff,
                # A resend after a lost answer finds the request decided: same end state.
                idempotent=True,
            )
        except errors.AwsRefused as exc:
            if retry.condition_failed(exc):
                return None
            raise
        return Decision(request_id, REJECTED, reason)
