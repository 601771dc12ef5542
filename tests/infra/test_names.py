"""Several deployments per account and region: two names side by side share no name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

from asyncz_cdk import AsyncZ, AsyncZProps, aws_stage
from asyncz_cdk.construct import check_name
from infra.app import BUILD_DIR
from tests.support.synth import FAST_CONTEXT

pytestmark = pytest.mark.infra

# Resource properties that hold a physical name (unique per account and region, or shown
# to people as one). Not here: PolicyName (per role), DBName/DatabaseName (per instance),
# StageName (per API).
NAME_PROPERTIES = {
    "Name",  # secrets, rules, REST API, API key, usage plan (as UsagePlanName), ...
    "FunctionName",
    "TableName",
    "SecretName",
    "RuleName",
    "AlarmName",
    "DashboardName",
    "LogGroupName",
    "TopicName",
    "RoleName",
    "LayerName",
    "UsagePlanName",
    "DBInstanceIdentifier",
    "DBProxyName",
    "DBSubnetGroupName",
    "CacheClusterId",
    "ReplicationGroupId",
    "CacheSubnetGroupName",
    "GroupName",
    "QueueName",
    "BucketName",
}


def _literal(value: Any) -> str | None:
    """A name as text: a string, or a Fn::Join with its tokens marked; None for a pure
    reference (Ref/GetAtt name nothing of their own)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return str(sep).join(p if isinstance(p, str) else "<token>" for p in parts)
    return None


def explicit_names(templates: dict[str, dict[str, Any]]) -> dict[str, str]:
    """name -> where, for every stack name, explicit physical name and export name."""
    found: dict[str, str] = {}
    for stack_name, template in templates.items():
        found[stack_name] = "stack"
        for logical_id, resource in template.get("Resources", {}).items():
            for key, value in resource.get("Properties", {}).items():
                if key in NAME_PROPERTIES and (name := _literal(value)) is not None:
                    found[name] = f"{stack_name}/{logical_id}.{key}"
        for output_id, output in template.get("Outputs", {}).items():
            if (name := _literal(output.get("Export", {}).get("Name"))) is not None:
                found[name] = f"{stack_name}/Outputs.{output_id}.Export"
    return found


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("two-names")), context=dict(FAST_CONTEXT))
    for name in ("asyncz", "jobs-prod"):
        AsyncZ(app, name, AsyncZProps(name=name, settings=aws_stage(), build_dir=BUILD_DIR))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    assembly = app.synth()
    return {stack.stack_name: stack.template for stack in assembly.stacks}


def test_two_deployments_share_no_physical_name(
    side_by_side: dict[str, dict[str, Any]],
) -> None:
    assert set(side_by_side) == {
        "asyncz-Data",
        "asyncz-Service",
        "jobs-prod-Data",
        "jobs-prod-Service",
    }
    first = explicit_names({k: v for k, v in side_by_side.items() if k.startswith("asyncz-")})
    second = explicit_names({k: v for k, v in side_by_side.items() if k.startswith("jobs-")})
    # The names we set ourselves, so the walk is known to see them.
    assert {"asyncz-db", "asyncz-dlq-depth", "asyncz", "asyncz-api"} <= set(first)
    assert len(first) >= 10 and len(second) == len(first)
    assert not set(first) & set(second), {n: first[n] for n in set(first) & set(second)}
    for names, prefix in ((first, "asyncz"), (second, "jobs-prod")):
        for name, where in names.items():
            # Some names have a prefix AWS fixes (RDS log groups): ours comes right after.
            own = name.removeprefix("/aws/rds/instance/")
            assert own.startswith(prefix), f"{where}: {name!r} does not start with {prefix!r}"


def test_metrics_namespace_and_alarms_are_per_deployment(
    side_by_side: dict[str, dict[str, Any]],
) -> None:
    namespaces = {}
    for stack_name in ("asyncz-Service", "jobs-prod-Service"):
        alarms = [
            r["Properties"]
            for r in side_by_side[stack_name]["Resources"].values()
            if r["Type"] == "AWS::CloudWatch::Alarm"
        ]
        namespaces[stack_name] = {
            a["Namespace"] for a in alarms if a.get("Namespace", "").startswith("AsyncZ")
        }
        # Every alarm, ours and the per-function ones, has a name of this deployment.
        prefix = stack_name.removesuffix("-Service")
        assert all(a["AlarmName"].startswith(prefix + "-") for a in alarms), alarms
    assert namespaces == {"asyncz-Service": {"AsyncZ"}, "jobs-prod-Service": {"AsyncZ/jobs-prod"}}


@pytest.mark.parametrize("bad", ["", "Prod", "1st", "a--b", "a-", "x" * 25, "a_b"])
def test_bad_deployment_names_fail_clearly(bad: str) -> None:
    with pytest.raises(ValueError, match="deployment name"):
        check_name(bad)


def test_the_construct_refuses_to_live_in_a_stack(tmp_path: Path) -> None:
    stack = cdk.Stack(cdk.App(), "Host")
    with pytest.raises(TypeError, match="add it to the App"):
        AsyncZ(stack, "jobs", AsyncZProps(build_dir=BUILD_DIR))
