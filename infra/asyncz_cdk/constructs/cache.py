"""ElastiCache (Valkey/Redis) replication group: TLS in transit, encrypted at rest, AUTH."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, SecretValue
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct


class Cache(Construct):
    """The dispatch store. Holds only job ids, so it can be rebuilt from Postgres.

    ``auth_secret`` is a plain-string secret with the AUTH token; ``url`` is the
    ``rediss://`` URL of the primary endpoint (without credentials).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        client_security_group: ec2.ISecurityGroup,
        engine: str,
        engine_version: str,
        node_type: str,
        replicas: int,
        port: int,
        retain: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        # ElastiCache AUTH tokens: 16-128 printable characters without @ " / and spaces.
        self.auth_secret: secretsmanager.ISecret = secretsmanager.Secret(
            self,
            "AuthToken",
            description="AsyncZ Redis AUTH token",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True, include_space=False
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.security_group = ec2.SecurityGroup(
            self, "Sg", vpc=vpc, description="AsyncZ Redis", allow_all_outbound=False
        )
        self.security_group.add_ingress_rule(
            client_security_group, ec2.Port.tcp(port), "Redis from the functions"
        )
        subnet_group = elasticache.CfnSubnetGroup(
            self,
            "Subnets",
            description="AsyncZ Redis subnets (isolated)",
            subnet_ids=vpc.select_subnets(subnet_group_name=subnets.subnet_group_name).subnet_ids,
        )
        self.replication_group = elasticache.CfnReplicationGroup(
            self,
            "ReplicationGroup",
            replication_group_description="AsyncZ dispatch queue",
            engine=engine,
            engine_version=engine_version,
            cache_node_type=node_type,
            num_cache_clusters=1 + replicas,
            automatic_failover_enabled=replicas > 0,
            multi_az_enabled=replicas > 0,
            port=port,
            cache_subnet_group_name=subnet_group.ref,
            security_group_ids=[self.security_group.security_group_id],
            transit_encryption_enabled=True,
            transit_encryption_mode="required",
            at_rest_encryption_enabled=True,
            auth_token=SecretValue.secrets_manager(self.auth_secret.secret_arn).unsafe_unwrap(),
            auto_minor_version_upgrade=True,
            snapshot_retention_limit=1,
        )
        self.replication_group.apply_removal_policy(
            RemovalPolicy.SNAPSHOT if retain else RemovalPolicy.DESTROY
        )
        host = self.replication_group.attr_primary_end_point_address
        self.url = f"rediss://{host}:{self.replication_group.attr_primary_end_point_port}/0"
