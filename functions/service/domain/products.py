"""Products and purchases: stock guarded by a version number.

Table layout: one item per product, partition key ``productId``; attributes ``name``, ``stock``,
``version`` (starts at 1, every write adds 1).

Two purchase strategies:

* ``atomic`` (default): one ``UpdateItem``, because a purchase is a commutative decrement that does
  not need to see the stock before deciding (:func:`turnstile_ddb.versioned.decrement`)::

      SET #n = #n - :amount, #version = #version + :one      (#n: stock)
      ConditionExpression: #n >= :amount

* ``versioned``: optimistic locking's read, decide, version-checked write, via
  :func:`turnstile_ddb.versioned.update_versioned`. Right when the write depends on the read in
  ways a
  condition cannot express (prices, limits per customer, a call to another system in between).

With an ``Idempotency-Key`` the purchase and its stored answer commit in one transaction, which
needs the exact remaining stock before the write, so keyed purchases take the versioned path.

Sharded products (``shards`` > 1 at creation, for flash sales past one item's write limit): the
product item keeps ``name``, ``shards`` and ``version`` but no ``stock``; the stock lives in
``shards`` items ``productId = "<id>#<k>"`` (``#`` is not allowed in ids, so they cannot collide),
each with ``stock`` and a copy of ``version``, written by :mod:`turnstile_ddb.sharded`:

* a purchase takes from one random shard and fails over (``strategy`` is ignored);
  ``OUT_OF_STOCK`` only after one consistent read of every shard held less than ``quantity`` in
  total. ``remainingStock`` in the receipt is what the shard(s) served still hold: a lower bound
  of the total. ``version`` is the catalogue version (below);
* ``GET`` sums the shards (one ``GetItem`` + one ``BatchGetItem``);
* ``version`` / ``ETag`` is the catalogue version: it counts changes of ``name`` and of the stock
  by ``PATCH`` and restocks, not sales (which would put every sale back on one hot item).
  ``If-Match`` therefore still refuses a ``PATCH`` based on a stale read of the catalogue (two
  admins editing), but not one that raced with sales: ``PATCH stock`` sets the total to exactly the
  value sent, in one transaction over every shard, whatever was sold in between. To add units
  without losing concurrent sales, use :meth:`Products.restock`.
* a keyed purchase (``Idempotency-Key``) reads every shard and commits the decrement of one shard
  that holds the whole quantity (or, when none does, of several whose counts add up to it, as the
  unkeyed path does), each conditioned on the count read, with its stored answer in one
  transaction (retried on a race). ``OUT_OF_STOCK`` only when the shards together hold too few.

Products whose shard count follows the load (``adaptive`` at creation): the same sharded layout,
created with ``shards`` shards (1 unless asked), the product item marked ``adaptive``. After each
sharded purchase (sold or refused) the service's :class:`Resizes` (a
:class:`turnstile_ddb.adaptive.Resizer` in Lambda) decides whether to grow or shrink the shards,
from what this process observed; the resize is one transaction of :mod:`turnstile_ddb.sharded`,
which never changes the total. A resize that fails never fails the purchase: it is counted
(``ResizeError``, pattern ``adaptive``) and logged, and the sale stands. A sharded product created
with ``shards`` > 1 is resized the same way. The product item's ``shards`` is the count at
creation; the current count is on the shards, and a purchase learns it from them.

The process remembers which products are sharded (a product item never changes between one item
and shards); the first purchase of a product in a process learns it from the product item's
ALL_OLD image.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from service import config
from service.domain.errors import AlreadyExists, Conflict, NotFound, OutOfStock, VersionMismatch
from service.domain.resizing import Resizes, after_request, is_sharded
from service.lru import LRU
from turnstile_ddb import codec, creation, metrics, retry, sharded, transact, versioned
from turnstile_ddb.idempotency import IdempotencyStore, InProgress

# ``shard_counts``' entry for a product that is one item (no shards).
SINGLE = 0


def layout_of(item: dict[str, Any]) -> int:
    """What ``shard_counts`` keeps of a product item: its shards, or :data:`SINGLE`."""
    return int(item.get("shards", 1)) if is_sharded(item) else SINGLE


class _Sharded(Exception):
    """The product turned out to be sharded (learnt from its item); carries its shard count."""

    def __init__(self, shards: int) -> None:
        super().__init__(f"{shards} shards")
        self.shards = shards


# An unsharded product (a sharded one's item is its catalogue parent, without stock).
UNSHARDED = versioned.Condition(
    "attribute_not_exists(#xshards) OR #xshards = :xone",
    names={"#xshards": "shards"},
    values={":xone": 1},
)


def _public(item: dict[str, Any]) -> dict[str, Any]:
    public = {key: item[key] for key in ("productId", "name", "stock", "version")}
    if item.get("shards", 1) > 1:
        public["shards"] = item["shards"]
    if item.get("adaptive"):
        public["adaptive"] = True
    return public


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
        )
    )

    # learnt (shards at creation, or SINGLE); the most recently used only (a forgotten one is
    # learnt again)
    shard_counts: LRU[str, int] = field(default_factory=lambda: LRU(config.SHARD_COUNTS_KEPT))
    # What this process learnt of sharded products' shards (runtime.sharded_hints in Lambda).
    hints: sharded.Hints = field(default_factory=sharded.Hints)
    # The random choices of sharded purchases (which shard, how to spread): inject a seeded one
    # to replay them (the simulator does).
    rand: random.Random = field(default_factory=random.Random)
    # Decides after each sharded purchase whether to resize the product's shards (none: never).
    resizer: Resizes | None = None

    def _key(self, product_id: str) -> dict[str, Any]:
        return {"productId": product_id}

    def counter(self, product_id: str, shards: int) -> sharded.ShardedCounter:
        return sharded.ShardedCounter(self.table, "productId", product_id, shards, "stock")

    def create(
        self, product_id: str, name: str, stock: int, shards: int = 1, adaptive: bool = False
    ) -> dict[str, Any]:
        if shards > 1 or adaptive:
            return self._create_sharded(product_id, name, stock, shards, adaptive)
        item = {"productId": product_id, "name": name, "stock": stock, "version": 1}
        try:
            creation.create_if_absent(
                self.client, table=self.table, item=item, key_attr="productId", backoff=self.backoff
            )
        except creation.AlreadyExists as exc:
            raise AlreadyExists(f"product {product_id!r} already exists") from exc
        self.shard_counts.put(product_id, SINGLE)
        return item

    def _create_sharded(
        self, product_id: str, name: str, stock: int, shards: int, adaptive: bool
    ) -> dict[str, Any]:
        counter = self.counter(product_id, shards)
        parent = {"productId": product_id, "name": name, "shards": shards, "version": 1}
        if adaptive:
            parent["adaptive"] = True
        created = [parent, *sharded.shard_items(counter, stock, version=1)]
        elements = [creation.put_new_op(self.table, item, "productId") for item in created]
        try:
            transact.transact_write(self.client, elements, backoff=self.backoff)
        except transact.Cancelled as exc:
            raise AlreadyExists(f"product {product_id!r} already exists") from exc
        self.shard_counts.put(product_id, shards)
        return _public({**parent, "stock": stock})

    def _parent(self, product_id: str) -> dict[str, Any]:
        item = versioned.read(self.client, self.table, self._key(product_id), self.backoff)
        if item is None:
            raise NotFound(f"no product {product_id!r}")
        self.shard_counts.put(product_id, layout_of(item))
        return item

    def get(self, product_id: str) -> dict[str, Any]:
        item = self._parent(product_id)
        if is_sharded(item):
            counter = self.counter(product_id, item["shards"])
            counts = sharded.read_all(self.client, counter, self.backoff)
            # the current layout's shards (a resize may have changed the count at creation)
            item["stock"], item["shards"] = sum(counts), len(counts)
        return _public(item)

    def restock(self, product_id: str, units: int) -> dict[str, Any]:
        """Add ``units`` to the stock, exactly, whatever sells meanwhile (+1 catalogue version)."""
        # A known count (it never changes) spares the read: the add's condition refuses a
        # product that is missing or sharded by itself.
        shards = self.shard_counts.get(product_id)
        if shards is None:
            shards = layout_of(self._parent(product_id))
        if shards == SINGLE:
            # A commutative add: one write, no read to go stale, so concurrent sales never make
            # it conflict (``attribute_exists(stock)``: never onto a sharded product's parent).
            try:
                item = versioned.increment(
                    self.client,
                    table=self.table,
                    key=self._key(product_id),
                    attr="stock",
                    amount=units,
                    backoff=self.backoff,
                )
            except versioned.NoSuchItem as exc:
                raise NotFound(f"no product {product_id!r}") from exc
            return _public(item)
        try:
            sharded.add(
                self.client,
                self.counter(product_id, shards),
                units,
                backoff=self.backoff,
                also=[versioned.bump_op(self.table, self._key(product_id), {})],
                increments=("version",),
                hints=self.hints,
            )
        except transact.Cancelled as exc:
            raise NotFound(f"no product {product_id!r}") from exc
        return self.get(product_id)

    def update(
        self, product_id: str, expected_version: int | None, changes: dict[str, Any]
    ) -> dict:
        """Apply ``changes`` only if the product is still at ``expected_version`` (HTTP If-Match);
        ``None`` (``If-Match: *``) means any current representation (RFC 9110): no version check,
        only that the product exists."""
        if self.shard_counts.get(product_id) != SINGLE:
            shards = layout_of(self._parent(product_id))
            if shards != SINGLE:
                return self._update_sharded(product_id, shards, expected_version, changes)
        try:
            if expected_version is None:
                item = self._update_any(product_id, changes)
            else:
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

    def _update_any(self, product_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """``changes`` and version+1 on an unsharded product at whatever version it is: one
        write, so sales in between (each moves the version) cannot make it fail."""
        try:
            return versioned.bump(
                self.client,
                table=self.table,
                key=self._key(product_id),
                changes=changes,
                backoff=self.backoff,
                condition=UNSHARDED,
            )
        except versioned.NoSuchItem as exc:
            raise versioned.VersionMismatch(None) from exc
        except versioned.ConditionFailed as exc:
            raise versioned.VersionMismatch(exc.current) from exc

    def _update_sharded(
        self, product_id: str, shards: int, expected: int | None, changes: dict[str, Any]
    ) -> dict[str, Any]:
        """``expected`` None (``If-Match: *``): the catalogue version is read and checked, and a
        race with another catalogue change (sales do not move it) is read again and retried, so
        the client never sees a version it did not name."""
        attempt = 1
        while True:
            at = expected if expected is not None else self._parent(product_id)["version"]
            try:
                return self._update_sharded_at(product_id, shards, at, changes)
            except VersionMismatch:
                if expected is not None or attempt >= self.conflicts.attempts:
                    raise
                metrics.count("CatalogueRetry", pattern=sharded.PATTERN)
                self.conflicts.pause(attempt)
                attempt += 1

    def _update_sharded_at(
        self, product_id: str, shards: int, expected: int, changes: dict[str, Any]
    ) -> dict[str, Any]:
        catalogue = {k: v for k, v in changes.items() if k != "stock"}
        bump = versioned.bump_op(self.table, self._key(product_id), catalogue, expected=expected)
        try:
            if "stock" in changes:
                sharded.set_total(
                    self.client,
                    self.counter(product_id, shards),
                    changes["stock"],
                    backoff=self.backoff,
                    also=lambda: [bump],
                    stamp={"version": expected + 1},
                    hints=self.hints,
                )
            else:
                transact.transact_write(self.client, [bump], backoff=self.backoff)
        except transact.Cancelled as exc:
            current = exc.reasons[0].item if exc.reasons else None
            if current is None:
                raise NotFound(f"no product {product_id!r}") from exc
            raise VersionMismatch(
                f"product {product_id!r} is at version {current['version']}, not {expected}",
                currentVersion=current["version"],
            ) from exc
        except retry.RetriesExhausted as exc:
            raise Conflict("sales kept changing the stock; retry the PATCH") from exc
        if "stock" not in changes:
            self.hints.sold_out.mark(self.counter(product_id, shards), False)
        return self.get(product_id)

    def purchase(
        self,
        product_id: str,
        quantity: int,
        strategy: str = "atomic",
        claim: InProgress | None = None,
    ) -> dict[str, Any]:
        purchase_id = uuid.uuid4().hex
        shards = self.shard_counts.get(product_id)
        if shards:  # known sharded (None: not known yet, learnt below)
            return self._purchase_sharded(product_id, shards, quantity, purchase_id, claim)
        try:
            return self._purchase_single(product_id, quantity, strategy, purchase_id, claim)
        except _Sharded as learnt:
            self.shard_counts.put(product_id, learnt.shards)
            return self._purchase_sharded(product_id, learnt.shards, quantity, purchase_id, claim)

    def _purchase_sharded(
        self,
        product_id: str,
        shards: int,
        quantity: int,
        purchase_id: str,
        claim: InProgress | None,
    ) -> dict[str, Any]:
        counter = self.counter(product_id, shards)
        try:
            return self._take_sharded(counter, quantity, purchase_id, claim)
        finally:
            after_request(self.resizer, counter)

    def _take_sharded(
        self,
        counter: sharded.ShardedCounter,
        quantity: int,
        purchase_id: str,
        claim: InProgress | None,
    ) -> dict[str, Any]:
        product_id = counter.base
        if claim is not None:
            return self._purchase_sharded_keyed(counter, quantity, purchase_id, claim)
        try:
            options = sharded.TakeOptions(backoff=self.backoff, hints=self.hints, rand=self.rand)
            taken = sharded.take(self.client, counter, quantity, options)
        except sharded.Missing as exc:
            raise NotFound(f"no product {product_id!r}") from exc
        except sharded.Exhausted as exc:
            raise OutOfStock(
                f"only {exc.total} left, {quantity} requested", available=exc.total
            ) from exc
        after = {"stock": taken.remaining, "version": taken.item.get("version", 1)}
        return {
            **self._receipt(purchase_id, product_id, quantity, after),
            "shard": taken.shards[0],
        }

    def _purchase_sharded_keyed(
        self, counter: sharded.ShardedCounter, quantity: int, purchase_id: str, claim: InProgress
    ) -> dict[str, Any]:
        store = self._store()
        for attempt in range(1, self.conflicts.attempts + 1):
            try:
                items = sharded.read_items(self.client, counter, self.backoff)
            except sharded.Missing as exc:
                raise NotFound(f"no product {counter.base!r}") from exc
            counts = [int(item["stock"]) for item in items]
            if sum(counts) < quantity:
                total = sum(counts)
                raise OutOfStock(f"only {total} left, {quantity} requested", available=total)
            # One shard that holds the whole quantity, at random; else several together (as the
            # unkeyed path does), each written only if it still holds what was read.
            able = [k for k, count in enumerate(counts) if count >= quantity]
            if able:
                takes = {able[self.rand.randrange(len(able))]: quantity}
            else:
                takes = sharded.spread(counts, quantity, self.rand)
            first = next(iter(takes))
            after = {
                "stock": sum(counts[k] - take for k, take in takes.items()),
                "version": items[first]["version"],
            }
            receipt = {
                **self._receipt(purchase_id, counter.base, quantity, after),
                "shard": first,
            }
            elements = [
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": counter.wire_key(shard),
                        "UpdateExpression": "SET #stock = :after",
                        "ConditionExpression": "#stock = :seen",
                        "ExpressionAttributeNames": {"#stock": "stock"},
                        "ExpressionAttributeValues": codec.values(
                            seen=counts[shard], after=counts[shard] - take
                        ),
                    }
                }
                for shard, take in takes.items()
            ]
            try:
                transact.transact_write(
                    self.client,
                    [*elements, store.complete_op(claim, claim.answer_of(receipt))],
                    backoff=self.backoff,
                )
            except transact.Cancelled as exc:
                if not any(exc.failed_at(i) for i in range(len(elements))):
                    raise
                metrics.count("ShardConflict", pattern=sharded.PATTERN)
                self.conflicts.pause(attempt)
                continue
            claim.completed = True
            return receipt
        raise Conflict("gave up after repeated races on every shard; retry later")

    def _purchase_single(
        self,
        product_id: str,
        quantity: int,
        strategy: str,
        purchase_id: str,
        claim: InProgress | None,
    ) -> dict[str, Any]:
        if claim is not None or strategy == "versioned":
            return self._purchase_versioned(product_id, quantity, purchase_id, claim)
        return self._purchase_atomic(product_id, quantity, purchase_id)

    def _purchase_atomic(self, product_id: str, quantity: int, purchase_id: str) -> dict:
        try:
            item = versioned.decrement(
                self.client,
                table=self.table,
                key=self._key(product_id),
                attr="stock",
                amount=quantity,
                backoff=self.backoff,
                pattern="atomic",
            )
        except versioned.NoSuchItem as exc:
            raise NotFound(f"no product {product_id!r}") from exc
        except versioned.NoSuchAttribute as exc:
            if is_sharded(exc.current):  # a sharded parent holds no stock
                raise _Sharded(exc.current["shards"]) from exc
            raise
        except versioned.Insufficient as exc:
            raise self._out_of_stock(exc.current, quantity) from exc
        return self._receipt(purchase_id, product_id, quantity, item)

    def _purchase_versioned(
        self, product_id: str, quantity: int, purchase_id: str, claim: InProgress | None
    ) -> dict:
        def decide(item: dict[str, Any] | None) -> dict[str, Any]:
            if item is None:
                raise NotFound(f"no product {product_id!r}")
            if is_sharded(item):
                raise _Sharded(item["shards"])
            if item["stock"] < quantity:
                raise self._out_of_stock(item, quantity)
            return {"stock": item["stock"] - quantity}

        also = None
        if claim is not None:
            store = self._store()

            def also(item: dict[str, Any] | None, changes: Any) -> list[dict[str, Any]]:
                if item is None:  # versioned.update reads the item before it calls this
                    raise RuntimeError("the product to complete a claim with was not read")
                after = {**item, **changes, "version": item["version"] + 1}
                receipt = self._receipt(purchase_id, product_id, quantity, after)
                return [store.complete_op(claim, claim.answer_of(receipt))]

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

    def _store(self) -> IdempotencyStore:
        """The idempotency store a keyed purchase completes its claim in (an explicit check, not an
        ``assert``: ``python -O`` would drop that)."""
        if self.idempotency is None:
            raise RuntimeError("a claim needs an idempotency store (Products(idempotency=...))")
        return self.idempotency

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
