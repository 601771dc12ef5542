"""The worker, recovery, fleet and migrate Lambda handlers over real Postgres and Redis;
AWS APIs (Lambda invoke, CloudWatch) served by moto."""

from __future__ import annotations

import asyncio
import io
import json
import time
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from asyncz.errors import AsyncZError
from asyncz.fleet import handler as fleet_handler
from asyncz.fleet import invoke as fleet_invoke
from asyncz.jobs import NewJob
from asyncz.recovery import handler as recovery_handler
from asyncz.settings import Settings, get_settings
from asyncz.worker import handler as worker_handler
from tests.support.apigw import FakeContext
from tests.support.ledger import rows, status_counts
from tests.support.settings import open_service, settings_env

pytestmark = pytest.mark.integration


@pytest.fixture
def aws_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    for name, value in settings_env(
        settings.model_copy(
            update={
                "fleet_jobs_per_worker": 100,
                "fleet_max_workers": 5,
                "publish_gauges": True,
                "worker_idle_exit_seconds": 1.0,
            }
        )
    ).items():
        if name.startswith("ASYNCZ_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    get_settings.cache_clear()
    fleet_invoke._client = None
    with mock_aws(config={"lambda": {"use_docker": False}}):
        yield get_settings()
    fleet_invoke._client = None
    get_settings.cache_clear()


def submit(settings: Settings, n: int, task: str = "echo", **payload: Any) -> list[str]:
    async def go() -> list[str]:
        async with open_service(settings) as svc:
            return [
                (await svc.submit(NewJob(task=task, payload=dict(payload)))).job_id
                for _ in range(n)
            ]

    return asyncio.run(go())


def test_fleet_async_invokes_the_shortfall_of_workers(aws_env: Settings) -> None:
    iam = boto3.client("iam")
    role = iam.create_role(RoleName="worker", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("h.py", "def handler(e, c):\n    return {}\n")
    boto3.client("lambda").create_function(
        FunctionName=aws_env.worker_function_name,
        Runtime="python3.12",
        Role=role,
        Handler="h.handler",
        Code={"ZipFile": code.getvalue()},
    )
    calls: list[dict[str, Any]] = []
    client = fleet_invoke.lambda_client()  # the sandbox's own, built as the fleet builds it
    client.meta.events.register(
        "before-call.lambda.Invoke", lambda params, **_: calls.append(params)
    )
    submit(aws_env, 250)
    out = fleet_handler.handler({}, FakeContext(function_name="asyncz-fleet"))
    assert out == {
        "backlog": 250, "live_workers": 0, "starting_workers": 0, "started": 3, "wakes": 0
    }  # fmt: skip
    assert len(calls) == 3
    assert all(c["headers"].get("X-Amz-Invocation-Type") == "Event" for c in calls)
    assert {c["url_path"].split("/")[3] for c in calls} == {aws_env.worker_function_name}


def test_worker_handler_works_until_idle_and_reports(aws_env: Settings) -> None:
    submit(aws_env, 20)
    ctx = FakeContext(function_name="asyncz-worker", timeout_s=930)  # a 15-minute Lambda
    out = worker_handler.handler({}, ctx)
    assert out["completed"] == 20 and out["stopped_because"] == "idle"
    assert status_counts(aws_env.database_url or "") == {"completed": 20}


def test_worker_handler_takes_no_job_that_would_outlive_the_lambda(aws_env: Settings) -> None:
    submit(aws_env, 1)
    ctx = FakeContext(function_name="asyncz-worker")  # 30 s left < the job's timeout
    out = worker_handler.handler({}, ctx)
    # it puts the job back; it leaves at its deadline, or idle (a shorter job might have come)
    assert out["claimed"] == 0 and out["stopped_because"] in {"deadline", "idle"}
    assert status_counts(aws_env.database_url or "") == {"queued": 1}


def test_recovery_handler_publishes_the_gauges(aws_env: Settings) -> None:
    # the minutes below are the server's at the UPDATE; the gauge reads them at the handler:
    # start early in a minute so that both fall in the same one (a loaded machine is slow)
    while rows(aws_env.database_url, "SELECT extract(second FROM now()) AS s")[0]["s"] > 30:
        time.sleep(1)
    submit(aws_env, 4)
    rows(
        aws_env.database_url,
        "UPDATE jobs SET status='dead', finished_at=now() WHERE id IN "
        "(SELECT id FROM jobs LIMIT 1)",
    )
    # the jobs submitted in the last whole minute are counted (not this minute's, nor older)
    minute = "date_trunc('minute', now())"
    for i, created in enumerate((f"{minute} - interval '30 s'", f"{minute} - interval '90 s'")):
        rows(
            aws_env.database_url,
            f"UPDATE jobs SET created_at = {created} WHERE id IN "
            f"(SELECT id FROM jobs WHERE status = 'queued' ORDER BY id OFFSET {i} LIMIT 1)",
        )
    out = recovery_handler.handler({}, FakeContext(function_name="asyncz-recovery"))
    assert out["gauges"]["DLQDepth"] == 1.0 and out["gauges"]["QueueDepth"] == 3.0
    assert out["gauges"]["JobsSubmitted"] == 1.0
    cw = boto3.client("cloudwatch")
    names = {m["MetricName"] for m in cw.list_metrics(Namespace="AsyncZ")["Metrics"]}
    assert names == {
        "DLQDepth", "QueueDepth", "OldestQueuedAgeSeconds", "JobsSubmitted", "Degraded",
        "RecoveryStepsFailed", "OutboxBacklog", "OutboxOldestAgeSeconds",
    }  # fmt: skip
    assert out["gauges"]["OutboxBacklog"] == 1.0  # the dead job's event, not published yet
    assert out["gauges"]["Degraded"] == 0.0


def _published(name: str) -> list[float]:
    cw = boto3.client("cloudwatch")
    stats = cw.get_metric_statistics(
        Namespace="AsyncZ",
        MetricName=name,
        StartTime=datetime.now(UTC) - timedelta(minutes=5),
        EndTime=datetime.now(UTC) + timedelta(minutes=5),
        Period=60,
        Statistics=["Maximum"],
    )
    return [p["Maximum"] for p in stats["Datapoints"]]


@pytest.mark.parametrize("down", ["redis", "postgres"])
def test_recovery_publishes_the_gauges_and_degraded_when_a_dependency_is_down(
    aws_env: Settings, monkeypatch: pytest.MonkeyPatch, down: str
) -> None:
    submit(aws_env, 1)
    rows(aws_env.database_url, "UPDATE jobs SET status='dead', finished_at=now()")
    if down == "redis":
        monkeypatch.setenv("ASYNCZ_REDIS_URL", "redis://127.0.0.1:1/0")
    else:
        monkeypatch.setenv("ASYNCZ_DATABASE_URL", "postgresql://postgres@127.0.0.1:1/none")
    monkeypatch.setenv("ASYNCZ_REDIS_SOCKET_TIMEOUT_SECONDS", "0.5")
    monkeypatch.setenv("ASYNCZ_DB_CONNECT_TIMEOUT_SECONDS", "1")
    monkeypatch.setenv("ASYNCZ_DB_QUERY_TIMEOUT_SECONDS", "2")
    get_settings.cache_clear()
    with pytest.raises(AsyncZError):
        recovery_handler.handler({}, FakeContext(function_name="asyncz-recovery"))
    assert _published("Degraded") == [1.0], "the degraded run published no Degraded gauge"
    if down == "redis":  # Postgres answers: the alarms still see the dead job
        assert _published("DLQDepth") == [1.0]
    else:  # nothing to read: left out, and the alarms treat missing data as breaching
        assert _published("DLQDepth") == []


def test_migrate_handler_is_idempotent(aws_env: Settings) -> None:
    from asyncz.migrate import handler as migrate_handler

    out = migrate_handler.handler({}, FakeContext(function_name="asyncz-migrate"))
    assert out == {"applied": []}  # the test database is migrated already
    assert json.dumps(out)


def test_migrate_handler_lets_the_runtime_role_log_in(
    aws_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asyncz.migrate import handler as migrate_handler

    arn = boto3.client("secretsmanager").create_secret(
        Name="asyncz-runtime",
        SecretString=json.dumps({"username": "asyncz_app", "password": "pw1"}),
    )["ARN"]
    monkeypatch.setenv("ASYNCZ_RUNTIME_DATABASE_SECRET_ARN", arn)
    get_settings.cache_clear()
    rows(aws_env.database_url, "ALTER ROLE asyncz_app NOLOGIN")
    migrate_handler.handler({}, FakeContext(function_name="asyncz-migrate"))
    [role] = rows(
        aws_env.database_url, "SELECT rolcanlogin FROM pg_roles WHERE rolname = 'asyncz_app'"
    )
    assert role["rolcanlogin"] is True
