"""Webhooks on AWS: the KMS key that encrypts their signing secrets, and the one function
that delivers them moved into subnets with a route out (docs/events.md)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

KMS_KEY_ENV = "ASYNCZ_WEBHOOK_KMS_KEY_ID"


class WebhookDelivery(Construct):
    """``registrars`` (the api) encrypt new secrets; ``deliverer`` (the events function)
    decrypts them and alone runs in ``egress_subnets``: no other function gets a route out
    (no VPC, as in the LocalStack stage: nothing to move). The key rotates yearly and is
    kept if the stack is deleted (a secret it encrypted would otherwise be lost with it)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        deliverer: lambda_.Function,
        registrars: Sequence[lambda_.Function],
        egress_subnets: ec2.SubnetSelection | None,
        vpc: ec2.IVpc | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "SecretsKey",
            description="AsyncZ: encrypts webhooks' signing secrets",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        for fn in registrars:
            self.key.grant(fn, "kms:Encrypt")  # no more: grant_encrypt adds ReEncrypt*, ...
            fn.add_environment(KMS_KEY_ENV, self.key.key_arn)
        self.key.grant_decrypt(deliverer)
        deliverer.add_environment(KMS_KEY_ENV, self.key.key_arn)
        if egress_subnets is None or vpc is None:
            return
        # a function's subnets are fixed where it is made (the shared defaults): the
        # deliverer's are replaced here, so the one place that grants egress is this one
        group = egress_subnets.subnet_group_name
        subnet_ids = vpc.select_subnets(subnet_group_name=group).subnet_ids
        function = deliverer.node.default_child
        assert isinstance(function, lambda_.CfnFunction)
        function.add_property_override("VpcConfig.SubnetIds", subnet_ids)  # cross-stack refs
