"""The api, worker, fleet and recovery functions and their least-privilege grants."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from asyncz_cdk.constructs.function_defaults import (
    DataAccess,
    FunctionDefaults,
    python_function,
)

WORKER_TIMEOUT_SECONDS = 900  # Lambda's maximum; the worker loops until near the end
API_TIMEOUT_SECONDS = 29  # API Gateway's integration limit
# The fleet's rule runs it once a minute. Each tick waits for the wakes due before its
# timeout less a margin (asyncz.fleet.wakes), so a timeout of the rule's minute lets it cover
# the minute and still end before the next tick (reserved concurrency 1: ticks never overlap).
FLEET_TIMEOUT_SECONDS = 60


class Functions(Construct):
    """The four long-lived functions, each with its own role.

    Grants: each reads the Redis AUTH token; all but the fleet (Redis only) read the
    database secret; only
    the api reads the API key secret; only fleet and api may invoke, and only the
    worker; only recovery may put metric data, and only in the AsyncZ namespace.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        defaults: FunctionDefaults,
        data: DataAccess,
        worker_concurrency: int,
        fleet_min_workers: int,
        fleet_max_workers: int,
        fleet_jobs_per_worker: int,
        queues: tuple[str, ...],
        max_job_timeout_seconds: int,
        lease_timeout_seconds: int,
        heartbeat_seconds: int,
        api_reserved_concurrency: int | None = None,
        run_time_secrets: bool = True,
        task_limits: str = "",
    ) -> None:
        super().__init__(scope, construct_id)
        if max_job_timeout_seconds >= WORKER_TIMEOUT_SECONDS:
            raise ValueError(f"max_job_timeout_seconds must be < {WORKER_TIMEOUT_SECONDS}")

        # The app and the gateway accept the same generated key (see Api).
        self.api_keys_secret = secretsmanager.Secret(
            self,
            "ApiKeys",
            description='AsyncZ API key: JSON {"api_key": ...}, also the gateway\'s key',
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template="{}",  # noqa: S106 - an empty JSON template
                generate_string_key="api_key",
                password_length=40,
                exclude_punctuation=True,
                include_space=False,
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )

        redis_env = {
            **data.redis_environment,
            **data.extra,
            "ASYNCZ_QUEUES": ",".join(queues),
            **({"ASYNCZ_TASK_LIMITS": task_limits} if task_limits else {}),
        }
        data_env = {**data.database_environment, **redis_env}
        self.data_environment = data_env  # what another function of the service starts from
        jobs_env = {"ASYNCZ_MAX_TIMEOUT_SECONDS": str(max_job_timeout_seconds)}
        lease_env = {
            "ASYNCZ_LEASE_TIMEOUT_SECONDS": str(lease_timeout_seconds),
            "ASYNCZ_HEARTBEAT_SECONDS": str(heartbeat_seconds),
        }

        self.worker = python_function(
            self,
            "Worker",
            defaults=defaults,
            handler="asyncz.worker.handler.handler",
            description="AsyncZ worker: claims and runs jobs until its time runs out",
            environment={
                **data_env,
                **jobs_env,
                **lease_env,
                "ASYNCZ_WORKER_CONCURRENCY": str(worker_concurrency),
            },
            memory_size=1024,
            timeout=Duration.seconds(WORKER_TIMEOUT_SECONDS),
            # The fleet never runs more workers than this, whatever it computes.
            reserved_concurrent_executions=fleet_max_workers,
        )
        fleet_env = {
            "ASYNCZ_WORKER_FUNCTION_NAME": self.worker.function_name,
            "ASYNCZ_FLEET_MIN_WORKERS": str(fleet_min_workers),
            "ASYNCZ_FLEET_MAX_WORKERS": str(fleet_max_workers),
            "ASYNCZ_FLEET_JOBS_PER_WORKER": str(fleet_jobs_per_worker),
        }
        self.fleet = python_function(
            self,
            "Fleet",
            defaults=defaults,
            handler="asyncz.fleet.handler.handler",
            description="AsyncZ fleet controller: starts workers for the backlog",
            environment={**redis_env, **fleet_env},  # Redis only: no database access
            memory_size=256,
            timeout=Duration.seconds(FLEET_TIMEOUT_SECONDS),
            reserved_concurrent_executions=1,
        )
        self.recovery = python_function(
            self,
            "Recovery",
            defaults=defaults,
            handler="asyncz.recovery.handler.handler",
            description="AsyncZ recovery: stale leases, orphaned jobs, queue gauges",
            environment={
                **data_env,
                **lease_env,
                "ASYNCZ_PUBLISH_GAUGES": "true",
                # what a run enqueues (periodic slots, rescued jobs) starts workers at once
                "ASYNCZ_WORKER_FUNCTION_NAME": self.worker.function_name,
            },
            memory_size=512,
            timeout=Duration.seconds(300),
            reserved_concurrent_executions=1,
        )
        # Without a Secrets Manager endpoint (IAM-auth profiles) the key reaches the api
        # as a dynamic reference resolved at deploy, as it reaches the gateway's key.
        key_env = (
            {"ASYNCZ_API_KEYS_SECRET_ARN": self.api_keys_secret.secret_arn}
            if run_time_secrets
            else {
                "ASYNCZ_API_KEYS": self.api_keys_secret.secret_value_from_json(
                    "api_key"
                ).unsafe_unwrap()
            }
        )
        self.api = python_function(
            self,
            "Api",
            defaults=defaults,
            handler="asyncz.api.handler.handler",
            description="AsyncZ HTTP API (FastAPI via Mangum)",
            environment={
                **data_env,
                **jobs_env,
                **key_env,
                "ASYNCZ_WORKER_FUNCTION_NAME": self.worker.function_name,
            },
            memory_size=1024,
            timeout=Duration.seconds(API_TIMEOUT_SECONDS),
            # Without RDS Proxy this bounds the api's connections (asyncz_cdk.budget).
            reserved_concurrent_executions=api_reserved_concurrency,
        )

        for fn in self.all:
            data.grant_redis(fn)
            if fn is not self.fleet:
                data.grant_database(fn)
        if run_time_secrets:
            self.api_keys_secret.grant_read(self.api)
        self.worker.grant_invoke(self.fleet)
        self.worker.grant_invoke(self.api)  # wake-up when no worker is alive
        self.worker.grant_invoke(self.recovery)  # after it enqueued periodic or rescued jobs
        # Workers start workers too when they see a backlog (asyncz.fleet.scale_out). A policy of
        # its own: in the role's default policy (which the function waits for) the
        # function's own ARN would be a dependency cycle.
        assert self.worker.role is not None
        iam.Policy(
            self,
            "WorkerScaleOut",
            roles=[self.worker.role],
            statements=[
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=[self.worker.function_arn]
                )
            ],
        )
        if run_time_secrets:
            self.recovery.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["cloudwatch:PutMetricData"],
                    resources=["*"],  # PutMetricData has no resource-level permissions
                    conditions={
                        "StringEquals": {"cloudwatch:namespace": defaults.metrics_namespace}
                    },
                )
            )

    @property
    def all(self) -> list[lambda_.Function]:
        """The four functions, in a fixed order."""
        return [self.api, self.worker, self.fleet, self.recovery]
