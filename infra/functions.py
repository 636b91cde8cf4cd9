"""Lambda functions from ``functions/`` (no Docker), with their dependencies from the project's
own layer (``infra.layer``: Powertools, pydantic, the X-Ray SDK and boto3, built for arm64 from
``requirements.lock``, the versions the tests run).

Every function is traced (X-Ray active tracing; ``service.observability`` traces the handler and
patches botocore so each DynamoDB call is a subsegment) and named for Powertools by
``POWERTOOLS_SERVICE_NAME``; its EMF metrics go to the ``turnstile`` namespace.

SnapStart (``ApplyOn: PublishedVersions``) on every function: each gets a published version and an
alias, :data:`ALIAS`, and everything that invokes a function (API Gateway's integrations, the
stream event source mappings) invokes that alias, never ``$LATEST`` (which SnapStart does not
cover). ``service.snapstart`` makes what must be unique per environment after each restore.
"""

from __future__ import annotations

from aws_cdk import Annotations, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import access, bytecode
from infra.layer import layer_dir
from infra.nag import acknowledge
from infra.settings import Settings
from infra.tables import Tables
from service import config, observability
from service.api.routes import partition_of
from service.catalog import FunctionSpec
from turnstile_ddb import cdk as tcdk
from turnstile_ddb import record_keys as idempotency

# arm64 (Graviton): about 20% cheaper per GB-second than x86_64 at equal or better speed, and
# all of turnstile is pure Python, so nothing needs a native build for it.
ARCHITECTURE = lambda_.Architecture.ARM_64
RUNTIME = lambda_.Runtime.PYTHON_3_12
ALIAS = "live"  # what API Gateway and the event source mappings invoke
SNAPSTART_REQUIRES_PUBLISH = "@aws-cdk/aws-lambda:snapStartRequirePublish"  # the warning's id


def dependencies_layer(scope: Construct) -> lambda_.LayerVersion:
    """The arm64 layer ``make layers`` built from the lock (a directory asset, no Docker)."""
    return lambda_.LayerVersion(
        scope,
        "DependenciesLayer",
        code=lambda_.Code.from_asset(str(layer_dir("arm64"))),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description="turnstile dependencies from requirements.lock "
        "(Powertools, pydantic, aws-xray-sdk, boto3)",
    )


class Functions(Construct):
    """One function per catalog entry, granted exactly the actions it uses on the tables it names
    (``infra.access``); on the idempotency table, only its own records (``LeadingKeys``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        specs: tuple[FunctionSpec, ...] | list[FunctionSpec],
        tables: Tables,
        code_path: str,
    ) -> None:
        super().__init__(scope, construct_id)
        layer = dependencies_layer(self)
        code = bytecode.asset(code_path)  # compiled for 3.12, hashed by its sources
        retention_days = int(self.node.try_get_context("turnstile:logRetentionDays") or 30)
        self.by_name: dict[str, lambda_.Function] = {}
        self.aliases: dict[str, lambda_.Alias] = {}
        for spec in specs:
            logical = spec.name.capitalize()
            log_group = logs.LogGroup(
                self,
                f"{logical}Logs",
                retention=_retention(retention_days),
                removal_policy=Settings.of(self).removal_policy,  # retained unless a dev stack
            )
            # An own role instead of AWSLambdaBasicExecutionRole: write access to this
            # function's log group only, plus the table grants below.
            role = iam.Role(
                self,
                f"{logical}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"turnstile {spec.name} function",
            )
            log_group.grant_write(role)
            function = lambda_.Function(
                self,
                f"{logical}Function",
                description=spec.description,
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                handler=spec.handler,
                code=code,
                layers=[layer],
                memory_size=spec.memory_mb,
                timeout=Duration.seconds(spec.timeout_seconds),
                role=role,
                log_group=log_group,
                logging_format=lambda_.LoggingFormat.JSON,
                tracing=lambda_.Tracing.ACTIVE,
                snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS,
                environment={
                    "POWERTOOLS_SERVICE_NAME": f"turnstile-{spec.name}",
                    "POWERTOOLS_METRICS_NAMESPACE": observability.NAMESPACE,
                    **{config.table_env(name): tables[name].table_name for name in spec.tables},
                },
            )
            # The CDK warns that SnapStart needs a published version; each function has one
            # (currentVersion) and its alias is all that is ever invoked, asserted on the template
            # by tests/infra/test_coldstart_infra.py: the warning is acknowledged, with that reason.
            Annotations.of(function).acknowledge_warning(
                SNAPSTART_REQUIRES_PUBLISH,
                "every function publishes a version (currentVersion) and an alias on it; API "
                "Gateway and the stream mappings invoke that alias, never $LATEST",
            )
            grant(spec, role, tables)
            acknowledge(
                role,
                "IAM5[Resource::*]",
                "Active tracing adds xray:PutTraceSegments and xray:PutTelemetryRecords, which "
                "have no resource-level permissions (IAM accepts only * for them); the stream "
                "consumers' dynamodb:ListStreams is the same case.",
            )
            acknowledge(
                function,
                "L1",
                "Pinned to python3.12 on purpose: the dependency layer is built for CPython 3.12 "
                "(infra.layer) and the tests run on that interpreter.",
            )
            self.by_name[spec.name] = function
            # A new version whenever the code or configuration changes (its logical id hashes
            # them), snapshotted when published; the alias moves to it.
            self.aliases[spec.name] = lambda_.Alias(
                self, f"{logical}Live", alias_name=ALIAS, version=function.current_version
            )

    def __getitem__(self, name: str) -> lambda_.Function:
        return self.by_name[name]

    def alias(self, name: str) -> lambda_.Alias:
        """What invokes function ``name``: its :data:`ALIAS` alias (SnapStart needs a version)."""
        return self.aliases[name]


def grant(spec: FunctionSpec, role: iam.IGrantable, tables: Tables) -> None:
    """Give ``spec``'s function what ``infra.access`` lists on each of the tables it names."""
    granted = access.ACCESS.get(spec.name, {})
    if set(granted) != set(spec.tables):
        raise ValueError(
            f"{spec.name}: infra.access grants {sorted(granted)}, "
            f"the catalog names {sorted(spec.tables)}"
        )
    for name, allowed in granted.items():
        table = tables[name]
        for method in allowed.grants:
            if isinstance(table, tcdk.IdempotencyTable) and method == "grant_idempotency":
                table.grant_idempotency(role, leading_keys=own_records(spec))
            else:
                getattr(table, method)(role)  # AttributeError: not this construct's grant
        if allowed.actions:
            table.grant_actions(role, *allowed.actions)
        for index in allowed.index_queries:
            table.grant_actions(role, access.QUERY, index=index)


def own_records(spec: FunctionSpec) -> list[str]:
    """Key patterns of the idempotency records ``spec``'s keyed routes write (``products#*``)."""
    partitions = sorted({partition_of(route.path) for route in spec.routes() if route.idempotent})
    if not partitions:
        raise ValueError(f"{spec.name} names the idempotency table but has no keyed route")
    return [idempotency.record_id(p, "*") for p in partitions]


_RETENTION = {
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    90: logs.RetentionDays.THREE_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def _retention(days: int) -> logs.RetentionDays:
    if days not in _RETENTION:
        raise ValueError(f"turnstile:logRetentionDays must be one of {sorted(_RETENTION)}")
    return _RETENTION[days]
