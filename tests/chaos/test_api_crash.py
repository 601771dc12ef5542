"""Scenario 2: the api process dies between the Postgres commit and the Redis write.

Each api sandbox runs with ``ASYNCZ_CRASH_AT=submit.after_commit`` and dies (exit 137,
no reply) on its first submit. The row is durable but Redis never heard of it, so no
worker can see it until recovery re-enqueues it; then it runs like any other job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import chaos_settings, mixed_jobs
from tests.support.fleet import ApiSandbox, Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, rows, wait_terminal
from tests.support.private_servers import RedisServer

pytestmark = pytest.mark.chaos


def redis_ids(server: RedisServer, prefix: str) -> int:
    r = server.client()
    return sum(
        r.zcard(k)
        for k in r.scan_iter(f"{prefix}:*")
        if r.type(k) == "zset" and not k.endswith(":workers")
    )


def test_api_killed_between_commit_and_enqueue_the_job_still_completes(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    mix = [mixed_jobs(20)[i] for i in (0, 12, 16, 17, 19)]  # echo, sleep, 2 flaky, fail
    doomed = [api_factory(settings, ASYNCZ_CRASH_AT="submit.after_commit") for _ in mix]
    for box, spec in zip(doomed, mix, strict=True):
        reply = box.request("POST", "/jobs", spec, timeout=30)
        assert reply is None, f"the sandbox answered instead of crashing: {reply}"
    for box in doomed:
        assert box.proc.wait(10) == 137, box.stderr()[-2000:]

    orphans = rows(chaos_db, "SELECT id::text AS id, task, status FROM jobs")
    assert sorted(r["task"] for r in orphans) == sorted(s["task"] for s in mix)
    assert all(r["status"] == "queued" for r in orphans)
    assert redis_ids(own_redis, settings.redis_prefix) == 0, "the crash came too late"

    # a healthy sandbox keeps serving beside them
    healthy = api_factory(settings)
    served = []
    for spec in mixed_jobs(20):
        reply = healthy.request("POST", "/jobs", spec, timeout=30)
        assert reply is not None and reply["status"] == 202, reply
        served.append(reply["body"]["job_id"])

    fleet = fleet_factory(settings)
    fleet.start(concurrency=4)
    # without recovery the orphans are invisible to workers; the served jobs are not
    wait_terminal_served = time.monotonic() + 30
    while time.monotonic() < wait_terminal_served:
        left = rows(
            chaos_db,
            "SELECT count(*) AS n FROM jobs WHERE id = ANY(%s::uuid[]) AND status IN "
            "('queued', 'processing')",
            (served,),
        )[0]["n"]
        if not left:
            break
        time.sleep(0.2)
    still = rows(
        chaos_db,
        "SELECT count(*) AS n FROM jobs WHERE id = ANY(%s::uuid[]) AND status = 'queued'",
        ([r["id"] for r in orphans],),
    )[0]["n"]
    assert still == len(orphans), "an orphan ran before recovery: was it enqueued after all?"

    recovery = recovery_factory(settings, interval=1.0)
    ids = [r["id"] for r in orphans] + served
    wait_terminal(chaos_db, len(ids), timeout=30)
    recovery.stop()
    fleet.stop_all()
    book = check_ledger(chaos_db, ids)
    assert recovery.reenqueued >= len(orphans)
    for orphan in orphans:
        job = book["jobs"][orphan["id"]]
        assert job["status"] == ("dead" if job["task"] == "fail" else "completed"), job
    print(f"{book['status']} {book['outcomes']}")
