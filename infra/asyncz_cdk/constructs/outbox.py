"""The events function (the outbox's publisher, docs/events.md), the bus it publishes to when
the stage asks for one, and the grants that let the functions that commit ends wake it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asyncz_cdk.constructs.function_defaults import DataAccess, FunctionDefaults, python_function

# A run drains and ends before the next minute's sweep starts another (asyncz.outbox.handler)
EVENTS_TIMEOUT_SECONDS = 60
OWN_BUS = "own"  # event_bus="own": a bus of this deployment's, named <name>-events


class EventPublisher(Construct):
    """The events function: always there, publishing to ``event_bus`` when one is set
    (``"default"``, ``"own"`` or another bus's name or ARN), and to webhooks when
    ``webhooks`` is on. Only then (``has_sink``) are the functions that commit ends
    (``wakers``) told its name and allowed to invoke it, and does the migration leave the
    outbox's triggers on: with no sink no event is written, so there is nothing to forget
    (its minute's sweep finds the outbox empty)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        defaults: FunctionDefaults,
        data: DataAccess,
        environment: Mapping[str, str],
        event_bus: str | None,
        wakers: Sequence[lambda_.Function],
        webhooks: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bus: events.IEventBus | None = None
        if event_bus == OWN_BUS:
            self.bus = events.EventBus(self, "Bus", event_bus_name=f"{name}-events")
        elif event_bus and event_bus.startswith("arn:"):
            self.bus = events.EventBus.from_event_bus_arn(self, "Bus", event_bus)
        elif event_bus:
            self.bus = events.EventBus.from_event_bus_name(self, "Bus", event_bus)
        env = {**environment, "ASYNCZ_OUTBOX_RUN_SECONDS": str(EVENTS_TIMEOUT_SECONDS - 10)}
        if self.bus is not None:
            env["ASYNCZ_EVENT_BUS"] = self.bus.event_bus_arn
        if webhooks:  # the webhook sink (asyncz_cdk.constructs.webhooks gives it a route out)
            env["ASYNCZ_WEBHOOKS"] = "true"
        self.function = python_function(
            self,
            "Function",
            defaults=defaults,
            handler="asyncz.outbox.handler.handler",
            description="AsyncZ events: publishes jobs' lifecycle events from the outbox",
            environment=env,
            memory_size=256,
            timeout=Duration.seconds(EVENTS_TIMEOUT_SECONDS),
            # one drains (a Redis lock); a second may start while the first lets go
            reserved_concurrent_executions=2,
        )
        data.grant_redis(self.function)
        data.grant_database(self.function)
        self.has_sink = self.bus is not None or webhooks
        if not self.has_sink:
            return
        if self.bus is not None:  # events:PutEvents on this bus only
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["events:PutEvents"], resources=[self.bus.event_bus_arn]
                )
            )
        for fn in wakers:
            fn.add_environment("ASYNCZ_EVENTS_FUNCTION_NAME", self.function.function_name)
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=[self.function.function_arn]
                )
            )
