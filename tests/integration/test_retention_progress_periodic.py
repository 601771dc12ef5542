"""Over real PostgreSQL and Redis: retention in the recovery sweep, progress
reports from a running task, and periodic jobs (one job per slot, GET /schedules)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asyncz.api import handler as api_handler
from asyncz.connections import hash_api_key
from asyncz.jobs import NewJob
from asyncz.recovery import handler as recovery_handler
from asyncz.service import JobService
from asyncz.settings import Settings, get_settings
from asyncz.tasks import builtin
from asyncz.tasks.registry import REGISTRY, TaskContext, TaskRegistry, task
from asyncz.worker.loop import WorkerLoop
from tests.support.apigw import FakeContext, call, drop_sandbox
from tests.support.ledger import rows
from tests.support.settings import open_service, settings_env
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

KEY = "test-key-" + "p" * 24
half_reported = threading.Event()
release = threading.Event()


@task("progress_half")
def progress_half(payload: dict[str, Any], ctx: TaskContext) -> str:
    ctx.progress(0.5, "half")
    half_reported.set()
    release.wait(20)
    return "done"


@pytest.fixture
def env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The settings as the handlers read them (ASYNCZ_* variables), with retention at 1 s."""
    configured = settings.model_copy(
        update={
            "retain_finished_seconds": 1,
            "api_key_hashes": hash_api_key(KEY),
            "wake_worker": False,
        }
    )
    for name, value in settings_env(configured).items():
        if name.startswith("ASYNCZ_"):
            monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    drop_sandbox()
    yield get_settings()
    drop_sandbox()
    get_settings.cache_clear()


def api(method: str, target: str, **kw: Any) -> Any:
    return call(api_handler.handler, method, target, api_key=KEY, **kw)


# --- retention ----------------------------------------------------------------------------


def test_the_recovery_sweep_prunes_finished_jobs_and_leaves_live_ones(env: Settings) -> None:
    async def prepare() -> tuple[str, str, str]:
        async with open_service(env) as svc:
            done = (await svc.submit(NewJob(task="echo", payload={}))).job_id
            [lease] = await svc.claim_next("w", env.queue_list, 1, 2.0, 3600)
            assert await svc.complete(lease, {"ok": True})
            running = (await svc.submit(NewJob(task="echo", payload={}))).job_id
            [held] = await svc.claim_next("w", env.queue_list, 1, 2.0, 3600)
            assert held.job_id == running
            queued = (await svc.submit(NewJob(task="echo", payload={}))).job_id
            return done, running, queued

    done, running, queued = asyncio.run(prepare())
    # finished two seconds ago (the server's clock decides, so move the row, not time)
    rows(env.database_url, "UPDATE jobs SET finished_at = now() - interval '2 s' WHERE id = %s",
         (done,))  # fmt: skip
    rows(env.database_url, "UPDATE jobs SET created_at = now() - interval '1 day'")
    out = recovery_handler.handler({}, FakeContext(function_name="asyncz-recovery"))
    assert out["pruned"] == 1
    assert rows(env.database_url, "SELECT id FROM jobs WHERE id = %s", (done,)) == []
    assert (
        rows(env.database_url, "SELECT * FROM job_attempt_history WHERE job_id = %s", (done,)) == []
    )
    left = {str(r["id"]): r["status"] for r in rows(env.database_url, "SELECT * FROM jobs")}
    assert left == {running: "processing", queued: "queued"}

    async def running_attempts() -> list[Any]:
        async with open_service(env) as svc:
            return await svc.attempts(running)

    [attempt] = asyncio.run(running_attempts())  # the running one's, still shown
    assert (attempt.attempt, attempt.outcome, attempt.worker_id) == (1, None, "w")


def test_retention_zero_keeps_forever(settings: Settings) -> None:
    keep = settings.model_copy(update={"retain_finished_seconds": 0, "retain_dead_seconds": 0})

    async def go() -> int:
        async with open_service(keep) as svc:
            await svc.submit(NewJob(task="echo", payload={}))
            [lease] = await svc.claim_next("w", keep.queue_list, 1, 2.0, 3600)
            assert await svc.complete(lease, None)
            rows(keep.database_url, "UPDATE jobs SET finished_at = now() - interval '400 days'")
            return await svc.prune()

    assert asyncio.run(go()) == 0
    assert len(rows(settings.database_url, "SELECT id FROM jobs")) == 1


# --- progress -------------------------------------------------------------------------------


def test_progress_shows_in_get_job_while_it_runs_and_after(env: Settings) -> None:
    half_reported.clear()
    release.clear()
    r = api("POST", "/jobs", body={"task": "progress_half", "payload": {}})
    assert r.status == 202
    job_id = r.json()["job_id"]
    box: dict[str, Any] = {}
    ready = threading.Event()

    async def work() -> None:
        async with open_service(env) as svc:
            box["stop"], box["loop"] = asyncio.Event(), asyncio.get_running_loop()
            ready.set()
            await WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=box["stop"]).run()

    thread = threading.Thread(target=lambda: asyncio.run(work()), daemon=True)
    thread.start()
    try:
        assert ready.wait(10) and half_reported.wait(20)

        def shown() -> dict[str, Any] | None:
            body = api("GET", f"/jobs/{job_id}").json()
            return body if body["progress"] is not None else None

        body = wait_until(shown, timeout=10, what="the progress report")
        assert body["status"] == "processing"
        assert (body["progress"], body["progress_message"]) == (0.5, "half")
        release.set()
        wait_until(
            lambda: api("GET", f"/jobs/{job_id}").json()["status"] == "completed",
            timeout=20,
            what="the job to complete",
        )
        after = api("GET", f"/jobs/{job_id}").json()
        assert (after["progress"], after["progress_message"]) == (0.5, "half")
    finally:
        release.set()
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)


# --- periodic jobs --------------------------------------------------------------------------


def every_minute_registry() -> TaskRegistry:
    reg = TaskRegistry()
    builtin.register(reg)
    task("minutely", schedule="* * * * *", registry=reg)(lambda payload: payload)
    task("hourly_paris", schedule="0 * * * *", timezone="Europe/Paris", registry=reg)(
        lambda payload: payload
    )
    return reg


def test_two_schedulers_racing_for_a_slot_enqueue_one_job(settings: Settings) -> None:
    t0 = datetime(2026, 12, 4, 10, 0, 30, tzinfo=UTC)

    async def go() -> list[list[str]]:
        async with open_service(settings) as one, open_service(settings) as other:
            reg = every_minute_registry()
            a, b = (JobService(s.store, s.broker, reg, settings) for s in (one, other))
            assert await a.run_periodic(t0) == []  # first sight: from the next slot on
            runs: list[list[str]] = []
            for minute in (1, 2, 5):  # minute 5: slots 3 and 4 were missed
                now = t0 + timedelta(minutes=minute)
                racing = await asyncio.gather(a.run_periodic(now), b.run_periodic(now))
                runs.append([i for ids in racing for i in ids])
            again = await a.run_periodic(t0 + timedelta(minutes=5, seconds=20))  # a retry
            assert again == []
            return runs

    runs = asyncio.run(go())
    assert [len(r) for r in runs] == [1, 1, 1]  # one job per slot; one catch-up run
    jobs = rows(
        settings.database_url,
        "SELECT j.id, j.payload, r.slot FROM jobs j JOIN periodic_runs r ON r.job_id = j.id "
        "ORDER BY r.slot",
    )
    assert [str(j["id"]) for j in jobs] == [ids[0] for ids in runs]
    assert [j["slot"] for j in jobs] == [
        datetime(2026, 12, 4, 10, m, tzinfo=UTC) for m in (1, 2, 5)
    ]
    assert jobs[0]["payload"] == {"scheduled_for": "2026-12-04T10:01:00+00:00"}
    ready = rows(settings.database_url, "SELECT count(*) AS n FROM jobs WHERE status='queued'")
    assert ready == [{"n": 3}]


def test_get_schedules_lists_each_with_its_last_and_next_run(env: Settings) -> None:
    reg = every_minute_registry()
    added = [spec for spec in reg.scheduled() if spec.name not in REGISTRY]
    for spec in added:
        REGISTRY.register(spec.name, spec.fn, schedule=spec.schedule)
    try:
        out = recovery_handler.handler({}, FakeContext(function_name="asyncz-recovery"))
        assert out["periodic"] == 0  # first sight
        rows(env.database_url, "UPDATE periodic_runs SET slot = slot - interval '1 hour'")
        out = recovery_handler.handler({}, FakeContext(function_name="asyncz-recovery"))
        assert out["periodic"] == 2
        r = api("GET", "/schedules")
        assert r.status == 200
        items = {s["task"]: s for s in r.json()["items"]}
        minutely = items["minutely"]
        assert minutely["schedule"] == "* * * * *" and minutely["timezone"] == "UTC"
        assert minutely["last_run"] is not None and minutely["last_job_id"]
        last = datetime.fromisoformat(minutely["last_run"])
        nxt = datetime.fromisoformat(minutely["next_run"])
        assert nxt - last == timedelta(minutes=1)
        paris = items["hourly_paris"]
        assert paris["timezone"] == "Europe/Paris"
        assert datetime.fromisoformat(paris["next_run"]).minute == 0
        job = api("GET", f"/jobs/{minutely['last_job_id']}").json()
        assert job["task"] == "minutely"
    finally:
        for spec in added:
            REGISTRY._tasks.pop(spec.name, None)
