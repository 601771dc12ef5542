"""Scenario 3: Redis loses everything (FLUSHALL), and Redis goes away and comes back empty.

Redis only dispatches ids; Postgres holds the truth. Workers log and retry through the
outage, recovery rebuilds the ready and delayed sets from the ``queued`` rows, and every
job still ends terminal with a clean attempt log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import chaos_settings, mixed_jobs, submit_jobs
from tests.support.fleet import ApiSandbox, Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, non_terminal, wait_terminal
from tests.support.private_servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos

JOBS = 300


def queued_ids(server: RedisServer, prefix: str) -> int:
    r = server.client()
    return sum(r.zcard(k) for k in r.scan_iter(f"{prefix}:*") if k.endswith((":ready", ":delayed")))


def test_redis_flushall_mid_run_loses_no_job(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    ids = asyncio.run(submit_jobs(settings, mixed_jobs(JOBS, sleep_max=0.5)))
    fleet = fleet_factory(settings)
    for _ in range(2):
        fleet.start(concurrency=4)
    recovery = recovery_factory(settings, interval=1.0)
    wait_until(lambda: non_terminal(chaos_db) < JOBS * 0.7, timeout=60, what="a third done")
    in_redis = queued_ids(own_redis, settings.redis_prefix)
    own_redis.client().flushall()
    flushed_at = recovery.reenqueued
    wait_terminal(chaos_db, JOBS, timeout=60)
    recovery.stop()
    fleet.stop_all()

    assert in_redis > 0, "the flush hit an empty queue: the fault was not injected"
    assert recovery.reenqueued > flushed_at, "recovery re-enqueued nothing after the flush"
    assert all(p.returncode == 0 for p in fleet.procs), fleet.stderr_tail()
    book = check_ledger(chaos_db, ids)
    print(f"flushed {in_redis} ids; {book['status']} {book['outcomes']}")


def test_redis_stopped_and_restarted_mid_run(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    api = api_factory(settings)
    ids = asyncio.run(submit_jobs(settings, mixed_jobs(JOBS, sleep_max=0.5)))
    fleet = fleet_factory(settings)
    for _ in range(2):
        fleet.start(concurrency=4)
    recovery = recovery_factory(settings, interval=1.0)
    wait_until(lambda: non_terminal(chaos_db) < JOBS * 0.7, timeout=60, what="a third done")

    own_redis.stop()
    down_at = time.monotonic()
    # write before enqueue: with Redis gone the api still takes jobs (the row is the truth)
    for spec in mixed_jobs(20):
        reply = api.request("POST", "/jobs", spec, timeout=30)
        assert reply is not None, api.stderr()[-2000:]
        assert reply["status"] == 202, reply
        assert reply["seconds"] < 15, reply
        ids.append(reply["body"]["job_id"])
    health = api.request("GET", "/health", timeout=30)
    assert health is not None and health["status"] == 503, health
    assert health["body"]["dependencies"]["redis"].startswith("down"), health
    time.sleep(max(0.0, 3.0 - (time.monotonic() - down_at)))
    assert all(p.poll() is None for p in fleet.procs), "a worker died of the outage"
    own_redis.start()  # same port, empty: like a failover to a fresh node

    wait_terminal(chaos_db, len(ids), timeout=60)
    health = api.request("GET", "/health", timeout=30)
    assert health is not None and health["status"] == 200, health
    recovery.stop()
    fleet.stop_all()
    assert all(p.returncode == 0 for p in fleet.procs), fleet.stderr_tail()
    assert recovery.errors, "recovery never noticed the outage"
    err = fleet.stderr_tail(400)
    assert "unavailable" in err, "workers did not log the outage"
    book = check_ledger(chaos_db, ids)
    print(f"recovery errors={len(recovery.errors)}; {book['status']} {book['outcomes']}")
