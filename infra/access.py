"""Which DynamoDB actions each function may call on each of its tables, and nothing more.

Mostly the library's grants (``turnstile_ddb.cdk``): ``grant_lease`` gives exactly what
``turnstile_ddb.lease`` issues, and so on, so the primitive's least privilege lives beside its code.
What no grant gives is written out below, action by action, with the call that needs it: the
app's own tables (``AppTable``) and the app's own calls on a primitive's table. A transaction needs
the per-item action of each element (``Put`` -> ``dynamodb:PutItem``, ``ConditionCheck`` ->
``dynamodb:ConditionCheckItem``...), there is no ``TransactWriteItems`` IAM action. No function
scans or batch-writes; sharded counters read their shards with one ``BatchGetItem``
(``turnstile_ddb.sharded.read_all``), so only functions holding sharded items get it, on that table.

The local runtime enforces these grants as synthesized (``local.iam``): a missing one fails the
e2e tier with AccessDenied. On the shared idempotency table each function may only touch records
of its own partitions (``grant_idempotency(leading_keys=...)``, see ``infra.functions``).
"""

from __future__ import annotations

from dataclasses import dataclass

from service import config

GET = "dynamodb:GetItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"
QUERY = "dynamodb:Query"
BATCH_GET = "dynamodb:BatchGetItem"
DESCRIBE = "dynamodb:DescribeTable"


@dataclass(frozen=True)
class Access:
    """``grants``: grant methods of the table's construct (``"grant_lease"``); ``actions``: on the
    table itself, what no grant gives; ``index_queries``: indexes the function may Query."""

    grants: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    index_queries: tuple[str, ...] = ()


IDEMPOTENT = Access(grants=("grant_idempotency",))  # own partitions only

ACCESS: dict[str, dict[str, Access]] = {
    "products": {
        # versioned.read, atomic / versioned / If-Match updates (also in transactions); create
        # (creation.create_if_absent); a sharded product's shards read at once (GET, failover);
        # a resize puts new shards and a shrink deletes the removed ones (sharded.resize)
        config.PRODUCTS: Access(grants=("grant_versioned",), actions=(PUT, DELETE, BATCH_GET)),
        config.IDEMPOTENCY: IDEMPOTENT,
        config.LEASES: Access(grants=("grant_lease",)),  # one resizer at a time
    },
    "locks": {
        # acquire, renew, release, and waitMs's queue (turnstile_ddb.lease_queue)
        config.LEASES: Access(grants=("grant_lease_queue",)),
    },
    "wallets": {
        config.LEASES: Access(grants=("grant_lease",)),  # the lease, and the guard in the credit
        config.WALLETS: Access(actions=(GET, PUT)),  # read, credit, charge#<id> items
        config.IDEMPOTENCY: IDEMPOTENT,
    },
    "inventory": {
        # claims on the claimable index (turnstile_ddb.claims); the header put, small skus' units
        # (transactional puts), a pool's units queried on the table itself (exact counts)
        config.INVENTORY: Access(grants=("grant_claims",), actions=(PUT, QUERY)),
        config.INVENTORY_SUMMARY: Access(actions=(GET, UPDATE)),  # the summary; a chunk's counts
    },
    "events": {
        # join (Update + Put), leave (Update + Delete) (turnstile_ddb.capacity); create, read, a
        # sharded event's shards read at once (GET, join failover); a user's registrations
        config.EVENTS: Access(
            grants=("grant_capacity",),
            actions=(GET, BATCH_GET),
            index_queries=(config.EVENTS_BY_USER_INDEX,),
        ),
        config.REGISTRATION_REQUESTS: Access(actions=(GET, PUT)),  # submit, read
        config.IDEMPOTENCY: IDEMPOTENT,
        # one resizer at a time for an adaptive event (its resize: grant_capacity's actions)
        config.LEASES: Access(grants=("grant_lease",)),
    },
    "inventorycreator": {
        # header read, units, progress; the table's capacity, which paces the writes
        config.INVENTORY: Access(actions=(GET, PUT, UPDATE, DESCRIBE)),
        config.INVENTORY_SUMMARY: Access(actions=(UPDATE,)),  # a chunk's units added to counts
    },
    "inventorysummary": {
        # the seq marker and the counts, in a transaction
        config.INVENTORY_SUMMARY: Access(actions=(UPDATE,)),
    },
    "decider": {
        # a join without leaves (no grant_capacity: it never deletes); a sharded event's
        # failover reads its shards
        config.EVENTS: Access(actions=(PUT, UPDATE, BATCH_GET)),
        config.REGISTRATION_REQUESTS: Access(actions=(UPDATE,)),  # PENDING -> decided
    },
}
