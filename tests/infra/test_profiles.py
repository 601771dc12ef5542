"""The cost profiles: ``standard`` (the default, tested everywhere else), ``lean`` and
``serverless``. Each synthesizes offline and passes cdk-nag (the fixtures prove it: synth
raises on an unacknowledged finding) and cfn-lint; these tests pin what each contains."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from asyncz_cdk.budget import RESERVED_CONNECTIONS, check_connection_budget, max_connections
from asyncz_cdk.config import aws_stage
from asyncz_cdk.context import settings_from_context
from tests.support.cdk_cli import CDK, offline_env, stacks_in
from tests.support.synth import Synth
from tests.support.templates import (
    actions,
    asyncz_functions,
    environment,
    mentions,
    resources,
    role_of,
    statements_of_role,
)

pytestmark = pytest.mark.infra


def types(template: dict[str, Any]) -> set[str]:
    return {r["Type"] for r in template["Resources"].values()}


def endpoint_services(data: dict[str, Any]) -> list[str]:
    return [
        json.dumps(e["Properties"]["ServiceName"])
        for e in resources(data, "AWS::EC2::VPCEndpoint").values()
    ]


def test_standard_is_the_default_and_keeps_its_proxy_and_secrets(aws: Synth) -> None:
    assert aws.config.profile == "standard"
    assert "AWS::RDS::DBProxy" in types(aws.data)
    services = endpoint_services(aws.data)
    assert any(".secretsmanager" in s for s in services)
    assert any(".monitoring" in s for s in services)


def test_iam_profiles_have_no_proxy_no_secret_reads_and_only_the_lambda_endpoint(
    iam_profile: Synth,
) -> None:
    data, service = iam_profile.data, iam_profile.service
    assert "AWS::RDS::DBProxy" not in types(data)
    services = endpoint_services(data)
    assert len(services) == 1 and ".lambda" in services[0], services
    (endpoint,) = resources(data, "AWS::EC2::VPCEndpoint").values()
    assert len(endpoint["Properties"]["SubnetIds"]) == 1, "one AZ: half the endpoint bill"
    for name, (_, fn) in asyncz_functions(service).items():
        env = environment(fn)
        assert not any(k.endswith("SECRET_ARN") for k in env), (name, env)
        for st in statements_of_role(service, role_of(fn)):
            assert not any(a.startswith(("secretsmanager:", "cloudwatch:")) for a in actions(st))


def test_iam_profiles_grant_connect_as_the_runtime_role(iam_profile: Synth) -> None:
    service = iam_profile.service
    fns = asyncz_functions(service)
    for name in ("api", "worker", "recovery"):
        granted = [
            a for st in statements_of_role(service, role_of(fns[name][1])) for a in actions(st)
        ]
        assert "rds-db:connect" in granted and "elasticache:Connect" in granted, name
    fleet = [a for st in statements_of_role(service, role_of(fns["fleet"][1])) for a in actions(st)]
    assert "elasticache:Connect" in fleet and "rds-db:connect" not in fleet
    connect = next(
        st
        for st in statements_of_role(service, role_of(fns["worker"][1]))
        if "rds-db:connect" in actions(st)
    )
    assert mentions(connect["Resource"], "/asyncz_app")
    env = environment(fns["worker"][1])
    assert env["ASYNCZ_DATABASE_IAM_AUTH"] == "true"
    assert env["ASYNCZ_DATABASE_USER"] == "asyncz_app"
    assert env["ASYNCZ_DATABASE_SSLMODE"] == "require"
    assert env["ASYNCZ_REDIS_IAM_USER"] == "asyncz-app"
    assert env["ASYNCZ_REDIS_CACHE_NAME"] == "asyncz-cache"
    assert env["ASYNCZ_GAUGES_AS_EMF"] == "true"
    # The migration step logs in as the owner with a deploy-time reference, and grants
    # the runtime role rds_iam.
    migrate = environment(fns["migrate"][1])
    assert migrate["ASYNCZ_RUNTIME_ROLE_IAM"] == "true"
    assert mentions(migrate["ASYNCZ_DATABASE_PASSWORD"], "{{resolve:secretsmanager:")


def test_iam_cache_user_group_is_iam_only_with_the_default_user_off(iam_profile: Synth) -> None:
    users = [
        u["Properties"] for u in resources(iam_profile.data, "AWS::ElastiCache::User").values()
    ]
    app = next(u for u in users if u["UserName"] == "asyncz-app")
    assert app["AuthenticationMode"] == {"Type": "iam"} and app["UserId"] == "asyncz-app"
    default = next(u for u in users if u["UserName"] == "default")
    assert default["AccessString"].startswith("off")


def test_lean_has_one_small_instance_and_one_cache_node(lean: Synth) -> None:
    (db,) = resources(lean.data, "AWS::RDS::DBInstance").values()
    props = db["Properties"]
    assert props["DBInstanceClass"] == "db.t4g.micro"
    assert props["EnableIAMDatabaseAuthentication"] is True
    assert props["StorageEncrypted"] is True and props["PubliclyAccessible"] is False
    assert props["MultiAZ"] is False
    (group,) = resources(lean.data, "AWS::ElastiCache::ReplicationGroup").values()
    g = group["Properties"]
    assert g["NumCacheClusters"] == 1 and g["TransitEncryptionMode"] == "required"
    assert g["AtRestEncryptionEnabled"] is True and "AuthToken" not in g
    assert g["Engine"] == "valkey" and float(g["EngineVersion"]) >= 7
    assert "AWS::RDS::DBCluster" not in types(lean.data)
    assert "AWS::ElastiCache::ServerlessCache" not in types(lean.data)
    # Without a proxy the api's concurrency is bounded (the connection budget).
    api = asyncz_functions(lean.service)["api"][1]
    assert api["Properties"]["ReservedConcurrentExecutions"] == lean.config.api_reserved_concurrency


def test_serverless_pauses_at_zero_acu_and_uses_elasticache_serverless(serverless: Synth) -> None:
    (cluster,) = resources(serverless.data, "AWS::RDS::DBCluster").values()
    props = cluster["Properties"]
    assert props["Engine"] == "aurora-postgresql"
    assert props["ServerlessV2ScalingConfiguration"]["MinCapacity"] == 0
    assert props["ServerlessV2ScalingConfiguration"]["SecondsUntilAutoPause"] == 300
    assert props["EnableIAMDatabaseAuthentication"] is True
    assert props["StorageEncrypted"] is True
    (writer,) = resources(serverless.data, "AWS::RDS::DBInstance").values()
    assert writer["Properties"]["DBInstanceClass"] == "db.serverless"
    (cache,) = resources(serverless.data, "AWS::ElastiCache::ServerlessCache").values()
    assert cache["Properties"]["Engine"] == "valkey"
    assert "UserGroupId" in cache["Properties"]
    assert "AWS::ElastiCache::ReplicationGroup" not in types(serverless.data)
    recovery = environment(asyncz_functions(serverless.service)["recovery"][1])
    assert recovery["ASYNCZ_RECOVERY_IDLE_CHECK_SECONDS"] == "3600"
    # No pooled connection outlives a minute idle (Aurora pauses only with none open), and
    # a connection waits out a resume (under API Gateway's 29 s).
    assert recovery["ASYNCZ_DB_POOL_MIN"] == "0"
    assert float(recovery["ASYNCZ_DB_POOL_MAX_IDLE_SECONDS"]) < 300
    assert 15 < float(recovery["ASYNCZ_DB_CONNECT_TIMEOUT_SECONDS"]) < 29
    for name, (_, function) in asyncz_functions(serverless.service).items():
        env = environment(function)
        if "ASYNCZ_REDIS_URL" in env:
            assert env["ASYNCZ_REDIS_SERVERLESS"] == "true", name
            # cluster mode: every key in one hash slot, or BZMPOP over queues is CROSSSLOT
            assert env["ASYNCZ_REDIS_PREFIX"] == "{asyncz}", name


def test_the_connection_budget_holds_and_fails_synth_when_it_would_not() -> None:
    lean = check_connection_budget(aws_stage(profile="lean"))
    assert lean.total <= lean.limit - RESERVED_CONNECTIONS
    assert max_connections(aws_stage(profile="lean")) == 90  # 80 % of 1 GiB / 9531392
    with pytest.raises(ValueError, match=r"may open .* connections"):
        check_connection_budget(aws_stage(profile="lean", overrides={"fleet_max_workers": 40}))
    with pytest.raises(ValueError, match="max_connections is not known"):
        check_connection_budget(
            aws_stage(profile="lean", overrides={"db_instance_type": "x9.huge"})
        )
    with pytest.raises(ValueError, match="api_reserved_concurrency"):
        check_connection_budget(
            aws_stage(profile="serverless", overrides={"api_reserved_concurrency": None})
        )


def test_profile_comes_from_context() -> None:
    def pick(**context: str) -> str:
        app = cdk.App(context=context)
        return settings_from_context(app).profile

    assert pick() == "standard"
    assert pick(profile="lean") == "lean" and pick(profile="serverless") == "serverless"
    with pytest.raises(ValueError, match="profile"):
        pick(profile="cheap")
    with pytest.raises(ValueError, match="aws stage only"):
        pick(stage="local", profile="lean")


def test_cfn_lint_is_clean_for_the_profiles(lean: Synth, serverless: Synth) -> None:
    paths = [str(s.template_path(n)) for s in (lean, serverless) for n in s.templates]
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run(
        [str(cfn_lint), *paths, "--ignore-checks", "W3005", "--format", "parseable"],
        capture_output=True,
        text=True,
    )
    # Exit status is a bit mask: 2 = errors, 4 = warnings, 1 = crash. None of them here.
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["lean", "serverless"])
def test_npx_cdk_synth_of_the_profile_works_offline(tmp_path: Path, profile: str) -> None:
    assert CDK.exists(), "npm CLIs missing: run `npm ci` in the repo root"
    out = tmp_path / profile
    proc = subprocess.run(
        [str(CDK), "synth", "-q", "--no-notices", "-c", f"profile={profile}", "-o", str(out)],
        cwd=Path(__file__).resolve().parents[2],
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stacks_in(out) == {"asyncz-Data", "asyncz-Service"}
    data = json.loads(next(out.glob("*Data*.template.json")).read_text())
    assert "AWS::RDS::DBProxy" not in types(data)
    # What docs/deploy.md says the profile gives at the repo root: Graviton, layer included.
    service = json.loads(next(out.glob("*Service*.template.json")).read_text())
    for name, (_, fn) in asyncz_functions(service).items():
        assert fn["Properties"]["Architectures"] == ["arm64"], name
    ((_, layer),) = resources(service, "AWS::Lambda::LayerVersion").items()
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
