"""Recovery under the serverless profile: while Redis shows nothing enqueued since a run
found Postgres idle, the per-minute run does not touch Postgres (so a paused Aurora stays
paused) and still publishes the gauges, as EMF lines (no CloudWatch endpoint)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from asyncz.jobs import NewJob
from asyncz.recovery import handler as recovery_handler
from asyncz.settings import Settings, get_settings
from asyncz.tasks.registry import REGISTRY
from asyncz.tasks.schedule import Schedule
from tests.support.apigw import FakeContext
from tests.support.ledger import rows
from tests.support.settings import open_service, settings_env

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

    return str(asyncio.run(go()))


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
        "JobsSubmitted",
        "Degraded",
        "RecoveryStepsFailed",
        "OutboxBacklog",
        "OutboxOldestAgeSeconds",
    }
    assert lines[-1]["DLQDepth"] == 0.0 and lines[-1]["JobsSubmitted"] == 0.0

    # A job submitted (row + id in Redis) makes the next run look at Postgres again.
    use(serverless, monkeypatch)
    job = submit(serverless)
    third = recover()
    assert "skipped" not in third and third["noted_idle"] is False  # the job is queued
    rows(serverless.database_url, "UPDATE jobs SET status='dead', finished_at=now()")
    unpublished = recover()  # its event waits for the publisher: its age must keep growing
    assert unpublished["noted_idle"] is False and unpublished["gauges"]["OutboxBacklog"] == 1.0
    rows(serverless.database_url, "DELETE FROM job_outbox")  # the publisher took it
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


def test_a_suspended_job_is_never_noted_idle(
    serverless: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit(serverless)
    redis.Redis.from_url(serverless.redis_url or "").delete("asyncz:{default}:ready")
    rows(serverless.database_url,
         "UPDATE jobs SET status='suspended', attempts=1, suspensions=1, "
         "run_at=now() + interval '1 hour'")  # fmt: skip
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
    from asyncz.broker.redis import RedisBroker
    from asyncz.port_types import Dispatch, epoch_ms

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

    assert asyncio.run(go()) == [2, 0]


@pytest.fixture
def minutely() -> Iterator[str]:
    """A task scheduled every minute, registered for this test only."""
    REGISTRY.register(
        "idle_minutely", lambda payload: payload, schedule=Schedule.parse("* * * * *")
    )
    yield "idle_minutely"
    REGISTRY._tasks.pop("idle_minutely", None)


def test_the_idle_skip_still_enqueues_every_periodic_slot(
    serverless: Settings, minutely: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle between slots (each slot's job done before the next run), a schedule every
    minute: five minutes of runs make five jobs, one per slot, and a run between two slots
    still skips Postgres."""
    t0 = datetime(2026, 12, 4, 10, 0, 20, tzinfo=UTC)
    outs = []
    for minute in range(6):
        monkeypatch.setattr(recovery_handler, "clock", lambda m=minute: t0 + timedelta(minutes=m))
        outs.append(recover())
        # a worker runs the slot's job before the next run, and the publisher its event
        rows(serverless.database_url, "UPDATE jobs SET status='completed', finished_at=now()")
        rows(serverless.database_url, "DELETE FROM job_outbox")
    assert outs[0]["noted_idle"] is True and outs[0]["periodic"] == 0  # first sight
    assert [o.get("periodic") for o in outs[1:]] == [1, 1, 1, 1, 1]
    slots = rows(
        serverless.database_url,
        "SELECT r.slot FROM periodic_runs r JOIN jobs j ON j.id = r.job_id ORDER BY r.slot",
    )
    assert [s["slot"] for s in slots] == [
        datetime(2026, 12, 4, 10, m, tzinfo=UTC) for m in range(1, 6)
    ]
    # the last slot's job is done and nothing else is due: the next run notes idle, and a
    # run later in the same minute skips Postgres
    monkeypatch.setattr(recovery_handler, "clock", lambda: t0 + timedelta(minutes=5, seconds=10))
    assert recover()["noted_idle"] is True
    monkeypatch.setattr(recovery_handler, "clock", lambda: t0 + timedelta(minutes=5, seconds=30))
    assert recover().get("skipped")
    monkeypatch.setattr(recovery_handler, "clock", lambda: t0 + timedelta(minutes=6, seconds=1))
    assert recover().get("periodic") == 1


def test_a_run_that_enqueued_a_slot_starts_workers_at_once(
    serverless: Settings, minutely: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery runs on its own minute: the slot's job must not wait for the fleet's next
    tick. After enqueueing, the run makes the scale-out decision the api makes at a submit."""
    decisions: list[int] = []

    class Recorded:
        async def __call__(self, broker: Any) -> int:
            decisions.append(1)
            return 1

    monkeypatch.setattr(recovery_handler, "lambda_scale_out", lambda settings, name: Recorded())
    t0 = datetime(2026, 12, 4, 10, 0, 20, tzinfo=UTC)
    monkeypatch.setattr(recovery_handler, "clock", lambda: t0)
    assert "started_workers" not in recover()  # first sight: nothing enqueued
    rows(serverless.database_url, "UPDATE jobs SET status='completed', finished_at=now()")
    monkeypatch.setattr(recovery_handler, "clock", lambda: t0 + timedelta(minutes=1))
    out = recover()
    assert out["periodic"] == 1 and out["started_workers"] == 1 and decisions == [1]


def test_a_schedule_deployed_since_the_note_makes_recovery_look(
    serverless: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert recover()["noted_idle"] is True
    REGISTRY.register("idle_new", lambda payload: payload, schedule=Schedule.parse("0 * * * *"))
    try:
        out = recover()
        assert "skipped" not in out and out["noted_idle"] is True  # first sight of it
        assert recover().get("skipped")
    finally:
        REGISTRY._tasks.pop("idle_new", None)
