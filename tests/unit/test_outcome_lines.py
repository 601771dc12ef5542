"""One short log line per attempt's outcome, with what an operator searches for."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from asyncz.jobs import NewJob
from asyncz.tasks.registry import TaskContext
from asyncz.worker.loop import WorkerLoop
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
    lines = [line for line in capsys.readouterr().out.splitlines() if '"job ' in line]
    records = [json.loads(line) for line in lines]
    by_job = [(r["job_id"], r["attempt"], r["status"], r["level"]) for r in records]
    assert sorted(by_job) == sorted([
        (ids["ok"], 1, "completed", "INFO"),
        (ids["bad"], 1, "retrying", "INFO"),
        (ids["bad"], 2, "dead", "WARNING"),
    ])  # fmt: skip
    dead = next(r for r in records if r["status"] == "dead")
    assert dead["task"] == "boom" and dead["queue"] == "default"
    assert dead["error"] == "ValueError: no such customer" and dead["duration_ms"] >= 0
    assert "error" not in next(r for r in records if r["status"] == "completed")
    assert max(len(line) for line in lines) < 300  # no Lambda context on it
