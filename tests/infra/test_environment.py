"""Every function's environment satisfies the application's settings model."""

from __future__ import annotations

import pytest

from asyncz.settings import Settings
from tests.support.synth import Synth
from tests.support.templates import asyncz_functions, environment, export_target, placeholder

pytestmark = pytest.mark.infra

FUNCTIONS = ("api", "worker", "fleet", "recovery", "migrate", "events")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings is a BaseSettings: an ASYNCZ_* variable of the test run must not help.
    import os

    for key in list(os.environ):
        if key.startswith("ASYNCZ_"):
            monkeypatch.delenv(key)


def settings_from(env: dict[str, object]) -> Settings:
    values = {
        key.removeprefix("ASYNCZ_").lower(): placeholder(key, value)
        for key, value in env.items()
        if key.startswith("ASYNCZ_")
    }
    return Settings(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_environment_satisfies_settings(stage: Synth, function: str) -> None:
    _, fn = asyncz_functions(stage.service)[function]
    env = environment(fn)
    settings_from(env).require_for(function)  # type: ignore[arg-type]
    assert env["ASYNCZ_STAGE"] == stage.config.stage
    assert env["POWERTOOLS_SERVICE_NAME"] == "asyncz"
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "AsyncZ"
    assert env["ASYNCZ_METRICS_NAMESPACE"] == "AsyncZ"
    if function != "migrate":
        assert env["ASYNCZ_QUEUES"] == "default"  # the api and the workers agree


def test_only_the_migration_lacks_redis(stage: Synth) -> None:
    fns = asyncz_functions(stage.service)
    assert set(fns) == set(FUNCTIONS)
    migrate = environment(fns["migrate"][1])
    assert not {k for k in migrate if k.startswith("ASYNCZ_REDIS")}
    assert "ASYNCZ_API_KEYS_SECRET_ARN" not in migrate


def test_worker_function_name_and_fleet_limits(stage: Synth) -> None:
    fns = asyncz_functions(stage.service)
    worker_id, worker = fns["worker"]
    # recovery starts workers after it enqueued jobs; a worker knows its own name
    for name in ("fleet", "api", "recovery"):
        assert environment(fns[name][1])["ASYNCZ_WORKER_FUNCTION_NAME"] == {"Ref": worker_id}
    for name in ("worker", "migrate"):
        assert "ASYNCZ_WORKER_FUNCTION_NAME" not in environment(fns[name][1])
    fleet_env = environment(fns["fleet"][1])
    assert int(fleet_env["ASYNCZ_FLEET_MAX_WORKERS"]) == stage.config.fleet_max_workers
    assert environment(worker)["ASYNCZ_WORKER_CONCURRENCY"] == str(stage.config.worker_concurrency)
    api_env = environment(fns["api"][1])
    assert "ASYNCZ_API_KEYS_SECRET_ARN" in api_env
    assert all(
        "ASYNCZ_API_KEYS_SECRET_ARN" not in environment(f)
        for n, (_, f) in fns.items()
        if n != "api"
    )


def test_aws_stage_uses_secrets_proxy_and_tls(aws: Synth) -> None:
    fns = asyncz_functions(aws.service)
    proxies = [k for k, r in aws.data["Resources"].items() if r["Type"] == "AWS::RDS::DBProxy"]
    assert len(proxies) == 1
    for name, (_, fn) in fns.items():
        env = environment(fn)
        assert "ASYNCZ_DATABASE_URL" not in env
        if name == "fleet":  # Redis only
            assert not [k for k in env if k.startswith("ASYNCZ_DATABASE")]
            continue
        assert env["ASYNCZ_DATABASE_SSLMODE"] == "require"
        assert env["ASYNCZ_DB_PREPARED_STATEMENTS"] == "false"  # no pinning on the proxy
        assert env["ASYNCZ_DATABASE_NAME"] == aws.config.db_name
        # The database host is the proxy's endpoint, exported by the data stack.
        assert export_target(aws.data, env["ASYNCZ_DATABASE_HOST"]) == {
            "Fn::GetAtt": [proxies[0], "Endpoint"]
        }
        assert "Fn::ImportValue" in env["ASYNCZ_DATABASE_SECRET_ARN"]
        if name != "migrate":
            parts = env["ASYNCZ_REDIS_URL"]["Fn::Join"][1]
            assert parts[0] == "rediss://", "Redis must be reached over TLS"
            assert "Fn::ImportValue" in env["ASYNCZ_REDIS_AUTH_SECRET_ARN"]


def test_local_stage_uses_context_urls(local: Synth) -> None:
    for name, (_, fn) in asyncz_functions(local.service).items():
        env = environment(fn)
        if name == "fleet":
            continue
        assert env["ASYNCZ_DATABASE_URL"] == local.config.database_url
        assert "ASYNCZ_DATABASE_SECRET_ARN" not in env
        if "ASYNCZ_REDIS_URL" in env:
            assert env["ASYNCZ_REDIS_URL"] == local.config.redis_url
            assert "ASYNCZ_REDIS_AUTH_SECRET_ARN" not in env


def test_worker_and_recovery_agree_on_the_lease(stage: Synth) -> None:
    fns = asyncz_functions(stage.service)
    for name in ("worker", "recovery"):
        env = environment(fns[name][1])
        assert env["ASYNCZ_LEASE_TIMEOUT_SECONDS"] == str(stage.config.lease_timeout_seconds)
        assert env["ASYNCZ_HEARTBEAT_SECONDS"] == str(stage.config.heartbeat_seconds)
    assert (stage.config.lease_timeout_seconds, stage.config.heartbeat_seconds) == (
        (10, 2) if stage.config.kind == "local" else (60, 10)
    )


def test_a_stage_gives_its_task_limits_to_every_function_that_claims_or_reports(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from asyncz_cdk.config import local_stage
    from tests.support.synth import synthesize

    limits = '{"call_llm": {"concurrency": 3, "rate": "30/m"}}'
    synth = synthesize(
        local_stage(overrides={"task_limits": limits}), tmp_path_factory.mktemp("cdk-limits")
    )
    for name, (_, fn) in asyncz_functions(synth.service).items():
        env = environment(fn)
        if name != "migrate":
            assert env["ASYNCZ_TASK_LIMITS"] == limits, name
            settings_from(env)  # the functions accept it
    with pytest.raises(ValueError, match="task_limits"):
        local_stage(overrides={"task_limits": '["call_llm"]'})


def test_a_stage_without_task_limits_sets_none(stage: Synth) -> None:
    for _, fn in asyncz_functions(stage.service).values():
        assert "ASYNCZ_TASK_LIMITS" not in environment(fn)
