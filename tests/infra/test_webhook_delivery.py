"""The webhooks' construct in a bare stack (the network with webhook egress, two functions):
only the deliverer gets the egress subnets and the key's decrypt, the api its encrypt, a
KMS endpoint serves the isolated api, and cdk-nag finds nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from asyncz_cdk.config import aws_stage
from asyncz_cdk.constructs.network import Network
from asyncz_cdk.constructs.webhooks import KMS_KEY_ENV, WebhookDelivery
from asyncz_cdk.nag import acknowledge
from tests.support.synth import synthesize
from tests.support.templates import actions, as_list

pytestmark = pytest.mark.infra

MANAGED = "arn:<AWS::Partition>:iam::aws:policy/service-role"


def bare_stack(*, webhook_egress: bool) -> tuple[Template, Network]:
    app = cdk.App()
    stack = cdk.Stack(app, "Bare", env=cdk.Environment(account="111111111111", region="us-east-1"))
    network = Network(
        stack, "Network", nat_gateways=0, max_azs=2,
        flow_log_retention=logs.RetentionDays.ONE_WEEK, xray_endpoint=False,
        webhook_egress=webhook_egress,
    )  # fmt: skip

    def function(name: str) -> lambda_.Function:
        fn = lambda_.Function(
            stack, name, runtime=lambda_.Runtime.PYTHON_3_12, handler="index.handler",
            code=lambda_.Code.from_inline("def handler(e, c): pass"), vpc=network.vpc,
            vpc_subnets=network.app_subnets,
            security_groups=[network.function_security_group],
        )  # fmt: skip
        assert fn.role is not None
        acknowledge(fn, "AwsSolutions-L1", "the bare stack's own runtime")
        for policy in ("AWSLambdaBasicExecutionRole", "AWSLambdaVPCAccessExecutionRole"):
            acknowledge(fn.role, f"AwsSolutions-IAM4[Policy::{MANAGED}/{policy}]",
                        "the bare stack's own functions: not the construct's")  # fmt: skip
        return fn

    api, events = function("Api"), function("Events")
    if webhook_egress:
        assert network.egress_subnets is not None
        WebhookDelivery(stack, "Webhooks", deliverer=events, registrars=[api],
                        egress_subnets=network.egress_subnets, vpc=network.vpc)  # fmt: skip
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return Template.from_stack(stack), network


def subnets_of(template: Template, logical_prefix: str) -> list[Any]:
    [fn] = [r for k, r in template.find_resources("AWS::Lambda::Function").items()
            if k.startswith(logical_prefix)]  # fmt: skip
    return list(fn["Properties"]["VpcConfig"]["SubnetIds"])


def policy_actions(template: Template, role_prefix: str) -> set[str]:
    found: set[str] = set()
    for policy in template.find_resources("AWS::IAM::Policy").values():
        roles = str(policy["Properties"]["Roles"])
        if role_prefix in roles:
            for statement in as_list(policy["Properties"]["PolicyDocument"]["Statement"]):
                found |= set(actions(statement))
    return found


def test_only_the_deliverer_gets_a_route_out_and_the_key_to_decrypt() -> None:
    template, _ = bare_stack(webhook_egress=True)
    template.resource_count_is("AWS::EC2::NatGateway", 1)
    template.resource_count_is("AWS::KMS::Key", 1)
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    events, api = subnets_of(template, "Events"), subnets_of(template, "Api")
    assert all("egress" in str(s) for s in events), events
    assert not any("egress" in str(s) for s in api), api
    assert "kms:Decrypt" in policy_actions(template, "EventsServiceRole")
    assert "kms:Decrypt" not in policy_actions(template, "ApiServiceRole")
    assert "kms:Encrypt" in policy_actions(template, "ApiServiceRole")
    for fn in template.find_resources("AWS::Lambda::Function").values():
        assert KMS_KEY_ENV in fn["Properties"]["Environment"]["Variables"]
    endpoints = template.find_resources("AWS::EC2::VPCEndpoint")
    assert any("kms" in str(e["Properties"]["ServiceName"]) for e in endpoints.values())
    # only the egress subnets route to the NAT gateway
    routes = template.find_resources("AWS::EC2::Route", {"Properties": {"NatGatewayId": {}}})
    assert routes and all("egress" in str(r["Properties"]["RouteTableId"]) for r in routes.values())


def test_without_webhooks_nothing_has_a_route_out() -> None:
    template, network = bare_stack(webhook_egress=False)
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::KMS::Key", 0)
    assert network.egress_subnets is None


@pytest.mark.parametrize("profile", ["standard", "lean", "serverless"])
def test_a_stage_with_webhooks_gives_the_events_function_alone_a_route_out(
    tmp_path_factory: pytest.TempPathFactory, profile: str
) -> None:
    config = aws_stage(overrides={"webhooks": True}, profile=profile)  # type: ignore[arg-type]
    stage = synthesize(config, tmp_path_factory.mktemp("wh"))
    service, data = stage.template("Service"), stage.template("Data")
    data.resource_count_is("AWS::EC2::NatGateway", 1)
    service.resource_count_is("AWS::KMS::Key", 1)
    functions = service.find_resources("AWS::Lambda::Function")
    [events] = [f for f in functions.values() if f["Properties"]["Handler"].startswith(
        "asyncz.outbox.handler")]  # fmt: skip
    assert events["Properties"]["Environment"]["Variables"]["ASYNCZ_WEBHOOKS"] == "true"
    routed = {str(f["Properties"]["Handler"]): "egress" in str(f["Properties"]["VpcConfig"])
              for f in functions.values() if "VpcConfig" in f["Properties"]}  # fmt: skip
    assert [h for h, out in routed.items() if out] == ["asyncz.outbox.handler.handler"]
    api = next(f for f in functions.values() if f["Properties"]["Handler"].startswith(
        "asyncz.api"))  # fmt: skip
    wake = api["Properties"]["Environment"]["Variables"]
    assert "ASYNCZ_EVENTS_FUNCTION_NAME" in wake  # ends wake the deliverer within a second
    assert KMS_KEY_ENV in wake
    paths = [str(stage.template_path(name)) for name in stage.templates]
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    linted = subprocess.run([str(cfn_lint), *paths, "--ignore-checks", "W3005", "--format",
                             "parseable"], capture_output=True, text=True, check=False)  # fmt: skip
    assert not [line for line in linted.stdout.splitlines() if ":E" in line], linted.stdout
