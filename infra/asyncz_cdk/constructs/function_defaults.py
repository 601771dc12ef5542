"""What every AsyncZ function shares: code asset, layer, runtime, and data access."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

RUNTIME = lambda_.Runtime.PYTHON_3_12
SERVICE_NAME = "asyncz"  # Powertools service name: the `service` dimension of EMF metrics
METRICS_NAMESPACE = "AsyncZ"  # the default deployment's; see metrics_namespace()


def metrics_namespace(deployment: str) -> str:
    """The CloudWatch namespace of one deployment: alarms of two deployments in one
    account and region must not watch each other's gauges."""
    return METRICS_NAMESPACE if deployment == "asyncz" else f"{METRICS_NAMESPACE}/{deployment}"


# Never ship these from functions/ (the package is the only thing a Lambda needs).
CODE_EXCLUDES = [
    "**/__pycache__",
    "**/*.pyc",
    "**/.mypy_cache",
    "**/.pytest_cache",
    "**/.ruff_cache",
    "*.egg-info",
    "**/tests",
    "**/*.md",
    # dev tools, not Lambda passengers: the local runner and the CLI
    "asyncz/local",
    "asyncz/cli",
    "asyncz/client",  # the HTTP client users import (no function uses it)
    "asyncz/__main__.py",
    "asyncz/testing",  # the in-memory store and broker of the unit tests
]


# What AWSLambdaVPCAccessExecutionRole grants, minus its logs:* on every log group.
VPC_NETWORK_INTERFACE_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]


@dataclass(frozen=True)
class FunctionNetwork:
    """Where VPC-attached functions live (``aws`` stages only)."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    security_groups: Sequence[ec2.ISecurityGroup]
    # webhooks on: subnets with a route out, for the function that delivers them only
    egress_subnets: ec2.SubnetSelection | None = None


@dataclass(frozen=True)
class DataAccess:
    """How the functions reach Postgres and Redis: environment plus what to grant.

    ``database_environment`` is all a migration needs; ``redis_environment`` is added
    for every other function. The secrets are granted only to functions that use them.
    """

    database_environment: Mapping[str, str]
    redis_environment: Mapping[str, str]
    database_secret: secretsmanager.ISecret | None = None
    redis_auth_secret: secretsmanager.ISecret | None = None
    network: FunctionNetwork | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    # The owner's credentials and what else the migration step needs (the runtime
    # secret whose password it provisions); None where both are the same (local stage).
    migration_environment: Mapping[str, str] | None = None
    admin_secret: secretsmanager.ISecret | None = None
    # IAM auth (lean, serverless): grant rds-db:connect / elasticache:Connect.
    database_connect: Callable[[iam.IGrantable], None] | None = None
    redis_connect: Callable[[iam.IGrantable], None] | None = None

    def grant_database(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` read the database credentials (if they are a secret) or sign
        IAM auth tokens for the runtime role."""
        if self.database_secret is not None:
            self.database_secret.grant_read(grantee)
        if self.database_connect is not None:
            self.database_connect(grantee)

    def grant_migration(self, grantee: iam.IGrantable) -> None:
        """Let the migration step read the owner's and the runtime role's credentials."""
        if self.database_secret is not None:
            self.database_secret.grant_read(grantee)
        if self.admin_secret is not None:
            self.admin_secret.grant_read(grantee)

    def grant_redis(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` read the Redis AUTH token (if there is one)."""
        if self.redis_auth_secret is not None:
            self.redis_auth_secret.grant_read(grantee)
        if self.redis_connect is not None:
            self.redis_connect(grantee)


@dataclass(frozen=True)
class FunctionDefaults:
    """Settings every function of a stage shares."""

    code: lambda_.Code
    layer: lambda_.ILayerVersion
    architecture: lambda_.Architecture
    stage: str
    tracing: bool
    log_retention: logs.RetentionDays
    network: FunctionNetwork | None
    metrics_namespace: str = METRICS_NAMESPACE
    task_modules: Sequence[str] = ()
    # Lambda's own START/END/REPORT lines (about 260 bytes an invocation, ingested at $0.50
    # per GB) are written at INFO: "WARN" drops them (JSON log format); None keeps Lambda's
    # text format and its platform lines (the LocalStack stage).
    platform_log_level: str | None = "WARN"

    def base_environment(self) -> dict[str, str]:
        """Variables every function gets regardless of what it does."""
        env = {
            "ASYNCZ_STAGE": self.stage,
            "ASYNCZ_METRICS_NAMESPACE": self.metrics_namespace,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": self.metrics_namespace,
            "POWERTOOLS_TRACE_DISABLED": "false" if self.tracing else "true",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            # one invocation in a hundred logs its DEBUG details too
            "POWERTOOLS_LOGGER_SAMPLE_RATE": "0.01",
        }
        if self.task_modules:
            env["ASYNCZ_TASK_MODULES"] = ",".join(self.task_modules)
        return env


def python_function(
    scope: Construct,
    construct_id: str,
    *,
    defaults: FunctionDefaults,
    handler: str,
    description: str,
    environment: Mapping[str, str],
    memory_size: int,
    timeout: Duration,
    reserved_concurrent_executions: int | None = None,
) -> lambda_.Function:
    """One AsyncZ function: its own role and log group, the shared code and layer."""
    log_group = logs.LogGroup(
        scope,
        f"{construct_id}Logs",
        retention=defaults.log_retention,
        removal_policy=RemovalPolicy.DESTROY,
    )
    network = defaults.network
    # Our own role instead of the AWS managed execution policies: logs go only to this
    # function's log group, and the VPC grant is limited to the ENI calls Lambda makes.
    role = iam.Role(
        scope,
        f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"AsyncZ {construct_id} function",
    )
    log_group.grant_write(role)
    if network:
        role.add_to_policy(
            iam.PolicyStatement(
                actions=VPC_NETWORK_INTERFACE_ACTIONS,
                resources=["*"],  # these EC2 calls take no resource-level scoping
            )
        )
    return lambda_.Function(
        scope,
        construct_id,
        runtime=RUNTIME,
        architecture=defaults.architecture,
        code=defaults.code,
        handler=handler,
        layers=[defaults.layer],
        description=description,
        environment={**defaults.base_environment(), **environment},
        memory_size=memory_size,
        timeout=timeout,
        reserved_concurrent_executions=reserved_concurrent_executions,
        tracing=lambda_.Tracing.ACTIVE if defaults.tracing else lambda_.Tracing.DISABLED,
        log_group=log_group,
        **_log_levels(defaults.platform_log_level),
        role=role,
        vpc=network.vpc if network else None,
        vpc_subnets=network.subnets if network else None,
        security_groups=list(network.security_groups) if network else None,
    )


def _log_levels(platform_log_level: str | None) -> dict[str, Any]:
    """Lambda's log settings: JSON lines, the application's at INFO (Powertools reads it),
    Lambda's own platform lines only at ``platform_log_level`` and above."""
    if platform_log_level is None:
        return {}
    return {
        "logging_format": lambda_.LoggingFormat.JSON,
        "application_log_level_v2": lambda_.ApplicationLogLevel.INFO,
        "system_log_level_v2": lambda_.SystemLogLevel(platform_log_level),
    }
