"""Products and purchases (seed 000): stock guarded by a version number.

Table layout: one item per product, partition key ``productId``; attributes ``name``, ``stock``,
``version`` (starts at 1, every write adds 1).

Two purchase strategies:

* ``atomic`` (default): one ``UpdateItem``, because a purchase is a commutative decrement that does
  not need to see the stock before deciding::

      SET #stock = #stock - :q, #version = #version + :one
      ConditionExpression: attribute_exists(#pk) AND #stock >= :q

* ``versioned``: seed 000's read, decide, version-checked write, via
  :func:`turnstile.versioned.update_versioned`. Right when the write depends on the read in ways a
  condition cannot express (prices, limits per customer, a call to another system in between).

With an ``Idempotency-Key`` the purchase and its stored answer commit in one transaction, which
needs the exact remaining stock before the write, so keyed purchases take the versioned path.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from service import config
from service.domain.errors import AlreadyExists, Conflict, NotFound, OutOfStock, VersionMismatch
from turnstile import codec, retry, versioned
from turnstile.idempotency import Claim, IdempotencyStore

STRATEGIES = ("atomic", "versioned")


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return {key: item[key] for key in ("productId", "name", "stock", "version")}


@dataclass
class Products:
    client: Any
    table: str
    idempotency: IdempotencyStore | None = None
    backoff: retry.Backoff = field(default_factory=config.call_backoff)
    conflicts: retry.Backoff = field(
        default_factory=lambda: retry.Backoff(
            attempts=config.PURCHASE_CONFLICT_ATTEMPTS,
            base=config.PURCHASE_CONFLICT_BASE_SECONDS,
            cap=config.PURCHASE_CONFLICT_CAP_SECONDS,
            budget=config.PURCHASE_CONFLICT_BUDGET_SECONDS,
        )
    )

    def _key(self, product_id: str) -> dict[str, Any]:
        return {"productId": product_id}

    def create(self, product_id: str, name: str, stock: int) -> dict[str, Any]:
        item = {"productId": product_id, "name": name, "stock": stock, "version": 1}
        try:
            retry.call(
                lambda: self.client.put_item(
                    TableName=self.table,
                    Item=codec.encode_item(item),
                    ConditionExpression="attribute_not_exists(productId)",
                ),
                backoff=self.backoff,
                idempotent=False,
            )
        except ClientError as exc:
            if retry.condition_failed(exc):
                raise AlreadyExists(f"product {product_id!r} already exists") from exc
            raise
        return item

    def get(self, product_id: str) -> dict[str, Any]:
        item = versioned.read(self.client, self.table, self._key(product_id), self.backoff)
        if item is None:
            raise NotFound(f"no product {product_id!r}")
        return _public(item)

    def update(
        self, product_id: str, expected_version: int | None, changes: dict[str, Any]
    ) -> dict:
        """Apply ``changes`` only if the product is still at ``expected_version`` (HTTP If-Match);
        ``None`` means "any version" (``If-Match: *``)."""
        if expected_version is None:
            expected_version = self.get(product_id)["version"]
        try:
            item = versioned.update_if_version(
                self.client,
                table=self.table,
                key=self._key(product_id),
                expected=expected_version,
                changes=changes,
                backoff=self.backoff,
            )
        except versioned.VersionMismatch as exc:
            if exc.current is None:
                raise NotFound(f"no product {product_id!r}") from exc
            raise VersionMismatch(
                f"product {product_id!r} is at version {exc.current['version']}, "
                f"not {expected_version}",
                currentVersion=exc.current["version"],
            ) from exc
        return _public(item)

    def purchase(
        self, product_id: str, quantity: int, strategy: str = "atomic", claim: Claim | None = None
    ) -> dict[str, Any]:
        purchase_id = uuid.uuid4().hex
        if claim is not None or strategy == "versioned":
            return self._purchase_versioned(product_id, quantity, purchase_id, claim)
        return self._purchase_atomic(product_id, quantity, purchase_id)

    def _purchase_atomic(self, product_id: str, quantity: int, purchase_id: str) -> dict:
        try:
            response = retry.call(
                lambda: self.client.update_item(
                    TableName=self.table,
                    Key=codec.encode_item(self._key(product_id)),
                    UpdateExpression="SET #stock = #stock - :q, #version = #version + :one",
                    ConditionExpression="attribute_exists(#pk) AND #stock >= :q",
                    ExpressionAttributeNames={
                        "#pk": "productId",
                        "#stock": "stock",
                        "#version": "version",
                    },
                    ExpressionAttributeValues=codec.values(q=quantity, one=1),
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
                backoff=self.backoff,
                idempotent=False,
                pattern="atomic",
            )
        except ClientError as exc:
            if not retry.condition_failed(exc):
                raise
            current = codec.old_item(exc)
            if current is None:
                raise NotFound(f"no product {product_id!r}") from exc
            raise self._out_of_stock(current, quantity) from exc
        item = codec.decode_item(response["Attributes"]) or {}
        return self._receipt(purchase_id, product_id, quantity, item)

    def _purchase_versioned(
        self, product_id: str, quantity: int, purchase_id: str, claim: Claim | None
    ) -> dict:
        def decide(item: dict[str, Any] | None) -> dict[str, Any]:
            if item is None:
                raise NotFound(f"no product {product_id!r}")
            if item["stock"] < quantity:
                raise self._out_of_stock(item, quantity)
            return {"stock": item["stock"] - quantity}

        also = None
        if claim is not None:
            store = self.idempotency
            assert store is not None, "a claim needs an idempotency store"

            def also(item: dict[str, Any] | None, changes: Any) -> list[dict[str, Any]]:
                assert item is not None
                after = {**item, **changes, "version": item["version"] + 1}
                receipt = self._receipt(purchase_id, product_id, quantity, after)
                return [store.complete_op(claim, 201, receipt)]

        try:
            written = versioned.update_versioned(
                self.client,
                table=self.table,
                key=self._key(product_id),
                decide=decide,
                backoff=self.backoff,
                conflicts=self.conflicts,
                also=also,
            )
        except versioned.VersionConflict as exc:
            raise Conflict(
                f"gave up after {exc.attempts} attempts lost to concurrent purchases; retry later"
            ) from exc
        if claim is not None:
            claim.completed = True
        return self._receipt(purchase_id, product_id, quantity, written.item)

    @staticmethod
    def _out_of_stock(item: dict[str, Any], quantity: int) -> OutOfStock:
        return OutOfStock(
            f"only {item['stock']} left, {quantity} requested", available=item["stock"]
        )

    @staticmethod
    def _receipt(purchase_id: str, product_id: str, quantity: int, item: dict) -> dict[str, Any]:
        return {
            "purchaseId": purchase_id,
            "productId": product_id,
            "quantity": quantity,
            "remainingStock": item["stock"],
            "version": item["version"],
        }
