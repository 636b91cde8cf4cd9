"""CDK constructs for the tables and consumers turnstile's primitives need (``turnstile-ddb[cdk]``).

One construct per primitive that needs infrastructure. Each creates its table the way the
primitive expects it (key names as the library's defaults, on-demand, point-in-time recovery,
retained on stack deletion) and offers a grant method that gives a function exactly the
DynamoDB actions that primitive issues, so the least-privilege policy lives beside the code that
needs it:

=========================  ==========================  =============================================
construct                  grant                       actions
=========================  ==========================  =============================================
:class:`VersionedTable`    ``grant_versioned(fn)``     GetItem, UpdateItem
:class:`LeaseTable`        ``grant_lease(fn)``         UpdateItem, ConditionCheckItem
:class:`LeaseTable`        ``grant_lease_queue(fn)``   the above, GetItem, PutItem, DeleteItem
:class:`IdempotencyTable`  ``grant_idempotency(fn)``   PutItem, UpdateItem, DeleteItem
:class:`CapacityTable`     ``grant_capacity(fn)``      UpdateItem, PutItem, DeleteItem
:class:`ClaimPoolTable`    ``grant_claims(fn)``        GetItem, Query (its index), UpdateItem
:class:`ShardedCounterTable` ``grant_sharded(fn)``     BatchGetItem, UpdateItem
=========================  ==========================  =============================================

A function that also makes calls of its own on a primitive's table (or a table of its own layout,
:class:`AppTable`) gets them from :meth:`PrimitiveTable.grant_actions`, written out action by
action, so they stand out beside the primitive's grant.

**Logical ids.** Each construct's table is its default child (construct id ``Default``), so its
CloudFormation logical id is the one a plain ``dynamodb.Table`` with the construct's id in the same
place would have: replacing ``dynamodb.Table(self, "Orders", ...)`` by
``VersionedTable(self, "Orders", ...)`` keeps the deployed table (same keys assumed).

:class:`OrderedStreamConsumer` wires a function to a table's stream so that records are handled in
order and a failure stops the batch at the first failed record (partial batch failures), with
bisection, bounded retries and age, a dead-letter queue and alarms on the queue and iterator age.

**Replication.** ``replication=Replication([...], consistency=...)`` makes the table a global
table. A construct refuses a replication under which its primitive is unsafe or unsupported
(:class:`UnsafeReplication`, saying why; see the docs page "Guarantees across regions") unless
``allow_unsafe_replication`` gives a reason for accepting it.

Importing this module imports aws-cdk-lib; ``import turnstile_ddb`` does not import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from turnstile_ddb import errors

__all__ = [
    "AppTable",
    "CapacityTable",
    "ClaimPoolTable",
    "IdempotencyTable",
    "LeaseTable",
    "OrderedStreamConsumer",
    "PrimitiveTable",
    "Replication",
    "ShardedCounterTable",
    "UnsafeReplication",
    "VersionedTable",
]

GET = "dynamodb:GetItem"
BATCH_GET = "dynamodb:BatchGetItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
DELETE = "dynamodb:DeleteItem"
CHECK = "dynamodb:ConditionCheckItem"
QUERY = "dynamodb:Query"

_MREC = (
    "on a global table with multi-Region eventual consistency each region evaluates conditions "
    "against its own replica and concurrent writes are resolved by last writer wins"
)
_NO_TRANSACTIONS = (
    "multi-Region strong consistency does not support transactions (TransactWriteItems), "
    "which this primitive issues"
)
_NO_TTL = "multi-Region strong consistency does not support Time to Live"


class UnsafeReplication(errors.Refused, ValueError):
    """A construct was asked for a replication under which its primitive does not hold."""


@dataclass(frozen=True)
class Replication:
    """Replica regions (besides the stack's) and the global table's consistency mode."""

    regions: Sequence[str]
    consistency: Literal["eventual", "strong"] = "eventual"
    witness_region: str | None = None  # MRSC: two replicas plus a witness


class PrimitiveTable(Construct):
    """A table shaped for one primitive. Subclasses set the key names, what replication they
    tolerate and the actions their grant gives."""

    PRIMITIVE: ClassVar[str] = ""
    PARTITION_KEY: ClassVar[str] = "id"
    SORT_KEY: ClassVar[str | None] = None
    ACTIONS: ClassVar[tuple[str, ...]] = ()
    SAFE_EVENTUAL: ClassVar[bool] = False  # holds on an MREC global table
    USES_TRANSACTIONS: ClassVar[bool] = False
    TTL_ATTRIBUTE: ClassVar[str | None] = None

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        partition_key: str | None = None,
        sort_key: str | None = None,
        time_to_live_attribute: str | None = "",
        stream: dynamodb.StreamViewType | None = None,
        replication: Replication | None = None,
        allow_unsafe_replication: str | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        ttl = self.TTL_ATTRIBUTE if time_to_live_attribute == "" else time_to_live_attribute
        if replication is not None and not allow_unsafe_replication:
            self.check_replication(replication, ttl)
        pk = dynamodb.Attribute(
            name=partition_key or self.PARTITION_KEY, type=dynamodb.AttributeType.STRING
        )
        sk_name = sort_key or self.SORT_KEY
        sk = (
            dynamodb.Attribute(name=sk_name, type=dynamodb.AttributeType.STRING)
            if sk_name
            else None
        )
        pitr = dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True)
        self.table: dynamodb.Table | dynamodb.TableV2
        # "Default": the table is this construct's default child and keeps the logical id a
        # plain table with this construct's id would have (see "Logical ids" above).
        if replication is None:
            self.table = dynamodb.Table(
                self,
                "Default",
                partition_key=pk,
                sort_key=sk,
                billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
                point_in_time_recovery_specification=pitr,
                deletion_protection=removal_policy == RemovalPolicy.RETAIN,
                removal_policy=removal_policy,
                time_to_live_attribute=ttl,
                stream=stream,
            )
        else:
            strong = replication.consistency == "strong"
            self.table = dynamodb.TableV2(
                self,
                "Default",
                partition_key=pk,
                sort_key=sk,
                billing=dynamodb.Billing.on_demand(),
                point_in_time_recovery_specification=pitr,
                deletion_protection=removal_policy == RemovalPolicy.RETAIN,
                removal_policy=removal_policy,
                time_to_live_attribute=ttl,
                dynamo_stream=stream,
                replicas=[dynamodb.ReplicaTableProps(region=r) for r in replication.regions],
                multi_region_consistency=(
                    dynamodb.MultiRegionConsistency.STRONG
                    if strong
                    else dynamodb.MultiRegionConsistency.EVENTUAL
                ),
                witness_region=replication.witness_region,
            )

    @classmethod
    def check_replication(cls, replication: Replication, ttl: str | None) -> None:
        """Raise :class:`UnsafeReplication` when ``replication`` breaks this primitive."""
        name = cls.PRIMITIVE or cls.__name__
        if replication.consistency == "eventual" and not cls.SAFE_EVENTUAL:
            raise UnsafeReplication(
                f"{name}: {_MREC}, so two regions can both pass the same condition and one "
                "write is then lost; use consistency='strong' or one region "
                "(or pass allow_unsafe_replication='<why this is acceptable>')"
            )
        if replication.consistency == "strong" and cls.USES_TRANSACTIONS:
            raise UnsafeReplication(
                f"{name}: {_NO_TRANSACTIONS}; keep this table in one region "
                "(or pass allow_unsafe_replication='<why>')"
            )
        if replication.consistency == "strong" and ttl:
            raise UnsafeReplication(
                f"{name}: {_NO_TTL}; pass time_to_live_attribute=None and delete old items with "
                "a job of your own (correctness never depends on TTL)"
            )

    @property
    def table_name(self) -> str:
        return self.table.table_name

    def grant_actions(
        self, grantee: iam.IGrantable, *actions: str, index: str | None = None
    ) -> iam.Grant:
        """``actions`` (``"dynamodb:PutItem"``...) on this table, or on its index ``index`` only:
        for calls a function makes beyond the primitive's own (never ``index/*``)."""
        if not actions or not all(a.startswith("dynamodb:") for a in actions):
            raise ValueError(f"grant_actions takes DynamoDB actions, got {actions!r}")
        arn = self.table.table_arn if index is None else f"{self.table.table_arn}/index/{index}"
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(actions), resource_arns=[arn]
        )

    def _grant(self, grantee: iam.IGrantable) -> iam.Grant:
        # Scoped to the table itself (Table.grant would add index/* once the table has indexes).
        return self.grant_actions(grantee, *self.ACTIONS)


class VersionedTable(PrimitiveTable):
    """Items updated by ``turnstile_ddb.versioned`` (read, decide, version-checked write)."""

    PRIMITIVE = "versioned update"
    ACTIONS = (GET, UPDATE)

    def grant_versioned(self, grantee: iam.IGrantable) -> iam.Grant:
        return self._grant(grantee)


class LeaseTable(PrimitiveTable):
    """Lease items of ``turnstile_ddb.lease`` (key ``resource``), and the waiter rows of
    ``turnstile_ddb.lease_queue`` in the same table.

    TTL on ``reapAt`` (``TTL_ATTRIBUTE``, ``turnstile_ddb.lease.LeaseAttributes().ttl_attribute``),
    an attribute no lease item has ever been written with, and which every acquisition removes
    besides, because a lease item carries its fence, which must increase forever, and a purge
    would restart it at 1.
    (Not ``purgeAt``: lease code before 0.3.0 wrote that on lease items, and an old item idle
    since would be purged.) The queue's tombstone rows carry it (a day ahead) and are cleaned up
    when nobody passed them over; correctness never depends on it (conditions decide)."""

    PRIMITIVE = "lease with fencing"
    PARTITION_KEY = "resource"
    TTL_ATTRIBUTE = "reapAt"
    ACTIONS = (UPDATE, CHECK)
    QUEUE_ACTIONS = (GET, PUT, UPDATE, DELETE, CHECK)

    def grant_lease(self, grantee: iam.IGrantable) -> iam.Grant:
        """Acquire, renew, release, and the fence check inside a guarded transaction."""
        return self._grant(grantee)

    def grant_lease_queue(self, grantee: iam.IGrantable) -> iam.Grant:
        """Everything ``grant_lease`` gives, plus the queue's waiter rows: put, read (GetItem),
        heartbeat (UpdateItem), delete, and the placeholder put under a check of the head."""
        return self.grant_actions(grantee, *self.QUEUE_ACTIONS)


class IdempotencyTable(PrimitiveTable):
    """Records of ``turnstile_ddb.idempotency`` (key ``id``), cleaned up by TTL on ``expiresAt``."""

    PRIMITIVE = "idempotency"
    TTL_ATTRIBUTE = "expiresAt"
    ACTIONS = (PUT, UPDATE, DELETE)

    def grant_idempotency(
        self, grantee: iam.IGrantable, *, leading_keys: Sequence[str] = ()
    ) -> iam.Grant:
        """Claim, complete, release. With ``leading_keys`` (patterns such as ``"orders#*"``),
        only on records whose key matches one of them (``dynamodb:LeadingKeys``), so functions
        sharing the table cannot read or overwrite each other's answers."""
        if not leading_keys:
            return self._grant(grantee)
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(self.ACTIONS),
            resource_arns=[self.table.table_arn],
            conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(leading_keys)}},
        )


class CapacityTable(PrimitiveTable):
    """A capacity (lock) row and its members (``turnstile_ddb.capacity``): key ``id`` + ``sk``."""

    PRIMITIVE = "capacity row"
    SORT_KEY = "sk"
    USES_TRANSACTIONS = True
    ACTIONS = (UPDATE, PUT, DELETE)

    def grant_capacity(self, grantee: iam.IGrantable) -> iam.Grant:
        return self._grant(grantee)


class ClaimPoolTable(PrimitiveTable):
    """Units reserved by ``turnstile_ddb.claims``: key ``sku`` + ``sk``, and the sparse keys-only
    index ``claimable`` on (``pool``, ``claimableAt``) that candidates are read from."""

    PRIMITIVE = "unit reservations"
    PARTITION_KEY = "sku"
    SORT_KEY = "sk"
    USES_TRANSACTIONS = True
    INDEX = "claimable"
    ACTIONS = (GET, UPDATE)  # on the table; Query on the index only

    def __init__(self, scope: Construct, construct_id: str, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.index_name = self.INDEX
        self.table.add_global_secondary_index(
            index_name=self.INDEX,
            partition_key=dynamodb.Attribute(name="pool", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="claimableAt", type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )

    def grant_claims(self, grantee: iam.IGrantable) -> iam.Grant:
        self.grant_actions(grantee, QUERY, index=self.INDEX)
        return self._grant(grantee)


class ShardedCounterTable(PrimitiveTable):
    """Shards of ``turnstile_ddb.sharded`` counters (key ``id``: ``<base>#<k>``)."""

    PRIMITIVE = "sharded counter"
    USES_TRANSACTIONS = True  # set_total and multi-shard takes
    ACTIONS = (BATCH_GET, UPDATE)

    def grant_sharded(self, grantee: iam.IGrantable) -> iam.Grant:
        return self._grant(grantee)


class AppTable(PrimitiveTable):
    """A table of the application's own layout, with the same defaults (on-demand, recovery,
    retained) and no primitive's grant: give functions :meth:`PrimitiveTable.grant_actions`."""

    PRIMITIVE = "application table"


class OrderedStreamConsumer(Construct):
    """``function`` consumes ``table``'s stream in order, one batch per shard at a time.

    The function reports partial batch failures and must stop at its first failed record (later
    records of the batch are reported failed too, so order holds); a failing batch is bisected,
    retried ``retry_attempts`` times and dropped after ``max_record_age``, into ``dead_letters``.
    Alarms: the queue is not empty, and the iterator age exceeds ``iterator_age_alarm`` in 3 of
    the last 5 minutes (a short burst is not an incident).

    ``function`` may be an alias (what a SnapStart function's mapping must invoke); the iterator
    age is then the alias's.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        function: lambda_.IFunction,
        batch_size: int = 100,
        retry_attempts: int = 5,
        max_record_age: Duration | None = None,
        iterator_age_alarm: Duration | None = None,
        filters: Sequence[dict[str, object]] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        _acknowledge(
            self.dead_letters,
            "SQS3",
            "This queue is itself the on-failure destination of the consumer; a queue behind it "
            "would only move the problem. An alarm watches its depth.",
        )
        if function.role is not None:
            _acknowledge(
                function.role,
                "IAM5[Resource::*]",
                "dynamodb:ListStreams has no resource-level permissions; the DynamoDB event "
                "source adds exactly that one action on *, the stream actions are scoped.",
            )
        function.add_event_source(
            sources.DynamoEventSource(
                table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=batch_size,
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                retry_attempts=retry_attempts,
                max_record_age=max_record_age or Duration.hours(1),
                parallelization_factor=1,  # batches of one shard never overlap: order holds
                on_failure=sources.SqsDlq(self.dead_letters),
                filters=[lambda_.FilterCriteria.filter(p) for p in filters] or None,
            )
        )
        self.dead_letters_alarm = cloudwatch.Alarm(
            self,
            "DeadLettersAlarm",
            alarm_description="The stream consumer gave up on records; see the dead-letter queue",
            metric=self.dead_letters.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1)
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        age = iterator_age_alarm or Duration.minutes(5)
        self.iterator_age_alarm = cloudwatch.Alarm(
            self,
            "IteratorAgeAlarm",
            alarm_description="The stream consumer is falling behind its stream",
            metric=function.metric("IteratorAge", statistic="Maximum", period=Duration.minutes(1)),
            threshold=age.to_milliseconds(),
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=5,
            datapoints_to_alarm=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )


def _acknowledge(scope: Construct | iam.IRole, rule: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(
        cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{rule}", reason=reason)
    )
