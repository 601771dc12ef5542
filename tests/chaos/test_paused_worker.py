"""Scenario 5: a worker frozen (SIGSTOP) past its lease, then resumed (SIGCONT).

While it is frozen, recovery takes the job back (a ``lost`` attempt) and another worker
completes it. When the frozen worker wakes up with its old lease, the fence rejects it:
the job is completed exactly once and the attempt log reads ``lost``, ``completed``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import chaos_settings, mixed_jobs, submit_jobs
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, rows, wait_terminal
from tests.support.private_servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos


def test_paused_worker_is_fenced_out_and_the_job_completes_once(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    fleet = fleet_factory(settings)
    [victim] = asyncio.run(submit_jobs(settings, [{"task": "sleep", "payload": {"seconds": 1.0}}]))
    sleeper = fleet.start(concurrency=1)
    claimed = wait_until(
        lambda: rows(
            chaos_db, "SELECT worker_id FROM jobs WHERE id=%s AND status='processing'", (victim,)
        ),
        timeout=20,
        interval=0.02,
        what="the first worker to claim the job",
    )
    os.killpg(sleeper.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        recovery = recovery_factory(settings, interval=0.5)
        ids = [victim, *asyncio.run(submit_jobs(settings, mixed_jobs(40, sleep_max=0.2)))]
        rescuer = fleet.start(concurrency=4)
        wait_terminal(chaos_db, len(ids), timeout=60, what="the rescuer to finish every job")
        assert time.monotonic() - frozen_at > settings.lease_timeout_seconds
    finally:
        os.killpg(sleeper.pid, signal.SIGCONT)
    # the sleeper wakes with a finished task and an old lease: it tries to complete (or its
    # first heartbeat finds the lease gone); give a wrong late write time to land
    time.sleep(settings.heartbeat_seconds * 2 + 1.5)
    recovery.stop()
    fleet.stop(sleeper)
    fleet.stop(rescuer)

    book = check_ledger(chaos_db, ids)
    job = book["jobs"][victim]
    assert job["status"] == "completed"
    assert list(job["outcomes"]) == ["lost", "completed"], job
    attempts = rows(
        chaos_db,
        "SELECT attempt, worker_id, outcome FROM job_attempt_history WHERE job_id=%s"
        " ORDER BY attempt",
        (victim,),
    )
    final = rows(chaos_db, "SELECT worker_id FROM jobs WHERE id=%s", (victim,))[0]
    assert attempts[0]["worker_id"] == claimed[0]["worker_id"]
    assert attempts[1]["worker_id"] != claimed[0]["worker_id"]
    assert final["worker_id"] == attempts[1]["worker_id"], "the late worker overwrote the job"
    summary = fleet.summary(sleeper)
    err = fleet.output(sleeper)[1]
    assert summary is not None, err[-2000:]
    assert summary["claimed"] == 1 and summary["completed"] == 0, summary
    if "result discarded" in err:
        path = "its completion was rejected by the fence"
    elif "lease lost" in err:
        path = "its heartbeat found the lease gone"
    else:  # see test_cancel_races: the attempt was cancelled mid-finish, silently
        path = "its finish was interrupted unrecorded"
    print(f"late worker fenced out: {path}; {book['status']} {book['outcomes']}")
