"""Which DynamoDB actions each function may call on each of its tables, and nothing more.

Read by the CDK stack (``infra.functions``) to write each function's IAM policy. Derived by reading
every call the function's code makes (``turnstile`` and ``service.domain``); a transaction needs
the per-item action of each element (``Put`` -> ``dynamodb:PutItem``, ``ConditionCheck`` ->
``dynamodb:ConditionCheckItem``...), there is no ``TransactWriteItems`` IAM action. No function
scans, and only inventory creation batch-writes. Sharded counters read all their shards with one
``BatchGetItem`` (``turnstile.sharded.read_all``: a sharded product's GET and purchase failover, a
sharded event's GET and registration failover, also in the decider), so the functions that hold
sharded items get ``dynamodb:BatchGetItem`` on that table only. The local runtime enforces these
grants as synthesized (``local.iam``): a missing one fails the e2e tier with AccessDenied.

The idempotency table is shared, but each function may only touch records whose key starts with
its own partitions (``dynamodb:LeadingKeys``, see ``turnstile.idempotency.record_id``), so no
function can read or overwrite another's stored answers. Deploy-time code imports this module:
it must stay free of boto3 and of the handlers.
"""

from __future__ import annotations

from service import config

GET = "dynamodb:GetItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"
CHECK = "dynamodb:ConditionCheckItem"
QUERY = "dynamodb:Query"
BATCH_GET = "dynamodb:BatchGetItem"

# Claim (PutItem), store the answer (UpdateItem, also inside transactions), release (DeleteItem).
IDEMPOTENCY_ACTIONS = (PUT, UPDATE, DELETE)

ACTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "products": {
        # create, versioned.read, atomic / versioned / If-Match updates (also in transactions),
        # a sharded product's shards read at once (GET, purchase failover)
        config.PRODUCTS: (GET, PUT, UPDATE, BATCH_GET),
        config.IDEMPOTENCY: IDEMPOTENCY_ACTIONS,
    },
    "locks": {
        # acquire, renew, release: conditional updates; waitMs adds the queue
        # (turnstile.lease_queue): waiter rows put, read, heartbeat-updated, deleted, and a
        # missing waiter's placeholder put under a check of the queue's head (ConditionCheck)
        config.LEASES: (GET, PUT, UPDATE, DELETE, CHECK),
    },
    "wallets": {
        config.LEASES: (UPDATE, CHECK),  # the lease, and the guard inside the credit
        config.WALLETS: (GET, PUT),  # read, credit, charge#<id> items
        config.IDEMPOTENCY: IDEMPOTENCY_ACTIONS,
    },
    "inventory": {
        # header put, small skus' units (transactional puts), header/lead reads, index and unit
        # queries, claims / confirm / cancel (updates, also in transactions), creation progress
        config.INVENTORY: (GET, PUT, UPDATE, QUERY),
        config.INVENTORY_SUMMARY: (GET, UPDATE),  # the eventual summary; a chunk's counts
    },
    "events": {
        # create, read, join (Update + Put), leave (Update + Delete), byUser index, a sharded
        # event's shards read at once (GET, join failover)
        config.EVENTS: (GET, PUT, UPDATE, DELETE, QUERY, BATCH_GET),
        config.REGISTRATION_REQUESTS: (GET, PUT),  # submit, read
        config.IDEMPOTENCY: IDEMPOTENCY_ACTIONS,
    },
    "inventorycreator": {
        config.INVENTORY: (GET, PUT, UPDATE),  # header read, units put, progress update
        config.INVENTORY_SUMMARY: (UPDATE,),  # a chunk's units added to the counts
    },
    "inventorysummary": {
        config.INVENTORY_SUMMARY: (UPDATE,),  # the seq marker and the counts, in a transaction
    },
    "decider": {
        # join: the counter and the registration; a sharded event's failover reads its shards
        config.EVENTS: (PUT, UPDATE, BATCH_GET),
        config.REGISTRATION_REQUESTS: (UPDATE,),  # still PENDING -> ACCEPTED / REJECTED
    },
}
