"""Delayed jobs (a retry's backoff, ``delay_seconds``, a durable sleep) that fall due while
no worker lives, over real PostgreSQL and Redis: the fleet's tick promotes them and starts a
worker; the fleet waits for a wake due within its minute; an idle worker stays for a wake
due within its idle window and still leaves when none is."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from asyncz.fleet import handler as fleet_handler
from asyncz.jobs import NewJob
from asyncz.settings import Settings
from asyncz.worker.loop import WorkerLoop
from tests.support.ledger import status_counts
from tests.support.settings import handler_env, open_service

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The fleet's settings from its environment, as in its Lambda."""
    with handler_env(settings, monkeypatch) as settings_read:
        yield settings_read


def submit(settings: Settings, delay: float, task: str = "echo") -> str:
    async def go() -> str:
        async with open_service(settings) as svc:
            job = NewJob(task=task, payload={}, delay_seconds=delay)
            return str((await svc.submit(job)).job_id)

    return asyncio.run(go())


def ready_ids(settings: Settings) -> set[str]:
    r = redis.Redis.from_url(settings.redis_url or "", decode_responses=True)
    try:
        return set(r.zrange(f"{settings.redis_prefix}:{{default}}:ready", 0, -1))
    finally:
        r.close()


def test_a_delayed_job_due_while_no_worker_lives_gets_a_worker_at_the_tick(
    fleet_env: Settings,
) -> None:
    job_id = submit(fleet_env, delay=0.2)
    assert ready_ids(fleet_env) == set()  # delayed, and no worker alive to promote it
    time.sleep(0.4)  # it falls due with nobody there
    invoked: list[set[str]] = []
    out = fleet_handler.scale(lambda: invoked.append(ready_ids(fleet_env)))
    assert out == {
        "backlog": 1, "live_workers": 0, "starting_workers": 0, "started": 1, "wakes": 0
    }  # fmt: skip
    assert invoked == [{job_id}]  # promoted before the worker was started


def test_the_fleet_waits_for_a_wake_due_within_its_minute_and_starts_a_worker(
    fleet_env: Settings,
) -> None:
    job_id = submit(fleet_env, delay=1.0)
    events: list[tuple[str, Any]] = []

    def invoke() -> None:
        events.append(("invoke", ready_ids(fleet_env)))

    out = fleet_handler.scale(invoke, time.monotonic() + 30)
    events.append(("returned", out))
    assert events == [
        ("invoke", {job_id}),  # at the wake: promoted, then a worker started
        ("returned", {"backlog": 0, "live_workers": 0, "starting_workers": 0, "started": 1,
                      "wakes": 1}),
    ]  # fmt: skip


def test_the_fleet_returns_at_once_when_no_wake_falls_due_within_its_minute(
    fleet_env: Settings,
) -> None:
    submit(fleet_env, delay=3600)
    invoked: list[int] = []
    out = fleet_handler.scale(lambda: invoked.append(1), time.monotonic() + 30)
    assert out["started"] == 0 and out["wakes"] == 0 and invoked == []
    assert status_counts(fleet_env.database_url or "") == {"queued": 1}


def worker_run(settings: Settings, delay: float, idle_exit: float) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with open_service(settings) as svc:
            await svc.submit(NewJob(task="echo", payload={}, delay_seconds=delay))
            worker = WorkerLoop(svc, remaining_seconds=lambda: 3600, idle_exit_seconds=idle_exit)
            return await worker.run()

    return asyncio.run(go())


def test_an_idle_worker_stays_for_a_wake_due_within_its_idle_window_and_runs_it(
    settings: Settings,
) -> None:
    # Nothing ready: the idle window (1 s) runs out before the job is due (1.6 s), with the
    # wake within the window: the worker stays, runs it, and leaves idle after.
    out = worker_run(settings, delay=1.6, idle_exit=1.0)
    assert (out["completed"], out["stopped_because"]) == (1, "idle")
    assert status_counts(settings.database_url or "") == {"completed": 1}


def test_an_idle_worker_with_no_wake_near_still_leaves_at_its_idle_exit(
    settings: Settings,
) -> None:
    out = worker_run(settings, delay=3600, idle_exit=0.5)
    assert (out["claimed"], out["stopped_because"]) == (0, "idle")
    assert status_counts(settings.database_url or "") == {"queued": 1}
