"""Events and registrations (seed 001): a capacity that concurrent sign-ups cannot overrun.

Table layout (one table, partition key ``eventId``, sort key ``sk``):

* the event item, ``sk = "EVENT"``: ``name``, ``capacity``, ``registered`` (how many hold a seat)
  and ``version`` (+1 on every change). It is the materialized lock: every registration and every
  cancellation changes it, so two of them can never both decide on the same stale count.
* one registration item per user, ``sk = "REG#<userId>"``: ``userId``, ``registeredAt`` and, when
  the registration came from an asynchronous request, ``requestId``.
* GSI ``byUser`` (partition ``userId``, sort ``eventId``, all attributes) lists a user's
  registrations without a scan. Only registration items have ``userId``, so the index is sparse.
  It is eventually consistent: a registration shows there shortly after it commits.

Registering is :func:`turnstile.capacity.join` (event update ``registered < capacity`` plus
registration put ``attribute_not_exists``, in one transaction); cancelling is
:func:`turnstile.capacity.leave`. The exact conditions are written out in that module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from service import config
from service.domain.errors import AlreadyExists, AlreadyRegistered, EventFull, NotFound
from turnstile import capacity, codec, retry, versioned

EVENT_SK = "EVENT"
REGISTRATION_PREFIX = "REG#"


def registration_sk(user_id: str) -> str:
    return f"{REGISTRATION_PREFIX}{user_id}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _event(item: dict[str, Any]) -> dict[str, Any]:
    return {key: item[key] for key in ("eventId", "name", "capacity", "registered", "version")}


def _registration(item: dict[str, Any]) -> dict[str, Any]:
    return {key: item[key] for key in ("eventId", "userId", "registeredAt")}


@dataclass
class Events:
    client: Any
    table: str
    backoff: retry.Backoff = field(default_factory=config.call_backoff)
    transactions: retry.Backoff = field(default_factory=config.registration_backoff)
    clock: Callable[[], str] = now_iso

    def _event_key(self, event_id: str) -> dict[str, Any]:
        return {"eventId": event_id, "sk": EVENT_SK}

    def counter(self, event_id: str) -> capacity.Counter:
        return capacity.Counter(
            table=self.table,
            key=self._event_key(event_id),
            count_attr="registered",
            limit_attr="capacity",
            version_attr="version",
        )

    def _member(self, event_id: str, user_id: str, **attributes: Any) -> capacity.Member:
        return capacity.Member(
            table=self.table,
            key={"eventId": event_id, "sk": registration_sk(user_id)},
            item={"userId": user_id, **attributes},
        )

    def create(self, event_id: str, name: str, capacity_: int) -> dict[str, Any]:
        item = {
            **self._event_key(event_id),
            "name": name,
            "capacity": capacity_,
            "registered": 0,
            "version": 1,
        }
        try:
            retry.call(
                lambda: self.client.put_item(
                    TableName=self.table,
                    Item=codec.encode_item(item),
                    ConditionExpression="attribute_not_exists(eventId)",
                ),
                backoff=self.backoff,
                idempotent=False,
            )
        except ClientError as exc:
            if retry.condition_failed(exc):
                raise AlreadyExists(f"event {event_id!r} already exists") from exc
            raise
        return _event(item)

    def get(self, event_id: str) -> dict[str, Any]:
        item = versioned.read(self.client, self.table, self._event_key(event_id), self.backoff)
        if item is None:
            raise NotFound(f"no event {event_id!r}")
        return _event(item)

    def register(
        self,
        event_id: str,
        user_id: str,
        *,
        also: Sequence[dict[str, Any]] = (),
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Take a seat for ``user_id`` in one transaction. ``also`` adds the caller's own
        transaction elements; if one of them fails, :class:`turnstile.transact.Cancelled` is
        raised unchanged for the caller to read."""
        registered_at = self.clock()
        extra = {"registeredAt": registered_at}
        if request_id is not None:
            extra["requestId"] = request_id
        try:
            capacity.join(
                self.client,
                self.counter(event_id),
                self._member(event_id, user_id, **extra),
                backoff=self.transactions,
                also=also,
            )
        except capacity.AlreadyMember as exc:
            raise AlreadyRegistered(
                f"user {user_id!r} is already registered for event {event_id!r}"
            ) from exc
        except capacity.NoCounter as exc:
            raise NotFound(f"no event {event_id!r}") from exc
        except capacity.Full as exc:
            raise EventFull(
                f"event {event_id!r} is full",
                capacity=exc.counter["capacity"],
                registered=exc.counter["registered"],
            ) from exc
        return {"eventId": event_id, "userId": user_id, "registeredAt": registered_at}

    def unregister(self, event_id: str, user_id: str) -> None:
        """Give the seat back: the reverse transaction (registration gone, ``registered - 1``)."""
        try:
            capacity.leave(
                self.client,
                self.counter(event_id),
                self._member(event_id, user_id),
                backoff=self.transactions,
            )
        except capacity.NotMember as exc:
            raise NotFound(f"user {user_id!r} is not registered for event {event_id!r}") from exc
        except capacity.NoCounter as exc:
            raise NotFound(f"no event {event_id!r}") from exc

    def registrations_of(self, user_id: str) -> list[dict[str, Any]]:
        """Every registration of ``user_id``, by event id (from the eventually consistent GSI)."""
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "IndexName": config.EVENTS_BY_USER_INDEX,
                "KeyConditionExpression": "userId = :user",
                "ExpressionAttributeValues": codec.values(user=user_id),
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            response = retry.call(
                lambda kwargs=kwargs: self.client.query(**kwargs),  # type: ignore[misc]
                backoff=self.backoff,
                idempotent=True,
            )
            items.extend(_registration(codec.decode_item(raw) or {}) for raw in response["Items"])
            start = response.get("LastEvaluatedKey")
            if not start:
                return items
