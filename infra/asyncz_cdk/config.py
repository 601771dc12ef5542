"""Per-stage settings of the deployment, chosen in :mod:`infra.app` and passed down.

Constructs receive these values as arguments; none of them reads the environment or
CDK context itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Architecture = Literal["x86_64", "arm64"]
# The API Gateway in front of the api function: the REST API (v1) or an HTTP API (v2,
# payload format 2.0; cheaper per request: docs/cost.md).
ApiKind = Literal["rest", "http"]
StageKind = Literal["aws", "local"]
# What an ``aws`` stage costs and gives up (docs/deploy.md prices each):
#   standard   RDS + RDS Proxy, Valkey primary + replica, Secrets Manager credentials;
#   lean       one small RDS instance and one cache node, IAM auth tokens signed in the
#              function (no Secrets Manager, no proxy), only the Lambda endpoint;
#   serverless Aurora Serverless v2 (pauses at 0 ACU) + ElastiCache Serverless, IAM auth.
Profile = Literal["standard", "lean", "serverless"]
PROFILES: tuple[Profile, ...] = ("standard", "lean", "serverless")

DEFAULT_LOCAL_DATABASE_URL = "postgresql://127.0.0.1:5432/asyncz_localstack"
DEFAULT_LOCAL_REDIS_URL = "redis://127.0.0.1:6379/2"


@dataclass(frozen=True)
class StageConfig:
    """Everything that differs between stages; the defaults are the ``aws`` production stage."""

    stage: str
    kind: StageKind = "aws"
    profile: Profile = "standard"
    architecture: Architecture = "x86_64"
    api: ApiKind = "rest"
    # Lambda's platform lines (START/END/REPORT) at this level and above; None: Lambda's
    # text log format with all of them (the local stage: LocalStack's logs as before).
    platform_log_level: str | None = "WARN"

    # --- Network (aws only). NAT gateways give the functions internet egress
    # (needed by tasks that call outside APIs); 0 keeps them private and cheaper.
    nat_gateways: int = 0
    max_azs: int = 2
    # Webhooks (docs/events.md): a KMS key for their signing secrets and, for the function
    # that delivers them alone, egress through one NAT gateway (docs/cost.md prices both).
    webhooks: bool = False

    # --- PostgreSQL (aws only).
    postgres_version: str = "16.9"  # a full engine version, never a bare major
    db_instance_type: str = "t4g.micro"
    db_allocated_storage_gib: int = 20
    db_multi_az: bool = False
    db_deletion_protection: bool = True
    db_backup_retention_days: int = 7
    db_name: str = "asyncz"

    # --- Redis / Valkey (aws only).
    cache_engine: str = "valkey"
    cache_engine_version: str = "8.0"
    cache_node_type: str = "cache.t4g.micro"
    cache_replicas: int = 1  # >0 enables Multi-AZ automatic failover
    cache_port: int = 6380  # non-default port (AwsSolutions-AEC5)

    # --- Serverless profile: Aurora Serverless v2 capacity range (ACU) and pause delay.
    aurora_postgres_version: str = "16.9"
    aurora_min_acu: float = 0.0  # 0 = auto-pause when idle
    aurora_max_acu: float = 2.0
    aurora_pause_after_seconds: int = 300
    # Recovery skips Postgres while Redis shows no work since its last idle check; the
    # database is still checked this often (0 = every run: standard and lean).
    recovery_idle_check_seconds: int = 0

    # --- Connection budget (profiles without RDS Proxy): the api's reserved concurrency
    # (None = unreserved, standard) and each sandbox's pool size.
    api_reserved_concurrency: int | None = None
    db_pool_max: int = 2

    # --- Local stage: where the functions find Postgres and Redis.
    database_url: str | None = None
    redis_url: str | None = None

    # --- Functions.
    # The queues this deployment runs (ASYNCZ_QUEUES): a job for any other is refused 422.
    queues: tuple[str, ...] = ("default",)
    # Limits over the tasks' own in this deployment (ASYNCZ_TASK_LIMITS, docs/flow-control.md):
    # JSON {"call_llm": {"concurrency": 3, "rate": "30/m"}}; checked again at cold start.
    task_limits: str = ""
    worker_concurrency: int = 10
    # A worker out of work leaves after this long (ASYNCZ_WORKER_IDLE_EXIT_SECONDS): an idle
    # second is billed like a busy one, and the api wakes a worker at the next submit, into
    # a warm sandbox most of the time (docs/cost.md, "Worker billing").
    worker_idle_exit_seconds: int = 5
    fleet_min_workers: int = 0
    fleet_max_workers: int = 10  # also the worker's reserved concurrency
    fleet_jobs_per_worker: int = 200
    max_job_timeout_seconds: int = 840  # the worker Lambda itself runs 900 s
    # A lease not heartbeated for this long is stale: recovery re-queues the job. The
    # worker (heartbeats) and recovery (judges staleness) must agree, so both get it.
    lease_timeout_seconds: int = 60
    heartbeat_seconds: int = 10
    tracing: bool = True
    # Spans of a job's path (submit -> each attempt) through the ADOT Lambda layer on the api
    # and the worker (docs/operate.md): "" off, "xray" (the layer's collector exports to
    # X-Ray; adds the X-Ray endpoint as ``tracing`` does), or an OTLP/HTTP endpoint URL
    # (reached through a NAT or an endpoint in the VPC: the default subnets have no egress).
    otel_traces: str = ""
    log_retention_days: int = 30

    # --- API Gateway stage throttle (the whole API; per-key rates are set on each key).
    api_throttle_rate: float = 100.0
    api_throttle_burst: int = 200
    api_execution_logging: bool = True  # needs the account-level CloudWatch role

    # --- Lifecycle events (docs/events.md): publish them to EventBridge, on "default" (the
    # account's bus), "own" (a bus of this deployment's) or another bus's name or ARN. None:
    # off (PutEvents and the events endpoint cost money: docs/cost.md).
    event_bus: str | None = None
    outbox_oldest_age_threshold_seconds: int = 300

    # --- Monitoring.
    alarm_period_seconds: int = 60
    oldest_queued_age_threshold_seconds: int = 300
    alarm_email: str | None = None

    # --- Lifecycle.
    retain_data: bool = True  # snapshot/retain stateful resources on stack deletion

    def __post_init__(self) -> None:
        if self.kind == "local" and not (self.database_url and self.redis_url):
            raise ValueError(
                f"stage {self.stage!r}: a local stage needs database_url and redis_url"
            )
        if not self.queues or not all(
            q and q.replace("-", "_").isidentifier() for q in self.queues
        ):
            raise ValueError(
                f"queues must be names such as 'default' or 'reports', got {self.queues!r}"
            )
        if self.task_limits and not _limits_shape(self.task_limits):
            raise ValueError(
                'task_limits is JSON such as {"call_llm": {"concurrency": 3}}, '
                f"got {self.task_limits!r}"
            )
        if self.fleet_max_workers < self.fleet_min_workers:
            raise ValueError("fleet_max_workers must be >= fleet_min_workers")
        if self.heartbeat_seconds * 2 > self.lease_timeout_seconds:
            raise ValueError("lease_timeout_seconds must be at least twice heartbeat_seconds")
        if self.profile not in PROFILES:
            raise ValueError(f"profile {self.profile!r}: use one of {', '.join(PROFILES)}")
        if self.postgres_version.count(".") < 1:
            raise ValueError("postgres_version must be a full engine version such as '16.9'")
        if self.otel_traces and not _otel_target(self.otel_traces):
            raise ValueError(
                f"otel_traces is 'xray' or an http(s):// OTLP endpoint, got {self.otel_traces!r}"
            )
        if self.otel_traces and self.kind == "local":
            raise ValueError("otel_traces: the ADOT layer is an AWS-published layer (aws stage)")
        if self.alarm_period_seconds not in (10, 20, 30) and self.alarm_period_seconds % 60:
            raise ValueError("alarm_period_seconds must be 10, 20, 30 or a multiple of 60")

    @property
    def in_vpc(self) -> bool:
        """Whether this stage has a VPC, RDS and ElastiCache (the ``aws`` kind)."""
        return self.kind == "aws"

    @property
    def xray_endpoint(self) -> bool:
        """Whether the functions export to X-Ray: active tracing, or ADOT's collector."""
        return self.in_vpc and (self.tracing or self.otel_traces == "xray")

    @property
    def iam_auth(self) -> bool:
        """Whether the functions sign IAM auth tokens instead of reading Secrets Manager."""
        return self.in_vpc and self.profile != "standard"


# Each profile's defaults; explicit overrides (CDK context) still win.
PROFILE_DEFAULTS: dict[Profile, dict[str, Any]] = {
    "standard": {},
    "lean": {
        "db_instance_type": "t4g.micro",
        "cache_replicas": 0,
        "tracing": False,  # no X-Ray endpoint ($14.60/month) in lean
        "api_reserved_concurrency": 10,
        "fleet_max_workers": 4,
        "api": "http",  # $1.00 per million requests against $3.50 (docs/cost.md)
        # Graviton: 20% less per GB-second (docs/cost.md); the layer is built from aarch64
        # wheels, and a task dependency without one fails synth naming it.
        "architecture": "arm64",
    },
    "serverless": {
        "cache_replicas": 0,
        "tracing": False,
        "api_reserved_concurrency": 10,
        "fleet_max_workers": 4,
        "recovery_idle_check_seconds": 3600,
        "api": "http",
        "architecture": "arm64",
    },
}


def aws_stage(
    stage: str = "aws",
    overrides: Mapping[str, Any] | None = None,
    *,
    profile: Profile = "standard",
) -> StageConfig:
    """The deployment into a real AWS account, sized by ``profile`` (default ``standard``)."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: use one of {', '.join(PROFILES)}")
    values = {**PROFILE_DEFAULTS[profile], **dict(overrides or {})}
    return StageConfig(stage=stage, kind="aws", profile=profile, **values)


def local_stage(
    stage: str = "local",
    *,
    database_url: str = DEFAULT_LOCAL_DATABASE_URL,
    redis_url: str = DEFAULT_LOCAL_REDIS_URL,
    overrides: Mapping[str, Any] | None = None,
) -> StageConfig:
    """The LocalStack deployment: no VPC/RDS/ElastiCache; Postgres and Redis run beside it."""
    values: dict[str, Any] = {
        "tracing": False,
        "api_execution_logging": False,
        "alarm_period_seconds": 10,
        "fleet_max_workers": 4,
        "worker_concurrency": 4,
        # Short leases so a killed worker's job is recovered within seconds in tests.
        "lease_timeout_seconds": 10,
        "heartbeat_seconds": 2,
        "worker_idle_exit_seconds": 30,  # LocalStack's cold starts are slow; nothing is billed
        "log_retention_days": 7,
        "retain_data": False,
        "platform_log_level": None,
        "db_deletion_protection": False,
    }
    values.update(overrides or {})
    return StageConfig(
        stage=stage, kind="local", database_url=database_url, redis_url=redis_url, **values
    )


def _otel_target(value: str) -> bool:
    return value == "xray" or value.startswith(("http://", "https://"))


def _limits_shape(text: str) -> bool:
    """A JSON object of objects (the values are checked by the functions at cold start)."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and all(isinstance(v, dict) for v in data.values())
