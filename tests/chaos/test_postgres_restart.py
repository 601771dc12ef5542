"""Scenario 4: PostgreSQL restarted mid-run (a private cluster, never the shared server).

During the outage the api answers ``503`` with ``error: database_unavailable`` within a
bound, never hangs; workers log and retry. After the restart the api and the workers
reconnect by themselves, and every job ends terminal with a clean attempt log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.chaos import (
    OUTAGE_BOUND,
    PrivatePostgres,
    assert_unavailable,
    chaos_settings,
    create_database,
    mixed_jobs,
    submit_jobs,
)
from tests.support.fleet import ApiSandbox, Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, non_terminal, rows, wait_terminal
from tests.support.private_servers import RedisServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos

JOBS = 300


def answers(pg: PrivatePostgres) -> bool:
    try:
        with psycopg.connect(pg.server_url, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


def test_postgres_restart_mid_run_api_says_503_and_everyone_reconnects(
    own_postgres: PrivatePostgres,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    db = create_database(own_postgres.server_url, "asyncz_chaos")
    settings = chaos_settings(db, own_redis.url, tmp_path)
    api = api_factory(settings)
    ids = asyncio.run(submit_jobs(settings, mixed_jobs(JOBS, sleep_max=0.5)))
    for spec in mixed_jobs(10):
        reply = api.request("POST", "/jobs", spec, timeout=30)
        assert reply is not None and reply["status"] == 202, reply
        ids.append(reply["body"]["job_id"])
    fleet = fleet_factory(settings)
    for _ in range(2):
        fleet.start(concurrency=4)
    recovery = recovery_factory(settings, interval=1.0)
    wait_until(lambda: non_terminal(db) < len(ids) * 0.7, timeout=60, what="a third done")

    own_postgres.stop()
    assert not answers(own_postgres)
    during: list[dict[str, Any]] = []
    for method, target, body in [
        ("POST", "/jobs", {"task": "echo", "payload": {"during": "outage"}}),
        ("GET", f"/jobs/{ids[0]}", None),
        ("GET", "/jobs?limit=5", None),
        ("GET", "/stats", None),
        ("POST", "/jobs", {"task": "echo", "payload": {"during": "outage", "n": 2}}),
    ]:
        started = time.monotonic()
        reply = api.request(method, target, body, timeout=OUTAGE_BOUND + 15)
        took = time.monotonic() - started
        assert reply is not None, api.stderr()[-2000:]
        assert took < OUTAGE_BOUND, f"{method} {target} took {took:.1f} s"
        assert reply["status"] == 503, reply
        assert_unavailable(method, reply["body"])
        during.append({"target": target, "seconds": round(took, 2)})
    health = api.request("GET", "/health", timeout=OUTAGE_BOUND + 15)
    assert health is not None and health["status"] == 503, health
    assert health["body"]["dependencies"]["postgres"].startswith("down"), health
    assert all(p.poll() is None for p in fleet.procs), "a worker died of the outage"

    own_postgres.start()
    restarted = time.monotonic()
    [back] = rows(db, "SELECT now() AS at")
    first_ok: float | None = None
    refused_after_restart = 0
    while time.monotonic() - restarted < 30:
        reply = api.request("POST", "/jobs", {"task": "echo", "payload": {"after": 1}}, timeout=30)
        assert reply is not None, api.stderr()[-2000:]
        if reply["status"] == 202:
            ids.append(reply["body"]["job_id"])
            first_ok = time.monotonic() - restarted
            break
        assert reply["status"] == 503, reply
        refused_after_restart += 1
        time.sleep(0.2)
    assert first_ok is not None, "the api never reconnected to the restarted Postgres"

    wait_terminal(db, len(ids), timeout=60)
    recovery.stop()
    fleet.stop_all()
    assert all(p.returncode == 0 for p in fleet.procs), fleet.stderr_tail()
    assert "database unavailable" in fleet.stderr_tail(400), "workers did not log the outage"
    [after] = rows(
        db, "SELECT count(*) AS n FROM job_attempt_history WHERE finished_at > %s", (back["at"],)
    )
    assert after["n"] > 0, "the workers that rode out the outage finished nothing after it"
    book = check_ledger(db, ids)
    print(
        f"outage replies {during}; api back {first_ok:.1f} s after restart "
        f"({refused_after_restart} 503s first); {book['status']} {book['outcomes']}"
    )
