"""What contention and failure look like once deployed: one dashboard and the alarms, in one place.

The figures come from three sources: turnstile's own EMF metrics (namespace ``turnstile``, one
dimension ``pattern``, see ``service.observability``), API Gateway's stage metrics, and Lambda's
``IteratorAge`` for the stream consumers. Each consumer's alarms (its dead-letter queue's depth, its
iterator age) live with it (``turnstile_ddb.cdk.OrderedStreamConsumer``, threshold
:data:`ITERATOR_AGE_MS` from here) and are shown here.

Alarms (thresholds below, all "3 of the last 5 minutes" unless said otherwise, missing data is
not breaching: no traffic is not an incident):

* ``ApiServerErrors``: share of API requests answered 5xx above :data:`SERVER_ERROR_RATE`.
* ``DynamoDbThrottles``: DynamoDB throttles turnstile met (and retried), summed over every
  pattern (the ``all`` pattern: an alarm may add up at most 10 metrics), above
  :data:`THROTTLES_PER_MINUTE`.
* ``ConflictRate``: share of API requests answered ``409 CONFLICT`` above
  :data:`CONFLICT_RATE_PERCENT`: contention the retries could not absorb.
* ``Consumers<Consumer>IteratorAgeAlarm``: a stream consumer more than :data:`ITERATOR_AGE_MS`
  behind (the consumer's own alarm); ``Consumers<Consumer>DeadLettersAlarm``: it gave records up.
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
from constructs import Construct

from service import observability
from turnstile_ddb.cdk import OrderedStreamConsumer

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
        consumers: Sequence[OrderedStreamConsumer],
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
        self._alarm(
            "DynamoDbThrottles",
            "DynamoDB throttles turnstile's calls (retried; 503 THROTTLED once retries run out)",
            turnstile_metric(observability.ALL_PATTERNS, "Throttle"),
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
        pending_age = turnstile_metric("decider", "PendingAge", "Maximum")
        self._alarm(
            "PendingRequestAge",
            "A registration request has been PENDING for more than 5 minutes",
            pending_age,
            PENDING_AGE_MS,
        )

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        alarms: list[cloudwatch.IAlarm] = list(self.alarms.values())
        for consumer in consumers:
            alarms += [consumer.iterator_age_alarm, consumer.dead_letters_alarm]
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
                    for name in observability.catalog()[observability.API_PATTERN]
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
            for pattern, names in observability.catalog().items()
            if pattern != observability.API_PATTERN
        ]
        self.dashboard.add_widgets(*contention)
        streams: list[cloudwatch.IMetric] = [c.iterator_age_alarm.metric for c in consumers]
        streams += [
            c.dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD)
            for c in consumers
        ]
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
