"""Redis flushed while limited tasks run: the slots and rate windows it held are rebuilt from
PostgreSQL (the running attempts, the attempts' start times), so the flush admits no more
than the limit allows. Judged by the attempts' start and finish times in PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.chaos import chaos_settings, submit_jobs
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, rows, wait_terminal
from tests.support.overlap import attempt_spans, most_at_once, most_starts_in
from tests.support.private_servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos

Jobs = list[dict[str, Any]]


def _started(db: str, task: str) -> int:
    found = rows(db, "SELECT count(*) AS n FROM job_attempt_history a"
                     " JOIN jobs j ON j.id = a.job_id "
                 "WHERE j.task = %s", (task,))  # fmt: skip
    return int(found[0]["n"])


@pytest.fixture
def across_flush(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> Callable[..., list[dict[str, Any]]]:
    """Run ``before`` under ``limits`` on two workers and a recovery loop; once ``starts``
    attempts of ``task`` started, flush Redis, submit ``after``; when every job has ended,
    check the ledger and return the task's attempt spans."""

    def run(task: str, limits: dict[str, Any], before: Jobs, starts: int, after: Jobs) -> Any:
        settings = chaos_settings(chaos_db, own_redis.url, tmp_path,
                                        task_limits=json.dumps({task: limits}))  # fmt: skip
        ids = asyncio.run(submit_jobs(settings, before))
        fleet = fleet_factory(settings)
        for _ in range(2):
            fleet.start(concurrency=4)
        recovery = recovery_factory(settings, interval=1.0)
        try:
            wait_until(lambda: _started(chaos_db, task) == starts, timeout=30, what="starts")
            client = redis.Redis.from_url(own_redis.url)
            client.flushdb()
            client.close()
            ids += asyncio.run(submit_jobs(settings, after))
            wait_terminal(chaos_db, len(ids), timeout=120)
        finally:
            recovery.stop()
            fleet.stop_all()
        book = check_ledger(chaos_db, ids)
        assert book["status"] == {"completed": len(ids)}, book["status"]
        spans = attempt_spans(chaos_db, task)
        assert len(spans) == len(ids)
        return spans

    return run


def test_a_concurrency_of_one_holds_across_a_redis_flush_while_an_attempt_runs(
    across_flush: Callable[..., Any],
) -> None:
    # The first attempt outlives two leases (2 s): only its heartbeats can keep its slot.
    first = [{"task": "sleep", "payload": {"seconds": 5.0}}]
    more = [{"task": "sleep", "payload": {"seconds": 0.3}}] * 10
    spans = across_flush("sleep", {"concurrency": 1}, first, 1, more)
    assert most_at_once(spans) == 1, [(s["started_at"], s["finished_at"]) for s in spans]


def test_a_rate_window_holds_across_a_redis_flush_after_its_starts(
    across_flush: Callable[..., Any],
) -> None:
    # A 15-s window, not a minute: the flush lands within a second of the second start and
    # the recovery loop looks every second, so a window the flush lost would let the third
    # echo start seconds after the flush, well inside 15 s; a minute only waited longer.
    echoes = [{"task": "echo", "payload": {"i": i}} for i in range(3)]
    spans = across_flush("echo", {"rate": "2/15s"}, echoes, 2, [])
    starts = [s["started_at"] for s in spans]
    assert most_starts_in(starts, timedelta(seconds=15)) == 2, starts
