"""A fan-out and fan-in of 502 jobs in one batch (1 → 500 → 1), drained by four worker
processes on PostgreSQL and Redis: the last job runs exactly once, after all 500."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.jobs import Dependency, NewJob
from asyncz.settings import Settings
from tests.support.ledger import rows
from tests.support.settings import open_service
from tests.support.waiting import wait_until
from tests.support.workers import start_worker, stop_worker

pytestmark = pytest.mark.integration

WIDTH = 500


def graph() -> list[NewJob]:
    root = NewJob(task="wf_part", payload={"n": 0}, ref="root")
    parts = [
        NewJob(task="wf_part", payload={"n": i}, ref=f"p{i}", depends_on=(Dependency("root"),))
        for i in range(1, WIDTH + 1)
    ]
    merge = NewJob(
        task="wf_merge",
        payload={},
        ref="merge",
        depends_on=tuple(Dependency(f"p{i}") for i in range(1, WIDTH + 1)),
    )
    return [root, *parts, merge]


async def submit(settings: Settings) -> dict[str, Any]:
    async with open_service(settings) as svc:
        items = await svc.submit_many(graph())
        return {it.ref: (it.job_id, it.status) for it in items}


def test_one_to_five_hundred_to_one_drained_by_four_workers(settings: Settings) -> None:
    settings = settings.model_copy(update={"task_modules": "tests.support.workflow_tasks"})
    submitted = asyncio.run(submit(settings))
    assert len(submitted) == WIDTH + 2
    assert submitted["root"][1] == "queued"
    assert {s for ref, (_, s) in submitted.items() if ref != "root"} == {"waiting"}
    merge_id = submitted["merge"][0]
    workers = [start_worker(settings, idle_exit=3, concurrency=8) for _ in range(4)]
    try:
        wait_until(
            lambda: (
                rows(settings.database_url, "SELECT status FROM jobs WHERE id = %s", (merge_id,))[
                    0
                ]["status"]
                == "completed"
            ),
            timeout=180,
            interval=0.5,
            what="the fan-in job completed",
        )
    finally:
        outputs = [stop_worker(w) for w in workers]
    [merge] = rows(settings.database_url, "SELECT * FROM jobs WHERE id = %s", (merge_id,))
    assert merge["attempts"] == 1
    assert {k: v for k, v in merge["result"].items() if k != "statuses"} == {
        "parents": WIDTH,
        "completed": WIDTH,
        "sum": WIDTH * (WIDTH + 1) // 2,
        "refs": sorted(f"p{i}" for i in range(1, WIDTH + 1)),
    }
    [attempt] = rows(
        settings.database_url, "SELECT * FROM job_attempt_history WHERE job_id = %s", (merge_id,)
    )
    [last_part] = rows(
        settings.database_url,
        "SELECT max(finished_at) AS t, count(*) AS n FROM jobs"
        " WHERE task = 'wf_part' AND status = 'completed'",
    )
    assert last_part["n"] == WIDTH + 1
    assert attempt["started_at"] >= last_part["t"], "the merge started before a part ended"
    per_job = rows(
        settings.database_url,
        "SELECT job_id, count(*) AS n FROM job_attempt_history GROUP BY job_id HAVING count(*) > 1",
    )
    assert per_job == [], "a job ran twice"
    workers_seen = rows(settings.database_url, "SELECT DISTINCT worker_id FROM jobs")
    assert len(workers_seen) >= 2, outputs
