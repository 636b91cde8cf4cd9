"""The DynamoDB tables. Local runs create the very same tables from the synthesized template."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from service import config


def construct_id(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Table"


class Tables(Construct):
    """On-demand tables with point-in-time recovery that survive a stack deletion.

    ``RETAIN`` plus deletion protection: removing the stack, or a resource from it, never drops
    data by accident; deleting a table is a deliberate act in the console or CLI.
    """

    def __init__(self, scope: Construct, construct_id_: str) -> None:
        super().__init__(scope, construct_id_)
        self.by_name: dict[str, dynamodb.Table] = {}
        self._add(config.PRODUCTS, "productId")
        self._add(config.IDEMPOTENCY, "id", ttl=config.TTL_ATTRIBUTE)
        self._add(config.LEASES, "resource")  # no TTL: the items carry fences (turnstile.lease)
        self._add(config.WALLETS, "walletId")
        inventory = self._add(
            config.INVENTORY,
            "sku",
            sort_key="sk",
            ttl=config.TTL_ATTRIBUTE,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        )
        # Sparse: only units that are free or held carry claimableAt (see turnstile.claims).
        # Keys only: a candidate needs no more than its key, and the index stays small.
        inventory.add_global_secondary_index(
            index_name=config.INVENTORY_CLAIMABLE_INDEX,
            partition_key=dynamodb.Attribute(name="pool", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="claimableAt", type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        self._add(config.INVENTORY_SUMMARY, "sku", sort_key="sk")
        events = self._add(config.EVENTS, "eventId", sort_key="sk")
        events.add_global_secondary_index(
            index_name=config.EVENTS_BY_USER_INDEX,
            partition_key=dynamodb.Attribute(name="userId", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="eventId", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        self._add(
            config.REGISTRATION_REQUESTS,
            "eventId",
            sort_key="requestId",
            ttl=config.TTL_ATTRIBUTE,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        )

    def _add(
        self,
        name: str,
        partition_key: str,
        *,
        sort_key: str | None = None,
        ttl: str | None = None,
        stream: dynamodb.StreamViewType | None = None,
    ) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            construct_id(name),
            partition_key=dynamodb.Attribute(
                name=partition_key, type=dynamodb.AttributeType.STRING
            ),
            sort_key=(
                dynamodb.Attribute(name=sort_key, type=dynamodb.AttributeType.STRING)
                if sort_key
                else None
            ),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=True,
            removal_policy=RemovalPolicy.RETAIN,
            time_to_live_attribute=ttl,
            stream=stream,
        )
        self.by_name[name] = table
        return table

    def has_indexes(self, name: str) -> bool:
        cfn = self.by_name[name].node.default_child
        return bool(getattr(cfn, "global_secondary_indexes", None))

    def logical_id(self, name: str) -> str:
        """The CloudFormation logical id of table ``name`` (cdk-nag names findings by it)."""
        table = self.by_name[name]
        return Stack.of(table).get_logical_id(table.node.default_child)  # type: ignore[arg-type]

    def __getitem__(self, name: str) -> dynamodb.Table:
        return self.by_name[name]
