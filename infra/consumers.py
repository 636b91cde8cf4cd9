"""DynamoDB Streams consumers: event source mappings that cannot block a shard for a day.

Every mapping reports partial batch failures, bisects a failing batch to isolate the bad record,
retries a bounded number of times, drops records older than a bound, and sends what it gives up
on to an SQS queue (with an alarm on it), so one poison record never stalls the records behind it.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.functions import Functions
from infra.nag import acknowledge
from infra.tables import Tables
from service.catalog import ConsumerSpec


class StreamConsumers(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        specs: tuple[ConsumerSpec, ...],
        functions: Functions,
        tables: Tables,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        acknowledge(
            self.dead_letters,
            "SQS3",
            "This queue is itself the on-failure destination of the stream consumers; "
            "a queue behind it would only move the problem. An alarm watches its depth.",
        )
        self.dead_letters_alarm = cloudwatch.Alarm(
            self,
            "DeadLettersAlarm",
            alarm_description="A stream consumer gave up on records; see the dead-letter queue",
            metric=self.dead_letters.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1)
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        for spec in specs:
            acknowledge(
                functions[spec.name].role,  # type: ignore[arg-type]
                "IAM5[Resource::*]",
                "dynamodb:ListStreams has no resource-level permissions; the DynamoDB event "
                "source adds exactly that one action on *, the stream actions are scoped.",
            )
            functions.alias(spec.name).add_event_source(
                sources.DynamoEventSource(
                    tables[spec.source],
                    starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                    batch_size=spec.batch_size,
                    bisect_batch_on_error=True,
                    report_batch_item_failures=True,
                    retry_attempts=spec.retry_attempts,
                    max_record_age=Duration.seconds(spec.max_record_age_seconds),
                    # One batch per shard at a time: records of a key reach the consumer in
                    # stream order, which is what serializes the decisions. A higher factor
                    # would run batches of the same shard concurrently and reorder them.
                    parallelization_factor=1,
                    on_failure=sources.SqsDlq(self.dead_letters),
                    filters=[lambda_.FilterCriteria.filter(pattern) for pattern in spec.filters]
                    or None,
                )
            )
