"""The DynamoDB tables, each an instance of the library's construct for the primitive it holds
(``turnstile_ddb.cdk``): on-demand, point-in-time recovery, retained with deletion protection (a
development stack, ``turnstile:destroyWithStack``, deletes them with it), the
primitive's keys. Tables of the app's own layout are ``AppTable``\\ s (same defaults, no grant of
a primitive). Local runs create the very same tables from the synthesized template.

Logical ids: each construct's table is its default child, so ``Tables/<Name>Table`` keeps the
logical id the hand-written ``dynamodb.Table`` had there: nothing is replaced on a deployed stack.
"""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.settings import Settings
from service import config
from turnstile_ddb import cdk as tcdk


def construct_id(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Table"


STREAM = dynamodb.StreamViewType.NEW_AND_OLD_IMAGES


class Tables(Construct):
    def __init__(self, scope: Construct, construct_id_: str) -> None:
        super().__init__(scope, construct_id_)
        # Retained with deletion protection, unless a development stack (infra.settings)
        removal = Settings.of(self).removal_policy
        self.products = tcdk.VersionedTable(
            self, construct_id(config.PRODUCTS), partition_key="productId", removal_policy=removal
        )
        self.idempotency = tcdk.IdempotencyTable(
            self,
            construct_id(config.IDEMPOTENCY),
            time_to_live_attribute=config.TTL_ATTRIBUTE,
            removal_policy=removal,
        )
        # TTL on reapAt, which lease items never carry (their fences must never restart); only
        # the queue's tombstone rows do (turnstile_ddb.cdk.LeaseTable).
        self.leases = tcdk.LeaseTable(self, construct_id(config.LEASES), removal_policy=removal)
        self.wallets = tcdk.AppTable(
            self, construct_id(config.WALLETS), partition_key="walletId", removal_policy=removal
        )
        # Units and their sparse keys-only index of claimable units (turnstile_ddb.claims), the sku
        # header, the creation progress; the stream feeds the summary and the creation worker.
        self.inventory = tcdk.ClaimPoolTable(
            self,
            construct_id(config.INVENTORY),
            time_to_live_attribute=config.TTL_ATTRIBUTE,
            stream=STREAM,
            removal_policy=removal,
        )
        self.inventory_summary = tcdk.AppTable(
            self,
            construct_id(config.INVENTORY_SUMMARY),
            partition_key="sku",
            sort_key="sk",
            removal_policy=removal,
        )
        # The event's capacity row and its registrations (turnstile_ddb.capacity), listed by user.
        self.events = tcdk.CapacityTable(
            self, construct_id(config.EVENTS), partition_key="eventId", removal_policy=removal
        )
        events = self.events.table
        assert isinstance(events, dynamodb.Table)  # one region: a Table, not a TableV2
        events.add_global_secondary_index(
            index_name=config.EVENTS_BY_USER_INDEX,
            partition_key=dynamodb.Attribute(name="userId", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="eventId", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        self.registration_requests = tcdk.AppTable(
            self,
            construct_id(config.REGISTRATION_REQUESTS),
            partition_key="eventId",
            sort_key="requestId",
            time_to_live_attribute=config.TTL_ATTRIBUTE,
            stream=STREAM,
            removal_policy=removal,
        )
        self.by_name: dict[str, tcdk.PrimitiveTable] = {
            config.PRODUCTS: self.products,
            config.IDEMPOTENCY: self.idempotency,
            config.LEASES: self.leases,
            config.WALLETS: self.wallets,
            config.INVENTORY: self.inventory,
            config.INVENTORY_SUMMARY: self.inventory_summary,
            config.EVENTS: self.events,
            config.REGISTRATION_REQUESTS: self.registration_requests,
        }

    def __getitem__(self, name: str) -> tcdk.PrimitiveTable:
        return self.by_name[name]
