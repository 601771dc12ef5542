"""Recovery under the serverless profile: while Redis shows nothing enqueued since a run
found Postgres idle, the per-minute run does not touch Postgres (so a paused Aurora stays
paused) and still publishes the gauges, as EMF lines (no CloudWatch endpoint)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from asyncz.jobs import NewJob
from asyncz.recovery import handler as recovery_handler
from asyncz.settings import Settings, get_settings
from tests.conftest import open_service, run, settings_env
from tests.integration.helpers import rows
from tests.support.apigw import FakeContext

pytestmark = pytest.mark.integration

DEAD_POSTGRES = "postgresql://postgres@127.0.0.1:1/unreachable"


def use(settings: Settings, monkeypatch: pytest.MonkeyPatch, **update: Any) -> Settings:
    for name, value in settings_env(settings.model_copy(update=update)).items():
        if name.startswith("ASYNCZ_"):
            monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    return get_settings()


@pytest.fixture
def serverless(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    yield use(
        settings,
        monkeypatch,
        recovery_idle_check_seconds=3600.0,
        publish_gauges=True,
        gauges_as_emf=True,
        db_connect_timeout_seconds=1.0,
        db_query_timeout_seconds=2.0,
    )
    get_settings.cache_clear()


def recover() -> dict[str, Any]:
    return dict(recovery_handler.handler({}, FakeContext(function_name="asyncz-recovery")))


def emf_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def submit(settings: Settings, **payload: Any) -> str:
    async def go() -> str:
        async with open_service(settings) as svc:
            return (await svc.submit(NewJob(task="echo", payload=payload))).job_id

    return str(run(go()))


def test_an_idle_run_skips_postgres_until_something_is_enqueued(
    serverless: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = recover()
    assert first["noted_idle"] is True and "skipped" not in first
    # Postgres is now unreachable: a run that touched it would fail.
    use(serverless, monkeypatch, database_url=DEAD_POSTGRES)
    second = recover()
    assert second["skipped"] and second["gauges"]["Degraded"] == 0.0
    lines = emf_lines(capsys.readouterr().out)
    assert len(lines) == 2, "each run publishes the gauges once"
    metrics = lines[-1]["_aws"]["CloudWatchMetrics"][0]
    assert metrics["Namespace"] == serverless.metrics_namespace
    assert metrics["Dimensions"] == [[]]
    assert {m["Name"] for m in metrics["Metrics"]} == {
        "DLQDepth",
        "QueueDepth",
        "OldestQueuedAgeSeconds",
        "Degraded",
    }
    assert lines[-1]["DLQDepth"] == 0.0

    # A job submitted (row + id in Redis) makes the next run look at Postgres again.
    use(serverless, monkeypatch)
    job = submit(serverless)
    third = recover()
    assert "skipped" not in third and third["noted_idle"] is False  # the job is queued
    rows(serverless.database_url, "UPDATE jobs SET status='dead', finished_at=now()")
    fourth = recover()
    assert fourth["noted_idle"] is True and fourth["gauges"]["DLQDepth"] == 1.0
    # Skipped runs keep publishing what the last look saw: the DLQ alarm stays loud.
    use(serverless, monkeypatch, database_url=DEAD_POSTGRES)
    fifth = recover()
    assert fifth["skipped"] and fifth["gauges"]["DLQDepth"] == 1.0
    assert job


def test_a_processing_job_is_never_noted_idle(
    serverless: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit(serverless)
    redis.Redis.from_url(serverless.redis_url or "").delete("asyncz:{default}:ready")
    rows(
        serverless.database_url,
        "UPDATE jobs SET status='processing', attempts=1, lease_token=gen_random_uuid(), "
        "worker_id='w', heartbeat_at=now(), started_at=now()",
    )
    out = recover()
    assert out["noted_idle"] is False
    assert recover().get("skipped") is None


def test_losing_redis_state_makes_recovery_look_at_postgres(
    serverless: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert recover()["noted_idle"] is True
    # A job whose Redis write failed at submit, then Redis loses everything (a flush of
    # our keys): the note is gone, so the next run finds and enqueues the job.
    rows(
        serverless.database_url,
        "INSERT INTO jobs (id, task, payload, queue, priority, status, max_retries, "
        "timeout_seconds, run_at) VALUES (gen_random_uuid(), 'echo', '{}', 'default', 0, "
        "'queued', 1, 30, now())",
    )
    client = redis.Redis.from_url(serverless.redis_url or "")
    client.delete(*client.keys("asyncz:*"))
    out = recover()
    assert "skipped" not in out and out["reenqueued"] == 1


def test_the_note_expires_after_the_check_period(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = use(settings, monkeypatch, recovery_idle_check_seconds=0.5)
    assert recover()["noted_idle"] is True
    assert recover().get("skipped")
    # A job whose Redis write failed (no enqueue): found once the note expires.
    rows(
        short.database_url,
        "INSERT INTO jobs (id, task, payload, queue, priority, status, max_retries, "
        "timeout_seconds, run_at) VALUES (gen_random_uuid(), 'echo', '{}', 'default', 0, "
        "'queued', 1, 30, now())",
    )
    time.sleep(0.6)
    out = recover()
    assert "skipped" not in out and out["reenqueued"] == 1
    get_settings.cache_clear()


def test_the_standard_profile_always_looks_at_postgres(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(settings, monkeypatch, recovery_idle_check_seconds=0.0)
    first, second = recover(), recover()
    assert "noted_idle" not in first and "skipped" not in second
    assert redis.Redis.from_url(settings.redis_url or "").get("asyncz:recovery:idle") is None
    get_settings.cache_clear()


def test_a_tracking_broker_counts_every_enqueue(redis_server_url: str, clean: None) -> None:
    from asyncz.broker.dispatch import Dispatch, epoch_ms
    from asyncz.broker.redis import RedisBroker

    async def go() -> list[int]:
        tracking = RedisBroker.from_url(redis_server_url, prefix="t", track_activity=True)
        plain = RedisBroker.from_url(redis_server_url, prefix="p")
        seen = []
        for broker in (tracking, plain):
            for _ in range(2):  # the second is the single-item fast path
                await broker.enqueue(
                    [Dispatch("00000000-0000-0000-0000-000000000001", "q", 0, epoch_ms(), True)]
                )
            seen.append(await broker.activity())
            await broker.close()
        return seen

    assert run(go()) == [2, 0]
