"""Redis answers with errors instead of going away: OOM under ``maxmemory`` (READONLY after
a failover is the same class of reply). Writes are refused, the server still answers.

Guards that handled only connection errors would answer 500 after the row was committed,
and let a worker's heartbeat coroutine die silently, so its leases would expire while its
attempts were still running.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import chaos_settings, submit_jobs
from tests.support.fleet import ApiSandbox, Fleet
from tests.support.ledger import rows
from tests.support.private_servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos


def refuse_writes(server: RedisServer) -> None:
    r = server.client()
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)


def test_redis_refusing_writes_keeps_submits_and_leases_alive(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
    fleet_factory: Callable[..., Fleet],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path, lease_timeout_seconds=3.0)
    [long_job] = asyncio.run(submit_jobs(settings, [{"task": "sleep", "payload": {"seconds": 20}}]))
    fleet = fleet_factory(settings)
    fleet.start(concurrency=2)
    wait_until(
        lambda: rows(
            chaos_db, "SELECT 1 FROM jobs WHERE id=%s AND status='processing'", (long_job,)
        ),
        timeout=20,
        interval=0.05,
        what="the worker to claim the long job",
    )
    api = api_factory(settings)
    refuse_writes(own_redis)
    try:
        own_redis.client().zadd("probe", {"x": 1})
        raise AssertionError("the fault was not injected: Redis still accepts writes")
    except Exception as exc:  # noqa: BLE001
        assert "maxmemory" in str(exc), exc

    accepted = []
    for target, body in (
        ("/jobs", {"task": "echo", "payload": {}}),
        ("/jobs/batch", {"jobs": [{"task": "echo", "payload": {}}]}),
    ):
        reply = api.request("POST", target, body, timeout=30)
        assert reply is not None, api.stderr()[-2000:]
        assert reply["status"] == 202, (target, reply)
        got = reply["body"]
        accepted += [got["job_id"]] if "job_id" in got else [j["job_id"] for j in got["jobs"]]
    stored = rows(chaos_db, "SELECT id::text FROM jobs WHERE id = ANY(%s::uuid[])", (accepted,))
    assert len(stored) == 2, "an accepted job is not in Postgres"

    # the worker keeps renewing its lease through several lease timeouts
    beats = set()
    deadline = time.monotonic() + 3 * settings.lease_timeout_seconds
    while time.monotonic() < deadline:
        [row] = rows(chaos_db, "SELECT status, heartbeat_at FROM jobs WHERE id=%s", (long_job,))
        assert row["status"] == "processing", f"the lease was lost while the attempt ran: {row}"
        beats.add(row["heartbeat_at"])
        time.sleep(0.3)
    assert len(beats) >= 4, f"the heartbeat stopped: {sorted(beats)}"
    own_redis.client().config_set("maxmemory", 0)
    wait_until(
        lambda: rows(
            chaos_db, "SELECT 1 FROM jobs WHERE id=%s AND status='completed'", (long_job,)
        ),
        timeout=30,
        what="the long job to complete once Redis accepts writes again",
    )
    assert fleet.procs[0].poll() is None, fleet.stderr_tail()
    fleet.stop_all()
