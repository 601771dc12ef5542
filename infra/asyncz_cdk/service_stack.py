"""The service stack: layer, functions, migration, API, minute rules, monitoring. Stacks
compose constructs and wire them together; they hold no resources of their own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asyncz_cdk.config import StageConfig
from asyncz_cdk.constructs.api import Api
from asyncz_cdk.constructs.function_defaults import (
    DataAccess,
    FunctionDefaults,
    metrics_namespace,
)
from asyncz_cdk.constructs.functions import Functions
from asyncz_cdk.constructs.http_api import HttpApiFront
from asyncz_cdk.constructs.layer import DependencyLayer
from asyncz_cdk.constructs.migration import Migration
from asyncz_cdk.constructs.monitoring import Monitoring
from asyncz_cdk.constructs.outbox import EventPublisher
from asyncz_cdk.constructs.rules import MinuteRules
from asyncz_cdk.constructs.webhooks import WebhookDelivery
from asyncz_cdk.data_stack import retention

_ARCHITECTURES = {"x86_64": lambda_.Architecture.X86_64, "arm64": lambda_.Architecture.ARM_64}


class ServiceStack(Stack):
    """Stateless service: layer, functions, migration, API, minute rules, monitoring."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        config: StageConfig,
        data: DataAccess,
        code_dir: Path,
        layer_dir: Path,
        task_modules: Sequence[str] = (),
        stack_name: str | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=stack_name,
            description=f"AsyncZ {name} ({config.stage}): service",
        )
        architecture = _ARCHITECTURES[config.architecture]
        log_retention = retention(config.log_retention_days)
        layer = DependencyLayer(
            self, "Dependencies", build_dir=layer_dir, architecture=architecture
        )
        defaults = FunctionDefaults(
            code=lambda_.Code.from_asset(str(code_dir)),
            layer=layer.layer,
            architecture=architecture,
            stage=config.stage,
            tracing=config.tracing,
            log_retention=log_retention,
            network=data.network,
            metrics_namespace=metrics_namespace(name),
            task_modules=tuple(task_modules),
            platform_log_level=config.platform_log_level,
        )
        functions = Functions(
            self,
            "Functions",
            defaults=defaults,
            data=data,
            worker_concurrency=config.worker_concurrency,
            fleet_min_workers=config.fleet_min_workers,
            fleet_max_workers=config.fleet_max_workers,
            fleet_jobs_per_worker=config.fleet_jobs_per_worker,
            queues=config.queues,
            task_limits=config.task_limits,
            max_job_timeout_seconds=config.max_job_timeout_seconds,
            lease_timeout_seconds=config.lease_timeout_seconds,
            heartbeat_seconds=config.heartbeat_seconds,
            api_reserved_concurrency=config.api_reserved_concurrency,
            run_time_secrets=not config.iam_auth,
            otel_traces=config.otel_traces,
        )
        api: Api | HttpApiFront
        functions.api.add_environment("ASYNCZ_API_FRONT", config.api)  # GET /stats' cost
        functions.worker.add_environment(
            "ASYNCZ_WORKER_IDLE_EXIT_SECONDS", str(config.worker_idle_exit_seconds)
        )
        if config.api == "http":
            api = HttpApiFront(
                self,
                "HttpApi",
                name=name,
                handler=functions.api,
                throttle_rate=config.api_throttle_rate,
                throttle_burst=config.api_throttle_burst,
                log_retention=log_retention,
            )
        else:
            api = Api(
                self,
                "Api",
                name=name,
                handler=functions.api,
                stage_name="v1",
                throttle_rate=config.api_throttle_rate,
                throttle_burst=config.api_throttle_burst,
                execution_logging=config.api_execution_logging,
                tracing=config.tracing,
                log_retention=log_retention,
            )
        # a callback's URL is <public_url>/callbacks/<token> (docs/durable.md)
        functions.worker.add_environment("ASYNCZ_PUBLIC_URL", api.public_url)
        publisher = EventPublisher(
            self,
            "Events",
            name=name,
            defaults=defaults,
            data=data,
            environment=functions.data_environment,
            event_bus=config.event_bus,
            wakers=[functions.worker, functions.api, functions.recovery],
            webhooks=config.webhooks,
        )
        if config.webhooks:  # the secrets' key; egress for the events function alone
            network = data.network
            WebhookDelivery(
                self, "Webhooks", deliverer=publisher.function, registrars=[functions.api],
                egress_subnets=network.egress_subnets if network else None,
                vpc=network.vpc if network else None,
            )  # fmt: skip
        # the construct id stays "Schedules": a deployed stack keeps its rules' logical ids
        rules = MinuteRules(self, "Schedules", fleet=functions.fleet, recovery=functions.recovery,
                            publisher=publisher.function)  # fmt: skip
        self.migration = Migration(
            self, "Migration", defaults=defaults, data=data, run_before=[api, rules],
            # no sink: the outbox's triggers off. After the events function's update, so a
            # deploy that adds a sink writes events only once that function delivers them.
            outbox=publisher.has_sink, run_after=[publisher.function],
        )  # fmt: skip
        monitoring = Monitoring(
            self,
            "Monitoring",
            functions={
                "api": functions.api,
                "worker": functions.worker,
                "fleet": functions.fleet,
                "recovery": functions.recovery,
                "events": publisher.function,
                "migrate": self.migration.function,
            },
            name=name,
            namespace=defaults.metrics_namespace,
            alarm_period=Duration.seconds(config.alarm_period_seconds),
            oldest_queued_age_threshold_seconds=config.oldest_queued_age_threshold_seconds,
            outbox_oldest_age_threshold_seconds=config.outbox_oldest_age_threshold_seconds,
            alarm_email=config.alarm_email,
        )
        self.functions = functions
        self.publisher = publisher
        self.api = api
        self.rules = rules
        self.monitoring = monitoring

        outputs = {
            "ApiUrl": api.url,
            "ApiId": api.api_id,
            "ApiKeySecretArn": functions.api_keys_secret.secret_arn,
            "WorkerFunctionName": functions.worker.function_name,
            "FleetFunctionName": functions.fleet.function_name,
            "RecoveryFunctionName": functions.recovery.function_name,
            "ApiFunctionName": functions.api.function_name,
            "MigrateFunctionName": self.migration.function.function_name,
            "EventsFunctionName": publisher.function.function_name,
            "DlqAlarmName": monitoring.dlq_alarm.alarm_name,
            "OldestQueuedAlarmName": monitoring.oldest_queued_alarm.alarm_name,
            "OutboxAlarmName": monitoring.outbox_alarm.alarm_name,
            "AlertsTopicArn": monitoring.topic.topic_arn,
            "DashboardName": monitoring.dashboard.dashboard_name,
        }
        if publisher.bus is not None:
            outputs["EventBusArn"] = publisher.bus.event_bus_arn
        for name, value in outputs.items():
            CfnOutput(self, name, value=value)
