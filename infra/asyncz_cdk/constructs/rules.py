"""EventBridge rules: the fleet controller and recovery run every minute (the one "schedule"
word of the tree is a periodic task's cron schedule; these are rate rules)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct


class MinuteRules(Construct):
    """``rate(1 minute)`` rules targeting ``fleet``, ``recovery`` and the events function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fleet: lambda_.IFunction,
        recovery: lambda_.IFunction,
        publisher: lambda_.IFunction | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        every_minute = events.Schedule.rate(Duration.minutes(1))
        self.fleet_rule = events.Rule(
            self,
            "Fleet",
            description="AsyncZ: size the worker fleet to the backlog",
            schedule=every_minute,
            targets=[targets.LambdaFunction(fleet, retry_attempts=0)],
        )
        self.recovery_rule = events.Rule(
            self,
            "Recovery",
            description="AsyncZ: recover stale leases and orphaned jobs, publish gauges",
            schedule=every_minute,
            targets=[targets.LambdaFunction(recovery, retry_attempts=0)],
        )
        # the outbox's sweep: what no wake delivered (a crash, a lost invoke)
        self.events_rule = (
            events.Rule(
                self,
                "Events",
                description="AsyncZ: publish the jobs' lifecycle events left in the outbox",
                schedule=every_minute,
                targets=[targets.LambdaFunction(publisher, retry_attempts=0)],
            )
            if publisher is not None
            else None
        )
