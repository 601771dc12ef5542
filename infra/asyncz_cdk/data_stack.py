"""The data stack: network, database and cache, and how the functions reach them. Stacks
compose constructs and wire them together; they hold no resources of their own."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

from asyncz_cdk.budget import check_connection_budget
from asyncz_cdk.config import StageConfig
from asyncz_cdk.constructs.cache import Cache
from asyncz_cdk.constructs.database import Database
from asyncz_cdk.constructs.function_defaults import (
    DataAccess,
    FunctionNetwork,
)
from asyncz_cdk.constructs.iam_cache import IamCache
from asyncz_cdk.constructs.iam_database import IamDatabase
from asyncz_cdk.constructs.network import Network

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
            xray_endpoint=config.xray_endpoint,
            run_time_secrets=not config.iam_auth,
            endpoints_in_one_az=config.iam_auth,
            webhook_egress=config.webhooks,
            events_endpoint=config.event_bus is not None,
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
                egress_subnets=self.network.egress_subnets,
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
                egress_subnets=self.network.egress_subnets,
            ),
        )


def local_data_access(*, database_url: str, redis_url: str) -> DataAccess:
    """Plain URLs for a stage whose Postgres and Redis run outside AWS (LocalStack)."""
    return DataAccess(
        database_environment={"ASYNCZ_DATABASE_URL": database_url},
        redis_environment={"ASYNCZ_REDIS_URL": redis_url},
    )
