"""Each function's role grants only what that function needs."""

from __future__ import annotations

from typing import Any

import pytest

from asyncz_cdk.constructs.function_defaults import VPC_NETWORK_INTERFACE_ACTIONS
from tests.support.synth import Synth
from tests.support.templates import (
    actions,
    as_list,
    asyncz_functions,
    environment,
    export_target,
    mentions,
    resources,
    role_of,
    statements_of_role,
)

pytestmark = pytest.mark.infra

SECRET_READ = "secretsmanager:GetSecretValue"


def secret_label(stage: Synth, resource: Any) -> str:
    """``database``, ``redis`` or ``api_keys`` for a secret ARN in a policy."""
    if isinstance(resource, dict) and "Fn::ImportValue" in resource:
        target = export_target(stage.data, resource)
        logical_id = target["Ref"]
    else:
        logical_id = resource["Ref"]
    for prefix, label in (
        ("DatabaseInstanceSecret", "database_admin"),
        ("DatabaseRuntimeSecret", "database"),
        ("CacheAuthToken", "redis"),
        ("FunctionsApiKeys", "api_keys"),
    ):
        if logical_id.startswith(prefix):
            return label
    raise AssertionError(f"unexpected secret {logical_id}")


def secret_readers(stage: Synth) -> dict[str, set[str]]:
    """Secret label -> names of the roles' functions (or role ids) that may read it."""
    template = stage.service
    function_by_role = {role_of(fn): name for name, (_, fn) in asyncz_functions(template).items()}
    readers: dict[str, set[str]] = {}
    for role_id in resources(template, "AWS::IAM::Role"):
        who = function_by_role.get(role_id, role_id)
        for statement in statements_of_role(template, role_id):
            if any(a in (SECRET_READ, "secretsmanager:*", "*") for a in actions(statement)):
                for resource in as_list(statement["Resource"]):
                    readers.setdefault(secret_label(stage, resource), set()).add(who)
    return readers


def function_statements(stage: Synth, name: str) -> list[dict[str, Any]]:
    _, fn = asyncz_functions(stage.service)[name]
    return statements_of_role(stage.service, role_of(fn))


def test_each_function_has_its_own_role(stage: Synth) -> None:
    roles = [role_of(fn) for _, fn in asyncz_functions(stage.service).values()]
    assert len(roles) == len(set(roles)) == 6


def test_secrets_readable_only_by_their_users(aws: Synth) -> None:
    assert secret_readers(aws) == {
        # the functions connect as the DML-only runtime role; the owner is the migration's
        "database": {"api", "worker", "recovery", "migrate", "events"},  # fleet: Redis only
        "database_admin": {"migrate"},
        "redis": {"api", "worker", "fleet", "recovery", "events"},
        "api_keys": {"api"},
    }


def test_local_api_key_secret_readable_only_by_api(local: Synth) -> None:
    assert secret_readers(local) == {"api_keys": {"api"}}


@pytest.mark.parametrize("name", ["migrate"])
def test_cannot_invoke_functions(stage: Synth, name: str) -> None:
    for statement in function_statements(stage, name):
        assert not [a for a in actions(statement) if a.startswith("lambda:") or a == "*"]


# workers scale out too, and recovery after it enqueued periodic or rescued jobs
@pytest.mark.parametrize("name", ["fleet", "api", "worker", "recovery"])
def test_can_invoke_only_the_worker(stage: Synth, name: str) -> None:
    worker_id, _ = asyncz_functions(stage.service)["worker"]
    invoke = [
        s
        for s in function_statements(stage, name)
        if any(a.startswith("lambda:") for a in actions(s))
    ]
    assert invoke, f"{name} must be able to invoke the worker"
    for statement in invoke:
        assert actions(statement) == ["lambda:InvokeFunction"]
        for resource in as_list(statement["Resource"]):
            assert resource == {"Fn::GetAtt": [worker_id, "Arn"]} or resource == {
                "Fn::Join": ["", [{"Fn::GetAtt": [worker_id, "Arn"]}, ":*"]]
            }


def test_only_recovery_puts_metric_data_in_its_namespace(stage: Synth) -> None:
    for name in ("api", "worker", "fleet", "recovery", "migrate"):
        puts = [
            s for s in function_statements(stage, name) if "cloudwatch:PutMetricData" in actions(s)
        ]
        if name != "recovery":
            assert not puts, name
            continue
        assert len(puts) == 1
        assert puts[0]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "AsyncZ"}}


def test_no_wildcard_actions(stage: Synth) -> None:
    for template in stage.templates.values():
        for policy in resources(template, "AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                for action in actions(statement):
                    assert action != "*" and not action.endswith(":*"), (action, statement)


def test_wildcard_resources_only_for_actions_without_resource_scoping(stage: Synth) -> None:
    unscoped = {
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "cloudwatch:PutMetricData",
        *VPC_NETWORK_INTERFACE_ACTIONS,
    }
    for name in ("api", "worker", "fleet", "recovery", "migrate"):
        for statement in function_statements(stage, name):
            if "*" in as_list(statement["Resource"]):
                assert set(actions(statement)) <= unscoped, statement


def test_tracing_grant_follows_the_setting(aws: Synth, local: Synth) -> None:
    assert mentions(function_statements(aws, "worker"), "xray:PutTraceSegments")
    assert not mentions(function_statements(local, "worker"), "xray:")


LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
SECRETS = {"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}
EXTRA = {
    "api": {"lambda:InvokeFunction"},
    "fleet": {"lambda:InvokeFunction"},
    "recovery": {"cloudwatch:PutMetricData", "lambda:InvokeFunction"},
    "worker": {"lambda:InvokeFunction"},  # starting workers for a backlog (asyncz.fleet.scale_out)
    "migrate": set(),
}


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_role_holds_only_what_the_function_needs(stage: Synth, name: str) -> None:
    _, fn = asyncz_functions(stage.service)[name]
    role = stage.service["Resources"][role_of(fn)]["Properties"]
    assert not role.get("ManagedPolicyArns"), "no AWS managed policies on function roles"
    granted = {a for s in function_statements(stage, name) for a in actions(s)}
    allowed = LOGS | EXTRA[name]
    if stage.config.tracing:
        allowed |= XRAY
    if stage.config.in_vpc:
        allowed |= set(VPC_NETWORK_INTERFACE_ACTIONS)
    if stage.config.in_vpc or name == "api":
        allowed |= SECRETS
    assert granted == allowed


def test_logs_only_to_the_functions_own_log_group(stage: Synth) -> None:
    for name, (_, fn) in asyncz_functions(stage.service).items():
        log_group = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        for statement in function_statements(stage, name):
            if any(a.startswith("logs:") for a in actions(statement)):
                assert statement["Resource"] == {"Fn::GetAtt": [log_group, "Arn"]}, name


def test_functions_use_the_runtime_role_and_only_migrate_the_owner(aws: Synth) -> None:
    fns = asyncz_functions(aws.service)
    runtime_arn = environment(fns["api"][1])["ASYNCZ_DATABASE_SECRET_ARN"]
    for name in ("worker", "recovery"):
        assert environment(fns[name][1])["ASYNCZ_DATABASE_SECRET_ARN"] == runtime_arn
    migrate = environment(fns["migrate"][1])
    assert migrate["ASYNCZ_RUNTIME_DATABASE_SECRET_ARN"] == runtime_arn
    assert secret_label(aws, migrate["ASYNCZ_DATABASE_SECRET_ARN"]) == "database_admin"
    assert secret_label(aws, runtime_arn) == "database"
    [proxy] = resources(aws.data, "AWS::RDS::DBProxy").values()
    assert len(proxy["Properties"]["Auth"]) == 2  # the owner and the runtime role
