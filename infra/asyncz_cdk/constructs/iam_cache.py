"""Valkey with IAM authentication (lean and serverless): no AUTH token, no secret.

The functions connect as ``user_name`` with a SigV4-presigned token they sign themselves
(``elasticache:Connect``). ElastiCache's IAM auth needs an RBAC user group whose users' id
equals their name, plus a ``default`` user, which here is switched off.
"""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_iam as iam
from constructs import Construct


class IamCache(Construct):
    """A single-node replication group (``serverless=False``) or an ElastiCache Serverless
    cache, TLS required and encrypted at rest, admitting ``client_security_group`` only.

    ``cache_name`` is what tokens are signed for, ``url`` the ``rediss://`` URL (no
    credentials), ``user_name`` who the functions connect as.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        client_security_group: ec2.ISecurityGroup,
        engine_version: str,
        node_type: str,
        port: int,
        retain: bool,
        serverless: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.cache_name = f"{name}-cache"
        self.user_name = f"{name}-app"
        self.serverless = serverless
        # The IAM user: its id must equal its name; it may run every command but the
        # dangerous ones (no FLUSHALL, CONFIG, ...): the job queue needs keys and scripts.
        self.user = elasticache.CfnUser(
            self,
            "AppUser",
            engine="valkey",
            user_id=self.user_name,
            user_name=self.user_name,
            access_string="on ~* &* +@all -@dangerous",
            authentication_mode={"Type": "iam"},
        )
        # Every user group needs a user named "default": here one that is switched off.
        default_user = elasticache.CfnUser(
            self,
            "DefaultUser",
            engine="valkey",
            user_id=f"{name}-default-off",
            user_name="default",
            access_string="off -@all",
            no_password_required=True,
        )
        self.user_group = elasticache.CfnUserGroup(
            self,
            "Users",
            engine="valkey",
            user_group_id=f"{name}-users",
            user_ids=[self.user.user_id, default_user.user_id],
        )
        self.user_group.node.add_dependency(self.user, default_user)

        self.security_group = ec2.SecurityGroup(
            self, "Sg", vpc=vpc, description="AsyncZ Valkey", allow_all_outbound=False
        )
        subnet_ids = vpc.select_subnets(subnet_group_name=subnets.subnet_group_name).subnet_ids
        removal = RemovalPolicy.SNAPSHOT if retain else RemovalPolicy.DESTROY
        if serverless:
            # ElastiCache Serverless listens on 6379 (and 6380 for reads from replicas).
            port = 6379
            cache = elasticache.CfnServerlessCache(
                self,
                "Serverless",
                serverless_cache_name=self.cache_name,
                engine="valkey",
                major_engine_version=engine_version.split(".")[0],
                description="AsyncZ dispatch queue",
                security_group_ids=[self.security_group.security_group_id],
                subnet_ids=subnet_ids,
                user_group_id=self.user_group.ref,
                snapshot_retention_limit=1,
            )
            # CloudFormation cannot snapshot a serverless cache on delete: keep it instead.
            cache.apply_removal_policy(RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY)
            host = cache.attr_endpoint_address
            self.resource_arn = (
                f"arn:{Aws.PARTITION}:elasticache:{Aws.REGION}:{Aws.ACCOUNT_ID}"
                f":serverlesscache:{self.cache_name}"
            )
        else:
            subnet_group = elasticache.CfnSubnetGroup(
                self,
                "Subnets",
                description="AsyncZ Valkey subnets (isolated)",
                subnet_ids=subnet_ids,
            )
            group = elasticache.CfnReplicationGroup(
                self,
                "ReplicationGroup",
                replication_group_id=self.cache_name,
                replication_group_description="AsyncZ dispatch queue",
                engine="valkey",
                engine_version=engine_version,
                cache_node_type=node_type,
                num_cache_clusters=1,
                automatic_failover_enabled=False,
                multi_az_enabled=False,
                port=port,
                cache_subnet_group_name=subnet_group.ref,
                security_group_ids=[self.security_group.security_group_id],
                transit_encryption_enabled=True,
                transit_encryption_mode="required",
                at_rest_encryption_enabled=True,
                user_group_ids=[self.user_group.ref],
                auto_minor_version_upgrade=True,
                snapshot_retention_limit=1,
            )
            group.apply_removal_policy(removal)
            host = group.attr_primary_end_point_address
            self.resource_arn = (
                f"arn:{Aws.PARTITION}:elasticache:{Aws.REGION}:{Aws.ACCOUNT_ID}"
                f":replicationgroup:{self.cache_name}"
            )
        self.security_group.add_ingress_rule(
            client_security_group, ec2.Port.tcp(port), "Valkey from the functions"
        )
        self.url = f"rediss://{host}:{port}/0"
        self.user_arn = (
            f"arn:{Aws.PARTITION}:elasticache:{Aws.REGION}:{Aws.ACCOUNT_ID}:user:{self.user_name}"
        )

    def grant_connect(self, grantee: iam.IGrantable) -> None:
        """``elasticache:Connect`` to this cache as the functions' user."""
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["elasticache:Connect"],
            resource_arns=[self.resource_arn, self.user_arn],
        )
