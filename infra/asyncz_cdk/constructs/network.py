"""VPC: isolated subnets for the data stores, private subnets for the functions."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

APP_SUBNETS = "app"
DATA_SUBNETS = "data"
EGRESS_SUBNETS = "egress"  # webhooks on: the one function that calls out lives here


class Network(Construct):
    """A two-AZ VPC, interface endpoints for the AWS APIs the functions call, and their SG.

    With ``nat_gateways=0`` the function subnets are isolated too: the functions reach
    Secrets Manager, CloudWatch and Lambda through the endpoints only and have no
    internet egress. Any NAT gateway turns them into private subnets with egress.

    ``webhook_egress`` (with no NAT otherwise) adds a public subnet group with one NAT
    gateway and an ``egress`` group routed through it, for the function that delivers
    webhooks only (:class:`asyncz_cdk.constructs.webhooks.WebhookDelivery` moves it there);
    every other function stays isolated, and a KMS endpoint lets the api encrypt secrets.
    The new groups come after the existing ones, so existing subnets keep their CIDRs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        nat_gateways: int,
        max_azs: int,
        flow_log_retention: logs.RetentionDays,
        xray_endpoint: bool,
        run_time_secrets: bool = True,
        endpoints_in_one_az: bool = False,
        webhook_egress: bool = False,
        events_endpoint: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        own_nat = webhook_egress and not nat_gateways
        app_subnet_type = (
            ec2.SubnetType.PRIVATE_WITH_EGRESS if nat_gateways else ec2.SubnetType.PRIVATE_ISOLATED
        )
        subnets = [
            ec2.SubnetConfiguration(name=APP_SUBNETS, subnet_type=app_subnet_type, cidr_mask=22),
            ec2.SubnetConfiguration(
                name=DATA_SUBNETS, subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
            ),
        ]
        if nat_gateways:
            subnets.insert(
                0,
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                ),
            )
        if own_nat:
            subnets += [
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=26
                ),
                ec2.SubnetConfiguration(
                    name=EGRESS_SUBNETS, subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                    cidr_mask=26,
                ),
            ]  # fmt: skip
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.40.0.0/16"),
            max_azs=max_azs,
            nat_gateways=1 if own_nat else nat_gateways,
            subnet_configuration=subnets,
        )
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=flow_log_retention)
        self.vpc.add_flow_log(
            "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs)
        )

        self.app_subnets = ec2.SubnetSelection(subnet_group_name=APP_SUBNETS)
        self.data_subnets = ec2.SubnetSelection(subnet_group_name=DATA_SUBNETS)
        # where the webhook deliverer runs: the egress group, or the app subnets when they
        # have a NAT already; None: webhooks are off
        self.egress_subnets: ec2.SubnetSelection | None = None
        if webhook_egress:
            group = EGRESS_SUBNETS if own_nat else APP_SUBNETS
            self.egress_subnets = ec2.SubnetSelection(subnet_group_name=group)

        # Functions may open outbound connections (tasks calling outside APIs when a NAT
        # exists); nothing may connect *to* them.
        self.function_security_group = ec2.SecurityGroup(
            self,
            "FunctionsSg",
            vpc=self.vpc,
            description="AsyncZ Lambda functions",
            allow_all_outbound=True,
        )
        endpoint_sg = ec2.SecurityGroup(
            self,
            "EndpointsSg",
            vpc=self.vpc,
            description="AsyncZ interface endpoints: HTTPS from the functions only",
            allow_all_outbound=False,
        )
        endpoint_sg.add_ingress_rule(
            self.function_security_group, ec2.Port.tcp(443), "HTTPS from the functions"
        )
        # Lambda: the fleet and the api wake workers. Secrets Manager and CloudWatch only
        # where the functions read secrets and put gauges at run time (``standard``); the
        # IAM-auth profiles sign tokens locally and log their gauges as EMF lines.
        endpoints = [("Lambda", ec2.InterfaceVpcEndpointAwsService.LAMBDA_)]
        if run_time_secrets:
            endpoints[:0] = [
                ("SecretsManager", ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER),
                ("CloudWatch", ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING),
            ]
        # One AZ halves the endpoint bill; functions in the other AZ reach it across AZs.
        endpoint_subnets = self.app_subnets
        if endpoints_in_one_az:
            first = self.vpc.select_subnets(subnet_group_name=APP_SUBNETS).subnets[:1]
            endpoint_subnets = ec2.SubnetSelection(subnets=first)
        if own_nat:  # the api encrypts webhooks' secrets; it has no route out
            endpoints.append(("Kms", ec2.InterfaceVpcEndpointAwsService.KMS))
        if events_endpoint:
            # PutEvents of the events function (a bus configured); isolated subnets, no NAT
            endpoints.append(("Events", ec2.InterfaceVpcEndpointAwsService.EVENTBRIDGE))
        if xray_endpoint:
            # Traces must not depend on a NAT; only created when something exports to X-Ray
            # (active tracing, or the ADOT layer's collector: one endpoint serves both).
            endpoints.append(("XRay", ec2.InterfaceVpcEndpointAwsService.XRAY))
        for name, service in endpoints:
            self.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=endpoint_subnets,
                security_groups=[endpoint_sg],
                open=False,
                private_dns_enabled=True,
            )
