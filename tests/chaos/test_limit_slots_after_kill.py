"""A worker SIGKILLed while it holds three of a task's three slots: the slots come back when
its lease expires (nobody releases them), the held-back jobs then run, and every job ends."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.chaos import chaos_settings, submit_jobs
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, rows, wait_terminal
from tests.support.private_servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos

LEASE = 2.0


def test_a_killed_workers_slots_come_back_within_one_lease_timeout(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(
        chaos_db, own_redis.url, tmp_path, lease_timeout_seconds=LEASE,
        task_limits=json.dumps({"sleep": {"concurrency": 3}}),
    )  # fmt: skip
    ids = asyncio.run(submit_jobs(settings, [{"task": "sleep", "payload": {"seconds": 1.0}}] * 12))
    fleet = fleet_factory(settings)
    victim = fleet.start(concurrency=5)
    running = "SELECT count(*) AS n FROM jobs WHERE status = 'processing'"
    wait_until(lambda: rows(chaos_db, running)[0]["n"] == 3, timeout=30, what="3 slots held")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(10)
    [dead] = rows(chaos_db, "SELECT max(heartbeat_at) AS beat, now() AS killed_at FROM jobs "
                  "WHERE status = 'processing'")  # fmt: skip
    fleet.start(concurrency=5)
    recovery = recovery_factory(settings, interval=1.0)
    try:
        wait_terminal(chaos_db, 12, timeout=120)
    finally:
        recovery.stop()
        fleet.stop_all()
    book = check_ledger(chaos_db, ids)
    assert book["status"] == {"completed": 12}, book["status"]
    assert book["outcomes"].get("lost") == 3, book["outcomes"]
    [first] = rows(chaos_db, "SELECT min(started_at) AS at FROM job_attempt_history "
                   "WHERE started_at > %s", (dead["killed_at"],))  # fmt: skip
    lease = timedelta(seconds=LEASE)
    # The killed worker's slots were not given away early (the limit held) ...
    assert first["at"] >= dead["beat"] + lease - timedelta(seconds=0.1)
    # ... and came back with its lease, not with a later sweep: the next start followed the
    # lease's end by no more than the workers' once-a-second wake (and one more lease of
    # slack for a noisy machine).
    assert first["at"] <= dead["beat"] + 2 * lease + timedelta(seconds=1)
