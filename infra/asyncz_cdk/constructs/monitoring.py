"""Alarms on the queue gauges and on the functions, an SNS topic for them, a dashboard.

Missing data is breaching for every gauge alarm: the recovery function publishes the
gauges each minute, so silence means it (or a dependency) is failing, and that must make
the alarms louder, never quieter.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from asyncz_cdk.constructs.function_defaults import SERVICE_NAME


def _gauge(namespace: str, name: str, period: Duration) -> cloudwatch.Metric:
    # Published by recovery with PutMetricData, without dimensions.
    return cloudwatch.Metric(
        namespace=namespace, metric_name=name, statistic="Maximum", period=period
    )


def _job_metric(namespace: str, name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
    # EMF from Powertools Metrics: dimension service=<POWERTOOLS_SERVICE_NAME>.
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={"service": SERVICE_NAME},
        statistic=statistic,
        period=period,
    )


class Monitoring(Construct):
    """DLQDepth >= 1, OldestQueuedAgeSeconds and OutboxOldestAgeSeconds >= their thresholds
    alarm into ``topic``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.IFunction],
        name: str,
        namespace: str,
        alarm_period: Duration,
        oldest_queued_age_threshold_seconds: int,
        alarm_email: str | None,
        outbox_oldest_age_threshold_seconds: int = 300,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self, "Alerts", display_name=f"AsyncZ {name} alerts", enforce_ssl=True
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        action = cw_actions.SnsAction(self.topic)

        dlq_depth = _gauge(namespace, "DLQDepth", alarm_period)
        oldest_age = _gauge(namespace, "OldestQueuedAgeSeconds", alarm_period)
        queue_depth = _gauge(namespace, "QueueDepth", alarm_period)

        def gauge_alarm(
            alarm_id: str, suffix: str, description: str, metric: cloudwatch.Metric,
            threshold: float, periods: int = 1, datapoints: int = 1,
        ) -> cloudwatch.Alarm:  # fmt: skip
            """A gauge's alarm: at or over ``threshold``; missing data (silence from
            recovery) is breaching."""
            return cloudwatch.Alarm(
                self,
                alarm_id,
                alarm_name=f"{name}-{suffix}",
                alarm_description=f"AsyncZ: {description}",
                metric=metric,
                threshold=threshold,
                comparison_operator=(
                    cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
                ),
                evaluation_periods=periods,
                datapoints_to_alarm=datapoints,
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
            )

        self.dlq_alarm = gauge_alarm(
            "DlqDepth", "dlq-depth", "at least one job is dead (status='dead'); see GET /dlq",
            dlq_depth, 1,
        )  # fmt: skip
        self.oldest_queued_alarm = gauge_alarm(
            "OldestQueuedAge", "oldest-queued-age",
            "the oldest due queued job has waited too long", oldest_age,
            oldest_queued_age_threshold_seconds, periods=3, datapoints=2,
        )  # fmt: skip
        self.outbox_alarm = gauge_alarm(
            "OutboxOldestAge", "outbox-oldest-age",
            "the oldest unpublished lifecycle event has waited too long (the events "
            "function or its bus is failing; see docs/events.md)",
            _gauge(namespace, "OutboxOldestAgeSeconds", alarm_period),
            outbox_oldest_age_threshold_seconds, periods=3, datapoints=2,
        )  # fmt: skip
        self.degraded_alarm = gauge_alarm(
            "Degraded", "degraded", "recovery could not reach PostgreSQL or Redis",
            _gauge(namespace, "Degraded", alarm_period), 1, periods=2, datapoints=2,
        )  # fmt: skip
        self.steps_failed_alarm = gauge_alarm(
            "RecoveryStepsFailed", "recovery-steps-failed",
            "a step of the recovery sweep failed (its log line names the step; the other "
            "steps still ran)",
            _gauge(namespace, "RecoveryStepsFailed", alarm_period), 1,
        )  # fmt: skip
        self.function_alarms: list[cloudwatch.Alarm] = []
        for label, fn in functions.items():
            for kind, metric in (
                ("Errors", fn.metric_errors(period=alarm_period, statistic="Sum")),
                ("Throttles", fn.metric_throttles(period=alarm_period, statistic="Sum")),
            ):
                self.function_alarms.append(
                    cloudwatch.Alarm(
                        self,
                        f"{label.capitalize()}{kind}",
                        alarm_name=f"{name}-{label}-{kind.lower()}",
                        alarm_description=f"AsyncZ: the {label} function reports {kind.lower()}",
                        metric=metric,
                        threshold=1,
                        comparison_operator=(
                            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
                        ),
                        evaluation_periods=1,
                        # no invocation, no error: missing data is fine for these
                        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                    )
                )
        for alarm in (
            self.dlq_alarm,
            self.oldest_queued_alarm,
            self.outbox_alarm,
            self.degraded_alarm,
            self.steps_failed_alarm,
            *self.function_alarms,
        ):
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

        five_min = Duration.minutes(5)
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=name, default_interval=Duration.hours(3)
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Jobs",
                width=12,
                left=[
                    # recovery counts the submitted jobs once a minute (a gauge's shape)
                    cloudwatch.Metric(
                        namespace=namespace,
                        metric_name="JobsSubmitted",
                        statistic="Sum",
                        period=five_min,
                    ),
                    *(
                        _job_metric(namespace, metric, "Sum", five_min)
                        for metric in ("JobsCompleted", "JobsRetried", "JobsDeadLettered")
                    ),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Backlog and DLQ",
                width=12,
                left=[queue_depth, dlq_depth],
                right=[oldest_age],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Job duration (ms)",
                width=12,
                left=[
                    _job_metric(namespace, "JobDuration", stat, five_min)
                    for stat in ("p50", "p90", "Maximum")
                ],
            ),
            cloudwatch.AlarmStatusWidget(
                title="Alarms",
                width=12,
                alarms=[self.dlq_alarm, self.oldest_queued_alarm, self.degraded_alarm],
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda errors",
                width=8,
                left=[
                    fn.metric_errors(label=label, period=five_min)
                    for label, fn in functions.items()
                ],
            ),
            cloudwatch.GraphWidget(
                title="Lambda throttles",
                width=8,
                left=[
                    fn.metric_throttles(label=label, period=five_min)
                    for label, fn in functions.items()
                ],
            ),
            cloudwatch.GraphWidget(
                title="Lambda concurrency",
                width=8,
                left=[
                    fn.metric(
                        "ConcurrentExecutions", label=label, statistic="Maximum", period=five_min
                    )
                    for label, fn in functions.items()
                ],
            ),
        )
