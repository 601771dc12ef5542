"""Redis flushed while limited tasks run: the slots and rate windows it held are rebuilt from
PostgreSQL (the running attempts, the attempts' start times), so the flush admits no more
than the limit allows. Judged by the attempts' start and finish times in PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from tests.chaos.conftest import (
    Fleet,
    RecoveryLoop,
    RedisServer,
    chaos_settings,
    check_ledger,
    submit_jobs,
    wait_terminal,
)
from tests.support.ledger import rows
from tests.support.overlap import attempt_spans, most_at_once, most_starts_in
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos

LEASE = 2.0


def _flush(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        client.flushdb()
    finally:
        client.close()


def _started(db: str, task: str) -> int:
    found = rows(db, "SELECT count(*) AS n FROM job_attempts a JOIN jobs j ON j.id = a.job_id "
                 "WHERE j.task = %s", (task,))  # fmt: skip
    return int(found[0]["n"])


def test_a_concurrency_of_one_holds_across_a_redis_flush_while_an_attempt_runs(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(
        chaos_db, own_redis.url, tmp_path, lease_timeout_seconds=LEASE,
        task_limits=json.dumps({"sleep": {"concurrency": 1}}),
    )  # fmt: skip
    # The first attempt outlives two leases: only its heartbeats can keep its slot.
    ids = asyncio.run(submit_jobs(settings, [{"task": "sleep", "payload": {"seconds": 5.0}}]))
    fleet = fleet_factory(settings)
    for _ in range(2):
        fleet.start(concurrency=4)
    recovery = recovery_factory(settings, interval=1.0)
    try:
        wait_until(lambda: _started(chaos_db, "sleep") == 1, timeout=30, what="first attempt")
        _flush(own_redis)
        ids += asyncio.run(
            submit_jobs(settings, [{"task": "sleep", "payload": {"seconds": 0.3}}] * 10)
        )
        wait_terminal(chaos_db, 11, timeout=120)
    finally:
        recovery.stop()
        fleet.stop_all()
    book = check_ledger(chaos_db, ids)
    assert book["status"] == {"completed": 11}, book["status"]
    spans = attempt_spans(chaos_db, "sleep")
    assert len(spans) == 11
    assert most_at_once(spans) == 1, [(s["started_at"], s["finished_at"]) for s in spans]


def test_a_rate_window_holds_across_a_redis_flush_after_its_starts(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(
        chaos_db, own_redis.url, tmp_path, lease_timeout_seconds=LEASE,
        task_limits=json.dumps({"echo": {"rate": "2/m"}}),
    )  # fmt: skip
    echoes = [{"task": "echo", "payload": {"i": i}} for i in range(3)]
    ids = asyncio.run(submit_jobs(settings, echoes))
    fleet = fleet_factory(settings)
    fleet.start(concurrency=4)
    recovery = recovery_factory(settings, interval=1.0)
    try:
        wait_until(lambda: _started(chaos_db, "echo") == 2, timeout=30, what="two starts")
        _flush(own_redis)
        wait_terminal(chaos_db, 3, timeout=120)
    finally:
        recovery.stop()
        fleet.stop_all()
    book = check_ledger(chaos_db, ids)
    assert book["status"] == {"completed": 3}, book["status"]
    starts = [s["started_at"] for s in attempt_spans(chaos_db, "echo")]
    assert len(starts) == 3
    assert most_starts_in(starts, timedelta(minutes=1)) == 2, starts
