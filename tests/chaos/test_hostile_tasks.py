"""Scenario 6: tasks that hang forever, kill their process, or eat all memory.

The custom tasks live in :mod:`tests.chaos.tasks`; workers load them through
``ASYNCZ_TASK_MODULES``.
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.chaos import chaos_settings, mixed_jobs, submit_jobs
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, non_terminal, rows, wait_terminal
from tests.support.private_servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos

MEMORY_CAP = 1 << 30  # the OOM worker's address space: the machine is never at risk


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def job_status(db_url: str, job_id: str) -> str:
    return str(rows(db_url, "SELECT status FROM jobs WHERE id=%s", (job_id,))[0]["status"])


def test_hung_task_is_cut_off_at_its_timeout_and_the_worker_keeps_working(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path, lease_timeout_seconds=3.0)
    [hang] = asyncio.run(
        submit_jobs(settings, [{"task": "chaos_hang", "payload": {}, "max_retries": 0}])
    )
    ids = [hang, *asyncio.run(submit_jobs(settings, mixed_jobs(30, sleep_max=0.2)))]
    fleet = fleet_factory(settings)
    worker = fleet.start(concurrency=4)  # the only worker: it must carry on alone
    recovery = recovery_factory(settings)
    started = time.monotonic()
    wait_until(lambda: job_status(chaos_db, hang) == "dead", timeout=20, what="the hang cut off")
    cut_after = time.monotonic() - started
    later = asyncio.run(
        submit_jobs(settings, [{"task": "echo", "payload": {"n": i}} for i in range(20)])
    )
    ids += later
    wait_terminal(chaos_db, len(ids), timeout=30)
    assert worker.poll() is None, fleet.output(worker)[1][-2000:]
    recovery.stop()
    fleet.stop(worker)

    book = check_ledger(chaos_db, ids)
    assert list(book["jobs"][hang]["outcomes"]) == ["timed_out"]
    error = rows(chaos_db, "SELECT last_error FROM jobs WHERE id=%s", (hang,))[0]["last_error"]
    assert "timeout" in error.lower(), error
    assert all(book["jobs"][i]["status"] == "completed" for i in later)
    summary = fleet.summary(worker)
    assert summary is not None
    assert summary["timed_out"] == 1 and summary["hung_threads"] == 1, summary
    assert summary["stopped_because"] == "stopped", summary
    print(f"hang cut off after {cut_after:.1f} s; {book['status']} {book['outcomes']}")


def test_task_that_exits_the_process_is_recovered_and_ends_dead(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    [killer] = asyncio.run(
        submit_jobs(settings, [{"task": "chaos_exit", "payload": {}, "max_retries": 1}])
    )
    ids = [killer, *asyncio.run(submit_jobs(settings, mixed_jobs(60, sleep_max=0.5)))]
    fleet = fleet_factory(settings)
    recovery = recovery_factory(settings)
    deadline = time.monotonic() + 60
    while non_terminal(chaos_db) and time.monotonic() < deadline:
        while len(fleet.alive()) < 2:  # what the fleet controller does: replace the dead
            fleet.start(concurrency=4)
        time.sleep(0.1)
    wait_terminal(chaos_db, len(ids), timeout=1)
    recovery.stop()
    fleet.stop_all()

    book = check_ledger(chaos_db, ids)
    assert book["jobs"][killer]["status"] == "dead"
    assert list(book["jobs"][killer]["outcomes"]) == ["lost", "lost"]
    crashed = [p for p in fleet.procs if p.returncode == 3]
    assert len(crashed) == 2, [p.returncode for p in fleet.procs]
    assert all(
        book["jobs"][i]["status"] == "completed" or i == killer
        for i in ids
        if book["jobs"][i]["task"] != "fail"
    )
    print(f"{len(fleet.procs)} workers used; {book['status']} {book['outcomes']}")


def start_capped_worker(fleet: Fleet) -> subprocess.Popen[bytes]:
    return fleet.start(concurrency=4, preexec_fn=_cap_memory, env={"MALLOC_ARENA_MAX": "2"})


def attempt_ended(db_url: str, job_id: str) -> bool:
    return job_status(db_url, job_id) not in ("queued", "processing")


def _hog_then_mix(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
    timeout: float,
) -> tuple[str, list[str], Fleet, Any]:
    """A memory hog (max_retries 0) on a capped worker, then a normal mix on the same
    worker; returns once every job is terminal and the worker was checked alive."""
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path, lease_timeout_seconds=3.0)
    [hog] = asyncio.run(
        submit_jobs(settings, [{"task": "chaos_oom", "payload": {}, "max_retries": 0}])
    )
    fleet = fleet_factory(settings)
    worker = start_capped_worker(fleet)
    recovery = recovery_factory(settings)
    wait_until(lambda: attempt_ended(chaos_db, hog), timeout=30, what="the hog's attempt to end")
    # the hog's failure is on record: the same worker then runs a normal mix
    ids = [hog, *asyncio.run(submit_jobs(settings, mixed_jobs(30, sleep_max=0.2)))]
    wait_terminal(chaos_db, len(ids), timeout=timeout)
    alive = worker.poll() is None
    recovery.stop()
    fleet.stop(worker)
    assert alive, fleet.output(worker)[1][-3000:]
    return hog, ids, fleet, worker


def test_task_that_exhausts_memory_fails_and_the_worker_survives(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    hog, ids, fleet, worker = _hog_then_mix(
        chaos_db, own_redis, tmp_path, fleet_factory, recovery_factory, timeout=30
    )
    book = check_ledger(chaos_db, ids)
    assert list(book["jobs"][hog]["outcomes"]) == ["failed"], book["jobs"][hog]
    error = rows(chaos_db, "SELECT last_error FROM jobs WHERE id=%s", (hog,))[0]["last_error"]
    assert error.startswith("MemoryError"), error
    assert all(
        book["jobs"][i]["status"] == "completed"
        for i in ids
        if i != hog and book["jobs"][i]["task"] != "fail"
    )
    summary = fleet.summary(worker)
    assert summary is not None and summary["failed"] >= 1, summary
    print(f"{book['status']} {book['outcomes']}")


def test_memory_hog_gives_its_memory_back_for_the_next_attempts(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    """Was red before af986f7 (docs/testing.md, the chaos tier): the failed attempt's traceback
    kept the hog's frames in a reference cycle, so its memory stayed taken until the cyclic
    GC happened to run, and the attempts after it failed with MemoryError or "can't start
    new thread"."""
    hog, ids, _, _ = _hog_then_mix(
        chaos_db, own_redis, tmp_path, fleet_factory, recovery_factory, timeout=40
    )
    check_ledger(chaos_db, ids)
    collateral = rows(
        chaos_db,
        """SELECT j.task, a.attempt, a.error
             FROM job_attempt_history a JOIN jobs j ON j.id = a.job_id
            WHERE a.outcome = 'failed' AND j.id <> %s
              AND a.error NOT LIKE 'TaskFailedError:%%'""",
        (hog,),
    )
    assert not collateral, f"{len(collateral)} innocent attempts failed: {collateral[:5]}"
