"""A worker process that dies inside a durable task's step: recovery takes the job back at
its lease's expiry, and the next worker replays the stored step instead of running it again,
runs the step that was cut short again, and finishes the job."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import chaos_settings, submit_jobs
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, non_terminal, rows
from tests.support.private_servers import RedisServer

pytestmark = pytest.mark.chaos


def test_a_worker_killed_inside_a_step_leaves_the_stored_steps_to_replay(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    folder = tmp_path / "effects"
    folder.mkdir()
    job = {"task": "chaos_durable_exit", "payload": {"folder": str(folder)}, "max_retries": 2}
    [job_id] = asyncio.run(submit_jobs(settings, [job]))
    fleet = fleet_factory(settings)
    recovery = recovery_factory(settings)
    deadline = time.monotonic() + 60
    try:
        while non_terminal(chaos_db) and time.monotonic() < deadline:
            while len(fleet.alive()) < 1:  # what the fleet controller does: replace the dead
                fleet.start(concurrency=2)
            time.sleep(0.1)
    finally:
        recovery.stop()
        fleet.stop_all()
    book = check_ledger(chaos_db, [job_id])
    assert book["jobs"][job_id]["status"] == "completed"
    assert list(book["jobs"][job_id]["outcomes"]) == ["lost", "completed"]
    assert [p.returncode for p in fleet.procs].count(3) == 1
    # "before" ran once (stored, then replayed); "crash" ran twice (cut short, not stored)
    assert {p.name: len(p.read_text().splitlines()) for p in folder.iterdir()} == {
        "before": 1, "crash": 2, "after": 1}  # fmt: skip
    [result] = rows(chaos_db, "SELECT result FROM jobs WHERE id = %s", (job_id,))
    assert result["result"] == [1, "survived", 1]
    steps = rows(chaos_db, "SELECT name, attempts, job_attempt FROM job_steps "
                           "WHERE job_id = %s ORDER BY seq", (job_id,))  # fmt: skip
    assert [(s["name"], s["attempts"], s["job_attempt"]) for s in steps] == [
        ("before", 1, 1), ("crash", 1, 2), ("after", 1, 2)]  # fmt: skip
