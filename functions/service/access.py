"""Which DynamoDB actions each function may call on each of its tables, and nothing more.

Read by the CDK stack (``infra.functions``) to write each function's IAM policy. Derived by reading
every call the function's code makes (``turnstile`` and ``service.domain``); a transaction needs
the per-item action of each element (``Put`` -> ``dynamodb:PutItem``, ``ConditionCheck`` ->
``dynamodb:ConditionCheckItem``...), there is no ``TransactWriteItems`` IAM action. No function
scans, and only inventory creation batch-writes.

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
BATCH_WRITE = "dynamodb:BatchWriteItem"

# Claim (PutItem), store the answer (UpdateItem, also inside transactions), release (DeleteItem).
IDEMPOTENCY_ACTIONS = (PUT, UPDATE, DELETE)

ACTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "products": {
        # create, versioned.read, atomic / versioned / If-Match updates (also in transactions)
        config.PRODUCTS: (GET, PUT, UPDATE),
        config.IDEMPOTENCY: IDEMPOTENCY_ACTIONS,
    },
    "locks": {
        # acquire, renew, release: conditional updates; waitMs adds the queue
        # (turnstile.lease_queue): waiter rows put, read, heartbeat-updated, deleted
        config.LEASES: (GET, PUT, UPDATE, DELETE),
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
        # create, read, join (Update + Put), leave (Update + Delete), byUser index
        config.EVENTS: (GET, PUT, UPDATE, DELETE, QUERY),
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
        config.EVENTS: (PUT, UPDATE),  # join: the counter and the registration
        config.REGISTRATION_REQUESTS: (UPDATE,),  # still PENDING -> ACCEPTED / REJECTED
    },
}
