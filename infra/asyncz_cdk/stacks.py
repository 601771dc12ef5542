"""Stacks compose constructs and wire them together; they hold no resources of their own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from asyncz_cdk.budget import check_connection_budget
from asyncz_cdk.config import StageConfig
from asyncz_cdk.constructs.api import Api
from asyncz_cdk.constructs.cache import Cache
from asyncz_cdk.constructs.database import Database
from asyncz_cdk.constructs.function_defaults import (
    DataAccess,
    FunctionDefaults,
    FunctionNetwork,
    metrics_namespace,
)
from asyncz_cdk.constructs.functions import Functions
from asyncz_cdk.constructs.iam_cache import IamCache
from asyncz_cdk.constructs.iam_database import IamDatabase
from asyncz_cdk.constructs.layer import DependencyLayer
from asyncz_cdk.constructs.migration import Migration
from asyncz_cdk.constructs.monitoring import Monitoring
from asyncz_cdk.constructs.network import Network
from asyncz_cdk.constructs.rules import MinuteRules

_ARCHITECTURES = {"x86_64": lambda_.Architecture.X86_64, "arm64": lambda_.Architecture.ARM_64}

# The database's bound on each statement the functions run (ASYNCZ_DB_STATEMENT_TIMEOUT_SECONDS)
STATEMENT_TIMEOUT_SECONDS = 5
SERVERLESS_REDIS_PREFIX = "{asyncz}"  # one hash slot for every key (cluster mode)


_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def retention(days: int) -> logs.RetentionDays:
    """The CloudWatch Logs retention period of ``days`` days."""
    try:
        return _RETENTION[days]
    except KeyError:
        raise ValueError(f"log retention must be one of {sorted(_RETENTION)} days") from None


class DataStack(Stack):
    """Stateful resources of an ``aws`` stage: VPC, PostgreSQL + proxy, Redis."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        config: StageConfig,
        stack_name: str | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=stack_name,
            description=f"AsyncZ {name} ({config.stage}): data stores",
        )
        self.config = config
        self.network = Network(
            self,
            "Network",
            nat_gateways=config.nat_gateways,
            max_azs=config.max_azs,
            flow_log_retention=retention(config.log_retention_days),
            xray_endpoint=config.tracing,
            run_time_secrets=not config.iam_auth,
            endpoints_in_one_az=config.iam_auth,
        )
        if config.iam_auth:
            self.budget = check_connection_budget(config)
            self._iam_stores(name, config)
            return
        vpc = self.network.vpc
        clients = self.network.function_security_group
        self.database = Database(
            self,
            "Database",
            vpc=vpc,
            subnets=self.network.data_subnets,
            client_security_group=clients,
            engine_version=config.postgres_version,
            instance_type=config.db_instance_type,
            allocated_storage_gib=config.db_allocated_storage_gib,
            database_name=config.db_name,
            multi_az=config.db_multi_az,
            deletion_protection=config.db_deletion_protection,
            backup_retention_days=config.db_backup_retention_days,
            retain=config.retain_data,
            proxy_name=f"{name}-db",
            instance_identifier=f"{name}-db",
            log_retention=retention(config.log_retention_days),
        )
        self.cache = Cache(
            self,
            "Cache",
            vpc=vpc,
            subnets=self.network.data_subnets,
            client_security_group=clients,
            engine=config.cache_engine,
            engine_version=config.cache_engine_version,
            node_type=config.cache_node_type,
            replicas=config.cache_replicas,
            port=config.cache_port,
            retain=config.retain_data,
        )

    def _iam_stores(self, name: str, config: StageConfig) -> None:
        serverless = config.profile == "serverless"
        self.iam_database = IamDatabase(
            self,
            "Database",
            vpc=self.network.vpc,
            subnets=self.network.data_subnets,
            client_security_group=self.network.function_security_group,
            engine_version=(
                config.aurora_postgres_version if serverless else config.postgres_version
            ),
            instance_type=config.db_instance_type,
            allocated_storage_gib=config.db_allocated_storage_gib,
            database_name=config.db_name,
            deletion_protection=config.db_deletion_protection,
            backup_retention_days=config.db_backup_retention_days,
            retain=config.retain_data,
            identifier=f"{name}-db",
            log_retention=retention(config.log_retention_days),
            serverless_acu=(config.aurora_min_acu, config.aurora_max_acu) if serverless else None,
            pause_after_seconds=config.aurora_pause_after_seconds,
        )
        self.iam_cache = IamCache(
            self,
            "Cache",
            name=name,
            vpc=self.network.vpc,
            subnets=self.network.data_subnets,
            client_security_group=self.network.function_security_group,
            engine_version=config.cache_engine_version,
            node_type=config.cache_node_type,
            port=config.cache_port,
            retain=config.retain_data,
            serverless=serverless,
        )

    def _iam_data_access(self) -> DataAccess:
        db, cache, config = self.iam_database, self.iam_cache, self.config
        database_environment = {
            "ASYNCZ_DATABASE_IAM_AUTH": "true",
            "ASYNCZ_DATABASE_HOST": db.host,
            "ASYNCZ_DATABASE_PORT": str(db.port),
            "ASYNCZ_DATABASE_NAME": db.database_name,
            "ASYNCZ_DATABASE_USER": db.runtime_user,
            # verify-full needs the RDS CA bundle in the function; require still encrypts.
            "ASYNCZ_DATABASE_SSLMODE": "require",
            "ASYNCZ_DB_POOL_MAX": str(config.db_pool_max),
        }
        if config.profile == "serverless":
            database_environment.update(
                {
                    # No connection held open while idle, or Aurora never pauses.
                    "ASYNCZ_DB_POOL_MIN": "0",
                    "ASYNCZ_DB_POOL_MAX_IDLE_SECONDS": "60",
                    # The first connection after a pause waits for the resume (~15 s).
                    "ASYNCZ_DB_CONNECT_TIMEOUT_SECONDS": "20",
                    "ASYNCZ_DB_QUERY_TIMEOUT_SECONDS": "25",
                }
            )
        admin = db.admin_secret
        return DataAccess(
            database_environment=database_environment,
            # The migration step alone logs in as the owner (IAM auth needs a role that
            # the owner grants rds_iam first). Its password reaches the function through a
            # CloudFormation dynamic reference, resolved at deploy: no Secrets Manager
            # endpoint, no read at run time (docs/deploy.md says what that trades).
            migration_environment={
                **database_environment,
                "ASYNCZ_DATABASE_IAM_AUTH": "false",
                "ASYNCZ_DATABASE_USER": admin.secret_value_from_json("username").unsafe_unwrap(),
                "ASYNCZ_DATABASE_PASSWORD": admin.secret_value_from_json(
                    "password"
                ).unsafe_unwrap(),
                "ASYNCZ_RUNTIME_ROLE_IAM": "true",
            },
            redis_environment={
                "ASYNCZ_REDIS_URL": cache.url,
                "ASYNCZ_REDIS_IAM_USER": cache.user_name,
                "ASYNCZ_REDIS_CACHE_NAME": cache.cache_name,
                "ASYNCZ_REDIS_SERVERLESS": "true" if cache.serverless else "false",
                # ElastiCache Serverless is a cluster: a command over several keys (the
                # workers' BZPOPMIN across queues) needs them in one hash slot. A hash tag
                # in the prefix puts every key of ours there.
                **({"ASYNCZ_REDIS_PREFIX": SERVERLESS_REDIS_PREFIX} if cache.serverless else {}),
            },
            extra={
                "ASYNCZ_GAUGES_AS_EMF": "true",
                "ASYNCZ_RECOVERY_IDLE_CHECK_SECONDS": str(config.recovery_idle_check_seconds),
            },
            database_connect=db.grant_connect,
            redis_connect=cache.grant_connect,
            network=FunctionNetwork(
                vpc=self.network.vpc,
                subnets=self.network.app_subnets,
                security_groups=[self.network.function_security_group],
            ),
        )

    def data_access(self) -> DataAccess:
        """What the service stack's functions need to reach these stores."""
        if self.config.iam_auth:
            return self._iam_data_access()
        database_environment = {
            "ASYNCZ_DATABASE_SECRET_ARN": self.database.runtime_secret.secret_arn,
            "ASYNCZ_DATABASE_HOST": self.database.proxy_endpoint,
            "ASYNCZ_DATABASE_NAME": self.database.database_name,
            "ASYNCZ_DATABASE_SSLMODE": "require",
            # RDS Proxy pins a client to one server connection once it prepares a
            # statement server-side: no pooling gain left. Plain statements behind it.
            "ASYNCZ_DB_PREPARED_STATEMENTS": "false",
            # no startup parameter through the proxy: the migration step makes the
            # statement timeout the runtime role's default instead
            "ASYNCZ_DB_STATEMENT_TIMEOUT_SECONDS": "0",
        }
        return DataAccess(
            database_environment=database_environment,
            migration_environment={
                **database_environment,
                "ASYNCZ_DB_STATEMENT_TIMEOUT_SECONDS": str(STATEMENT_TIMEOUT_SECONDS),
                "ASYNCZ_DATABASE_SECRET_ARN": self.database.admin_secret.secret_arn,
                "ASYNCZ_RUNTIME_DATABASE_SECRET_ARN": self.database.runtime_secret.secret_arn,
            },
            admin_secret=self.database.admin_secret,
            redis_environment={
                "ASYNCZ_REDIS_URL": self.cache.url,
                "ASYNCZ_REDIS_AUTH_SECRET_ARN": self.cache.auth_secret.secret_arn,
            },
            database_secret=self.database.runtime_secret,
            redis_auth_secret=self.cache.auth_secret,
            network=FunctionNetwork(
                vpc=self.network.vpc,
                subnets=self.network.app_subnets,
                security_groups=[self.network.function_security_group],
            ),
        )


def local_data_access(*, database_url: str, redis_url: str) -> DataAccess:
    """Plain URLs for a stage whose Postgres and Redis run outside AWS (LocalStack)."""
    return DataAccess(
        database_environment={"ASYNCZ_DATABASE_URL": database_url},
        redis_environment={"ASYNCZ_REDIS_URL": redis_url},
    )


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
            max_job_timeout_seconds=config.max_job_timeout_seconds,
            lease_timeout_seconds=config.lease_timeout_seconds,
            heartbeat_seconds=config.heartbeat_seconds,
            api_reserved_concurrency=config.api_reserved_concurrency,
            run_time_secrets=not config.iam_auth,
        )
        api = Api(
            self,
            "Api",
            name=name,
            handler=functions.api,
            api_key_secret=functions.api_keys_secret,
            stage_name="v1",
            throttle_rate=config.api_throttle_rate,
            throttle_burst=config.api_throttle_burst,
            quota_per_day=config.api_quota_per_day,
            execution_logging=config.api_execution_logging,
            tracing=config.tracing,
            log_retention=log_retention,
        )
        # the construct id stays "Schedules": a deployed stack keeps its rules' logical ids
        rules = MinuteRules(self, "Schedules", fleet=functions.fleet, recovery=functions.recovery)
        self.migration = Migration(
            self, "Migration", defaults=defaults, data=data, run_before=[api, rules]
        )
        monitoring = Monitoring(
            self,
            "Monitoring",
            functions={
                "api": functions.api,
                "worker": functions.worker,
                "fleet": functions.fleet,
                "recovery": functions.recovery,
                "migrate": self.migration.function,
            },
            name=name,
            namespace=defaults.metrics_namespace,
            alarm_period=Duration.seconds(config.alarm_period_seconds),
            oldest_queued_age_threshold_seconds=config.oldest_queued_age_threshold_seconds,
            alarm_email=config.alarm_email,
        )
        self.functions = functions
        self.api = api
        self.rules = rules
        self.monitoring = monitoring

        outputs = {
            "ApiUrl": api.url,
            "ApiId": api.rest_api.rest_api_id,
            "ApiKeyId": api.api_key.key_id,
            "ApiKeySecretArn": functions.api_keys_secret.secret_arn,
            "WorkerFunctionName": functions.worker.function_name,
            "FleetFunctionName": functions.fleet.function_name,
            "RecoveryFunctionName": functions.recovery.function_name,
            "ApiFunctionName": functions.api.function_name,
            "MigrateFunctionName": self.migration.function.function_name,
            "DlqAlarmName": monitoring.dlq_alarm.alarm_name,
            "OldestQueuedAlarmName": monitoring.oldest_queued_alarm.alarm_name,
            "AlertsTopicArn": monitoring.topic.topic_arn,
            "DashboardName": monitoring.dashboard.dashboard_name,
        }
        for name, value in outputs.items():
            CfnOutput(self, name, value=value)
