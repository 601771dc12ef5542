"""RDS PostgreSQL behind RDS Proxy; credentials generated into Secrets Manager."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

POSTGRES_PORT = 5432
RUNTIME_ROLE = "asyncz_app"  # asyncz.store.migrations.RUNTIME_ROLE (infra imports no code)


class Database(Construct):
    """An encrypted, private PostgreSQL instance reachable only through its proxy.

    The proxy admits only ``client_security_group`` and the instance admits only the
    proxy. ``admin_secret`` (the owner: migrations only) and ``runtime_secret`` (the
    functions' DML-only role) hold username/password/host/port/dbname (the instance's
    host; clients override it with ``proxy_endpoint``).
    """

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
        multi_az: bool,
        deletion_protection: bool,
        backup_retention_days: int,
        retain: bool,
        proxy_name: str,
        instance_identifier: str,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        major = engine_version.split(".")[0]
        engine = rds.DatabaseInstanceEngine.postgres(
            version=rds.PostgresEngineVersion.of(engine_version, major)
        )
        self.instance_security_group = ec2.SecurityGroup(
            self, "InstanceSg", vpc=vpc, description="AsyncZ PostgreSQL", allow_all_outbound=False
        )
        self.proxy_security_group = ec2.SecurityGroup(
            self, "ProxySg", vpc=vpc, description="AsyncZ RDS Proxy", allow_all_outbound=False
        )
        # proxy -> instance rules are added by add_proxy() below (adding them here too
        # would create duplicate rules, which EC2 rejects).
        self.proxy_security_group.add_ingress_rule(
            client_security_group, ec2.Port.tcp(POSTGRES_PORT), "PostgreSQL from the functions"
        )

        self.instance = rds.DatabaseInstance(
            self,
            "Instance",
            engine=engine,
            instance_type=ec2.InstanceType(instance_type),
            vpc=vpc,
            vpc_subnets=subnets,
            security_groups=[self.instance_security_group],
            credentials=rds.Credentials.from_generated_secret("asyncz_admin"),
            database_name=database_name,
            port=POSTGRES_PORT,
            allocated_storage=allocated_storage_gib,
            max_allocated_storage=allocated_storage_gib * 5,
            storage_type=rds.StorageType.GP3,
            storage_encrypted=True,
            publicly_accessible=False,
            multi_az=multi_az,
            deletion_protection=deletion_protection,
            backup_retention=Duration.days(backup_retention_days),
            auto_minor_version_upgrade=True,
            instance_identifier=instance_identifier,
            cloudwatch_logs_exports=["postgresql"],
            removal_policy=RemovalPolicy.SNAPSHOT if retain else RemovalPolicy.DESTROY,
        )
        # The exported PostgreSQL log, made here (not by RDS) so that it expires; no
        # LogRetention custom resource (a Lambda with a managed policy) needed.
        self.log_group = logs.LogGroup(
            self,
            "PostgresLog",
            log_group_name=f"/aws/rds/instance/{instance_identifier}/postgresql",
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
        )
        self.instance.node.add_dependency(self.log_group)
        secret = self.instance.secret
        assert secret is not None  # from_generated_secret always creates one
        # The owner's credentials: only the migration step reads them.
        self.admin_secret: secretsmanager.ISecret = secret
        # What the functions connect as: the DML-only role that migration 0002 creates and
        # the migration step lets log in with this secret's password.
        self.runtime_secret: secretsmanager.ISecret = rds.DatabaseSecret(
            self, "RuntimeSecret", username=RUNTIME_ROLE
        ).attach(self.instance)

        self.proxy = self.instance.add_proxy(
            "Proxy",
            db_proxy_name=proxy_name,  # physical name: unique per account and region
            secrets=[secret, self.runtime_secret],
            vpc=vpc,
            vpc_subnets=subnets,
            security_groups=[self.proxy_security_group],
            require_tls=True,
            idle_client_timeout=Duration.minutes(30),
            max_connections_percent=90,
        )
        self.proxy_endpoint: str = self.proxy.endpoint
        self.database_name = database_name
