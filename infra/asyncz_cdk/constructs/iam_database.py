"""PostgreSQL without RDS Proxy or run-time secrets: IAM auth tokens (lean and serverless).

Two shapes behind one interface: one small RDS instance (``lean``) or an Aurora Serverless v2
cluster that pauses at 0 ACU (``serverless``). The functions connect as the runtime role with
a token they sign themselves (``rds-db:connect``); only the migration step uses the owner's
generated password, which it gets at deploy time (see :mod:`asyncz_cdk.data_stack`).
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from asyncz_cdk.constructs.database import POSTGRES_PORT, RUNTIME_ROLE

ADMIN_USER = "asyncz_admin"


class IamDatabase(Construct):
    """An encrypted, private PostgreSQL reachable from ``client_security_group`` only, with
    IAM authentication on. ``serverless_acu`` (min, max) selects Aurora Serverless v2."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        client_security_group: ec2.ISecurityGroup,
        engine_version: str,
        instance_type: str,
        allocated_storage_gib: int,
        database_name: str,
        deletion_protection: bool,
        backup_retention_days: int,
        retain: bool,
        identifier: str,
        log_retention: logs.RetentionDays,
        serverless_acu: tuple[float, float] | None = None,
        pause_after_seconds: int = 300,
    ) -> None:
        super().__init__(scope, construct_id)
        major = engine_version.split(".")[0]
        self.security_group = ec2.SecurityGroup(
            self, "Sg", vpc=vpc, description="AsyncZ PostgreSQL", allow_all_outbound=False
        )
        self.security_group.add_ingress_rule(
            client_security_group, ec2.Port.tcp(POSTGRES_PORT), "PostgreSQL from the functions"
        )
        removal = RemovalPolicy.SNAPSHOT if retain else RemovalPolicy.DESTROY
        credentials = rds.Credentials.from_generated_secret(ADMIN_USER)
        log_group_name: str
        self.cluster: rds.DatabaseCluster | None = None
        self.instance: rds.DatabaseInstance | None = None
        if serverless_acu is not None:
            engine = rds.DatabaseClusterEngine.aurora_postgres(
                version=rds.AuroraPostgresEngineVersion.of(engine_version, major)
            )
            self.cluster = rds.DatabaseCluster(
                self,
                "Cluster",
                engine=engine,
                writer=rds.ClusterInstance.serverless_v2("Writer", publicly_accessible=False),
                serverless_v2_min_capacity=serverless_acu[0],
                serverless_v2_max_capacity=serverless_acu[1],
                serverless_v2_auto_pause_duration=Duration.seconds(pause_after_seconds),
                vpc=vpc,
                vpc_subnets=subnets,
                security_groups=[self.security_group],
                credentials=credentials,
                default_database_name=database_name,
                port=POSTGRES_PORT,
                storage_encrypted=True,
                iam_authentication=True,
                deletion_protection=deletion_protection,
                backup=rds.BackupProps(retention=Duration.days(backup_retention_days)),
                cluster_identifier=identifier,
                cloudwatch_logs_exports=["postgresql"],
                removal_policy=removal,
            )
            log_group_name = f"/aws/rds/cluster/{identifier}/postgresql"
            self.host: str = self.cluster.cluster_endpoint.hostname
            secret = self.cluster.secret
        else:
            self.instance = rds.DatabaseInstance(
                self,
                "Instance",
                engine=rds.DatabaseInstanceEngine.postgres(
                    version=rds.PostgresEngineVersion.of(engine_version, major)
                ),
                instance_type=ec2.InstanceType(instance_type),
                vpc=vpc,
                vpc_subnets=subnets,
                security_groups=[self.security_group],
                credentials=credentials,
                database_name=database_name,
                port=POSTGRES_PORT,
                allocated_storage=allocated_storage_gib,
                max_allocated_storage=allocated_storage_gib * 5,
                storage_type=rds.StorageType.GP3,
                storage_encrypted=True,
                publicly_accessible=False,
                multi_az=False,
                iam_authentication=True,
                deletion_protection=deletion_protection,
                backup_retention=Duration.days(backup_retention_days),
                auto_minor_version_upgrade=True,
                instance_identifier=identifier,
                cloudwatch_logs_exports=["postgresql"],
                removal_policy=removal,
            )
            log_group_name = f"/aws/rds/instance/{identifier}/postgresql"
            self.host = self.instance.db_instance_endpoint_address
            secret = self.instance.secret
        # The exported PostgreSQL log, made here (not by RDS) so that it expires.
        self.log_group = logs.LogGroup(
            self,
            "PostgresLog",
            log_group_name=log_group_name,
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
        )
        (self.cluster or self.instance).node.add_dependency(self.log_group)  # type: ignore[union-attr]
        assert secret is not None  # from_generated_secret always creates one
        # The owner's credentials: only the migration step gets them, at deploy time.
        self.admin_secret: secretsmanager.ISecret = secret
        self.database_name = database_name
        self.port = POSTGRES_PORT
        self.runtime_user = RUNTIME_ROLE

    def grant_connect(self, grantee: iam.IGrantable, user: str = RUNTIME_ROLE) -> None:
        """``rds-db:connect`` as ``user`` (the runtime role unless told otherwise)."""
        if self.cluster is not None:
            self.cluster.grant_connect(grantee, user)
        else:
            assert self.instance is not None
            self.instance.grant_connect(grantee, user)
