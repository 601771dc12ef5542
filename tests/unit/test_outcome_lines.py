"""One short log line per attempt's outcome, with what an operator searches for."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from asyncz.jobs import Lease, NewJob
from asyncz.tasks.registry import TaskContext
from asyncz.worker.loop import WorkerLoop
from asyncz.worker.outcomes import outcome_line
from tests.support.memory import service

pytestmark = pytest.mark.unit


def test_each_attempt_ends_in_one_compact_line(capsys: pytest.CaptureFixture[str]) -> None:
    svc = service(worker_poll_seconds=0.2, backoff_base_seconds=0.01, backoff_max_seconds=0.01)

    def boom(payload: dict[str, Any], ctx: TaskContext) -> None:
        raise ValueError("no such customer")

    svc.registry.register("boom", boom)

    async def go() -> dict[str, str]:
        ok = (await svc.submit(NewJob(task="echo", payload={"x": 1}))).job_id
        bad = (await svc.submit(NewJob(task="boom", payload={}, max_retries=1))).job_id
        stop = asyncio.Event()
        worker = WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=stop, concurrency=4)
        working = asyncio.create_task(worker.run())
        while {(await svc.get(i)).status.value for i in (ok, bad)} != {"completed", "dead"}:
            await asyncio.sleep(0.01)
        stop.set()
        await working
        return {"ok": ok, "bad": bad}

    ids = asyncio.run(go())
    lines = [line for line in capsys.readouterr().out.splitlines() if '"job_id"' in line]
    records = [json.loads(line) for line in lines]
    by_job = [(r["job_id"], r["attempt"], r["status"], r.get("level", "INFO")) for r in records]
    assert sorted(by_job) == sorted([
        (ids["ok"], 1, "completed", "INFO"),
        (ids["bad"], 1, "retrying", "INFO"),
        (ids["bad"], 2, "dead", "WARNING"),
    ])  # fmt: skip
    dead = next(r for r in records if r["status"] == "dead")
    assert dead["task"] == "boom" and "queue" not in dead  # the default queue goes unsaid
    assert dead["error"] == "ValueError: no such customer" and dead["ms"] >= 0
    ok_line = next(line for line in lines if '"completed"' in line)
    assert "error" not in json.loads(ok_line)
    assert len(ok_line) < 115, ok_line  # no Lambda context, no repeated status, short keys


def test_a_job_of_another_queue_names_it() -> None:
    lease = Lease(
        job_id="j1", token="t", task="report", payload={}, queue="reports", priority=0,
        attempt=2, attempt_base=0, max_retries=3, timeout_seconds=30,
    )  # fmt: skip
    record = json.loads(outcome_line(lease, "retrying", 12.34, "TimeoutError: slow"))
    assert record == {
        "job_id": "j1", "task": "report", "attempt": 2, "status": "retrying",
        "ms": 12.3, "queue": "reports", "error": "TimeoutError: slow",
    }  # fmt: skip
