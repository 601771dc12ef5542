"""Data stores of the aws stage: private, encrypted, TLS, reachable only by the functions."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

from tests.support.synth import Synth
from tests.support.templates import asyncz_functions, export_target, resources

pytestmark = pytest.mark.infra


def one(template: dict[str, Any], type_: str) -> tuple[str, dict[str, Any]]:
    found = resources(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.items()))


def subnet_tags(data: dict[str, Any], refs: list[dict[str, str]]) -> set[tuple[str, str]]:
    """(subnet-name, subnet-type) CDK tags of the subnets ``refs`` point to."""
    out = set()
    for ref in refs:
        tags = {t["Key"]: t["Value"] for t in data["Resources"][ref["Ref"]]["Properties"]["Tags"]}
        out.add((tags["aws-cdk:subnet-name"], tags["aws-cdk:subnet-type"]))
    return out


def sg_of(resource: dict[str, Any]) -> str:
    return str(resource["Fn::GetAtt"][0])


def ingress_sources(data: dict[str, Any], group_id: str) -> set[str]:
    """Logical ids of the security groups allowed into ``group_id`` (any CIDR fails)."""
    sources = set()
    group = data["Resources"][group_id]["Properties"]
    assert not group.get("SecurityGroupIngress"), "no inline (CIDR) ingress allowed"
    for rule in resources(data, "AWS::EC2::SecurityGroupIngress").values():
        props = rule["Properties"]
        if sg_of(props["GroupId"]) == group_id:
            assert "CidrIp" not in props and "CidrIpv6" not in props, props
            sources.add(sg_of(props["SourceSecurityGroupId"]))
    return sources


def test_postgres_is_private_encrypted_pinned(aws: Synth) -> None:
    _, db = one(aws.data, "AWS::RDS::DBInstance")
    props = db["Properties"]
    assert props["StorageEncrypted"] is True
    assert props["PubliclyAccessible"] is False
    assert props["Engine"] == "postgres"
    assert props["EngineVersion"] == aws.config.postgres_version
    assert props["EngineVersion"].count(".") == 1, "pin a full engine version"
    assert props["DeletionProtection"] is True
    assert props["BackupRetentionPeriod"] >= 1
    _, subnets = one(aws.data, "AWS::RDS::DBSubnetGroup")
    assert subnet_tags(aws.data, subnets["Properties"]["SubnetIds"]) == {("data", "Isolated")}
    # Credentials are generated into Secrets Manager, never written in the template.
    assert "MasterUserPassword" not in props or "resolve:secretsmanager" in str(
        props["MasterUserPassword"]
    )


def test_local_stage_can_turn_deletion_protection_off() -> None:
    from asyncz_cdk.config import local_stage

    assert local_stage().db_deletion_protection is False


def test_proxy_requires_tls_and_admits_only_functions(aws: Synth) -> None:
    proxy_id, proxy = one(aws.data, "AWS::RDS::DBProxy")
    props = proxy["Properties"]
    assert props["RequireTLS"] is True
    assert props["EngineFamily"] == "POSTGRESQL"
    functions_sg = _functions_sg(aws)
    (proxy_sg,) = [sg_of(g) for g in props["VpcSecurityGroupIds"]]
    assert ingress_sources(aws.data, proxy_sg) == {functions_sg}
    _, db = one(aws.data, "AWS::RDS::DBInstance")
    (db_sg,) = [sg_of(g) for g in db["Properties"]["VPCSecurityGroups"]]
    assert ingress_sources(aws.data, db_sg) == {proxy_sg}, "only the proxy reaches Postgres"
    assert proxy_id


def test_redis_tls_auth_encrypted_private(aws: Synth) -> None:
    _, group = one(aws.data, "AWS::ElastiCache::ReplicationGroup")
    props = group["Properties"]
    assert props["TransitEncryptionEnabled"] is True
    assert props["TransitEncryptionMode"] == "required"
    assert props["AtRestEncryptionEnabled"] is True
    token = props["AuthToken"]["Fn::Join"][1]
    assert token[0] == "{{resolve:secretsmanager:"
    assert token[1]["Ref"].startswith("CacheAuthToken")
    _, subnets = one(aws.data, "AWS::ElastiCache::SubnetGroup")
    assert subnet_tags(aws.data, subnets["Properties"]["SubnetIds"]) == {("data", "Isolated")}
    (cache_sg,) = [sg_of(g) for g in props["SecurityGroupIds"]]
    assert ingress_sources(aws.data, cache_sg) == {_functions_sg(aws)}
    if aws.config.cache_replicas:
        assert props["MultiAZEnabled"] is True
        assert props["AutomaticFailoverEnabled"] is True


def test_redis_auth_secret_is_a_plain_token(aws: Synth) -> None:
    secret = aws.data["Resources"][
        next(
            k
            for k in resources(aws.data, "AWS::SecretsManager::Secret")
            if k.startswith("CacheAuthToken")
        )
    ]
    generate = secret["Properties"]["GenerateSecretString"]
    assert "SecretStringTemplate" not in generate  # the SecretString is the token itself
    assert generate["ExcludePunctuation"] is True


def _functions_sg(aws: Synth) -> str:
    """The data-stack security group the service stack's functions run in."""
    sgs = set()
    for _, fn in asyncz_functions(aws.service).values():
        (group,) = fn["Properties"]["VpcConfig"]["SecurityGroupIds"]
        sgs.add(sg_of(export_target(aws.data, group)))
    assert len(sgs) == 1
    return sgs.pop()


def test_functions_run_in_the_app_subnets(aws: Synth) -> None:
    for _, fn in asyncz_functions(aws.service).values():
        subnets = [export_target(aws.data, s) for s in fn["Properties"]["VpcConfig"]["SubnetIds"]]
        assert subnet_tags(aws.data, subnets) == {("app", "Isolated")}


def test_no_nat_by_default_and_endpoints_for_the_aws_apis(aws: Synth) -> None:
    assert aws.config.nat_gateways == 0
    assert not resources(aws.data, "AWS::EC2::NatGateway")
    assert not resources(aws.data, "AWS::EC2::InternetGateway")
    services = set()
    for endpoint in resources(aws.data, "AWS::EC2::VPCEndpoint").values():
        services.add(endpoint["Properties"]["ServiceName"]["Fn::Join"][1][-1])
        assert endpoint["Properties"]["PrivateDnsEnabled"] is True
        (group,) = endpoint["Properties"]["SecurityGroupIds"]
        assert ingress_sources(aws.data, sg_of(group)) == {_functions_sg(aws)}
    assert services == {".secretsmanager", ".monitoring", ".lambda", ".xray"}
    aws.template("Data").resource_count_is("AWS::EC2::FlowLog", 1)
    aws.template("Data").has_resource_properties(
        "AWS::EC2::VPC", {"CidrBlock": Match.any_value(), "EnableDnsSupport": True}
    )


def test_nat_gateways_are_a_setting(tmp_path_factory: pytest.TempPathFactory) -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from asyncz_cdk.config import aws_stage
    from asyncz_cdk.data_stack import DataStack

    app = cdk.App(context={"aws:cdk:bundling-stacks": []})
    config = aws_stage(overrides={"nat_gateways": 1, "tracing": False})
    template = Template.from_stack(DataStack(app, "Nat", name="nat", config=config))
    template.resource_count_is("AWS::EC2::NatGateway", 1)
    template.resource_count_is("AWS::EC2::VPCEndpoint", 3)  # no X-Ray endpoint without tracing
    tags = [
        {t["Key"]: t["Value"] for t in s["Properties"]["Tags"]}
        for s in template.find_resources("AWS::EC2::Subnet").values()
    ]
    app_types = {t["aws-cdk:subnet-type"] for t in tags if t["aws-cdk:subnet-name"] == "app"}
    data_types = {t["aws-cdk:subnet-type"] for t in tags if t["aws-cdk:subnet-name"] == "data"}
    assert app_types == {"Private"} and data_types == {"Isolated"}
