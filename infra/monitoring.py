"""What contention and failure look like once deployed: one dashboard and the alarms, in one place.

The figures come from three sources: turnstile's own EMF metrics (namespace ``turnstile``, one
dimension ``pattern``, see ``service.observability``), API Gateway's stage metrics, and Lambda's
``IteratorAge`` for the stream consumers. The dead-letter queue's depth alarm lives with the queue
(``infra.consumers``) and is shown here.

Alarms (thresholds below, all "3 of the last 5 minutes" unless said otherwise, missing data is
not breaching: no traffic is not an incident):

* ``ApiServerErrors``: share of API requests answered 5xx above :data:`SERVER_ERROR_RATE`.
* ``DynamoDbThrottles``: DynamoDB throttles turnstile met (and retried), summed over every
  pattern, above :data:`THROTTLES_PER_MINUTE`.
* ``ConflictRate``: share of API requests answered ``409 CONFLICT`` above
  :data:`CONFLICT_RATE_PERCENT`: contention the retries could not absorb.
* ``<Consumer>IteratorAge``: a stream consumer more than :data:`ITERATOR_AGE_MS` behind.
* ``PendingRequestAge``: a registration request still PENDING after :data:`PENDING_AGE_MS`,
  measured by the decider each time it tries to decide one (retries included). A request stays
  PENDING only while its record waits in the stream (this alarm and the iterator age) or once the
  mapping gave it up (the dead-letter queue alarm). Why not a scheduled scan of the table: the
  requests table has no index by status, and a scan every few minutes costs read capacity in
  proportion to a week of requests (TTL keeps them that long) to learn what the pipeline already
  says. What this misses: a mapping that is disabled sends no figures at all (missing data).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from service import observability

MAX_ALARM_METRICS = 10  # CloudWatch's limit for one alarm's metric math
PERIOD = Duration.minutes(1)
EVALUATION_PERIODS = 5
DATAPOINTS_TO_ALARM = 3
SERVER_ERROR_RATE = 0.01  # 1% of requests
THROTTLES_PER_MINUTE = 10
CONFLICT_RATE_PERCENT = 1.0
ITERATOR_AGE_MS = 60_000
PENDING_AGE_MS = 5 * 60_000


def turnstile_metric(pattern: str, name: str, statistic: str = "Sum") -> cloudwatch.Metric:
    unit = (
        cloudwatch.Unit.MILLISECONDS if name in observability.DURATIONS else cloudwatch.Unit.COUNT
    )
    return cloudwatch.Metric(
        namespace=observability.NAMESPACE,
        metric_name=name,
        dimensions_map={observability.DIMENSION: pattern},
        statistic=statistic,
        period=PERIOD,
        unit=unit,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api: apigw.RestApi,
        consumers: Sequence[tuple[str, lambda_.IFunction]],
        dead_letters: sqs.IQueue | None,
        dead_letters_alarm: cloudwatch.IAlarm | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        requests = api.metric_count(period=PERIOD, statistic="Sum")
        self._alarm(
            "ApiServerErrors",
            "More than 1% of API requests answered 5xx (an outage or a bug)",
            api.metric_server_error(period=PERIOD, statistic="Average"),
            SERVER_ERROR_RATE,
        )
        throttled = {
            f"t{index}": turnstile_metric(pattern, "Throttle")
            for index, pattern in enumerate(sorted(observability.CATALOG))
            if "Throttle" in observability.CATALOG[pattern]
        }
        # An alarm's math may use at most 10 metrics: one alarm per 10 patterns.
        names = sorted(throttled, key=lambda query_id: int(query_id[1:]))
        for part, start in enumerate(range(0, len(names), MAX_ALARM_METRICS)):
            chunk = {q: throttled[q] for q in names[start : start + MAX_ALARM_METRICS]}
            self._alarm(
                "DynamoDbThrottles" + (str(part + 1) if part else ""),
                "DynamoDB throttles turnstile's calls (retried; 503 THROTTLED once retries run "
                "out)",
                cloudwatch.MathExpression(
                    expression=f"SUM([{', '.join(chunk)}])",
                    using_metrics=chunk,
                    label="DynamoDB throttles" + (f" (part {part + 1})" if part else ""),
                    period=PERIOD,
                ),
                THROTTLES_PER_MINUTE,
            )
        conflicts = turnstile_metric(observability.API_PATTERN, "ConflictAnswer")
        self._alarm(
            "ConflictRate",
            "More than 1% of API requests answered 409 CONFLICT (contention beyond the retries)",
            cloudwatch.MathExpression(
                expression="IF(requests > 0, 100 * FILL(conflicts, 0) / requests, 0)",
                using_metrics={"requests": requests, "conflicts": conflicts},
                label="CONFLICT answers (% of requests)",
                period=PERIOD,
            ),
            CONFLICT_RATE_PERCENT,
        )
        iterator_ages = []
        for name, function in consumers:
            age = function.metric("IteratorAge", period=PERIOD, statistic="Maximum")
            iterator_ages.append(age)
            self._alarm(
                f"{name.capitalize()}IteratorAge",
                f"The {name} stream consumer is more than a minute behind its stream",
                age,
                ITERATOR_AGE_MS,
            )
        pending_age = turnstile_metric("decider", "PendingAge", "Maximum")
        self._alarm(
            "PendingRequestAge",
            "A registration request has been PENDING for more than 5 minutes",
            pending_age,
            PENDING_AGE_MS,
        )

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        alarms: list[cloudwatch.IAlarm] = list(self.alarms.values())
        if dead_letters_alarm is not None:
            alarms.append(dead_letters_alarm)
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=alarms, width=24)
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="API requests and errors",
                left=[
                    requests,
                    api.metric_client_error(period=PERIOD, statistic="Sum"),
                    api.metric_server_error(period=PERIOD, statistic="Sum"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Contention answers",
                left=[
                    turnstile_metric(observability.API_PATTERN, name)
                    for name in observability.CATALOG[observability.API_PATTERN]
                ],
                width=12,
            ),
        )
        contention = [
            cloudwatch.GraphWidget(
                title=f"{pattern}: counts per minute",
                left=[
                    turnstile_metric(pattern, name)
                    for name in names
                    if name not in observability.DURATIONS
                ],
                width=8,
            )
            for pattern, names in observability.CATALOG.items()
            if pattern != observability.API_PATTERN
        ]
        self.dashboard.add_widgets(*contention)
        streams: list[cloudwatch.IMetric] = [*iterator_ages]
        if dead_letters is not None:
            streams.append(
                dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD)
            )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Waits (ms): lease wait p99, pending age and stream lag max",
                left=[
                    turnstile_metric("lease", "LeaseWait", "p99"),
                    pending_age,
                    turnstile_metric("decider", "StreamLag", "Maximum"),
                    turnstile_metric("summary", "StreamLag", "Maximum"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Streams: iterator age (ms) and dead letters", left=streams, width=12
            ),
        )

    def _alarm(
        self, name: str, description: str, metric: cloudwatch.IMetric, threshold: float
    ) -> None:
        self.alarms[name] = cloudwatch.Alarm(
            self,
            name,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=EVALUATION_PERIODS,
            datapoints_to_alarm=DATAPOINTS_TO_ALARM,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
