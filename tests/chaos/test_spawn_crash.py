"""Workers that die between a durable task's spawns and its suspension: SIGKILLed after it
has spawned 200 jobs (their steps stored), or killed right after a spawned job committed and
before its step was stored. Recovery takes the job back, the next worker replays it, and
exactly 200 spawned jobs exist, not 400; the gather returns their 200 results in order."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import chaos_settings, submit_jobs
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, non_terminal, rows
from tests.support.private_servers import RedisServer

pytestmark = pytest.mark.chaos

N = 200


@pytest.mark.parametrize("crash", ["sigkill_before_suspending", "spawn.after_commit"])
def test_a_worker_killed_between_spawning_and_suspending_leaves_each_spawned_job_once(
    crash: str,
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    folder = tmp_path / "effects"
    folder.mkdir()
    if crash != "sigkill_before_suspending":
        (folder / "spawned").write_text("x\n")  # the task's own kill is spent already
    job = {"task": "chaos_fan_out_killed", "payload": {"n": N, "folder": str(folder)},
           "max_retries": 2}  # fmt: skip
    [job_id] = asyncio.run(submit_jobs(settings, [job]))
    fleet = fleet_factory(settings)
    recovery = recovery_factory(settings)
    first = {"ASYNCZ_CRASH_AT": crash} if crash != "sigkill_before_suspending" else None
    fleet.start(concurrency=4, env=first)
    deadline = time.monotonic() + 120
    try:
        while non_terminal(chaos_db) and time.monotonic() < deadline:
            while len(fleet.alive()) < 1:  # what the fleet controller does: replace the dead
                fleet.start(concurrency=4)
            time.sleep(0.1)
    finally:
        recovery.stop()
        fleet.stop_all()
    died = [p.returncode for p in fleet.procs if p.returncode not in (0, None)]
    assert died == ([-signal.SIGKILL] if first is None else [137])
    spawned = rows(chaos_db, "SELECT id::text AS id FROM jobs WHERE spawned_by = %s", (job_id,))
    assert len(spawned) == N  # not 2N: each spawn found the job it stored before the crash
    assert rows(chaos_db, "SELECT count(*) AS n FROM jobs")[0]["n"] == N + 1
    book = check_ledger(chaos_db, [job_id, *(r["id"] for r in spawned)])
    assert book["jobs"][job_id]["status"] == "completed"
    assert next(iter(book["jobs"][job_id]["outcomes"])) == "lost"
    [result] = rows(chaos_db, "SELECT result FROM jobs WHERE id = %s", (job_id,))
    assert result["result"] == list(range(N))
