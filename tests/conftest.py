"""Shared fixtures. Integration fixtures talk to real PostgreSQL and Redis.

Servers come from ASYNCZ_TEST_DATABASE_URL / ASYNCZ_TEST_REDIS_URL (scripts/test sets
them, falling back to embedded servers when no system server answers). A missing server
fails the test loudly; nothing is skipped.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
import redis

from asyncz.settings import Settings

DEFAULT_DB = "postgresql://postgres@127.0.0.1:5432/asyncz_test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/1"


def database_url() -> str:
    return os.environ.get("ASYNCZ_TEST_DATABASE_URL", DEFAULT_DB)


def redis_url() -> str:
    return os.environ.get("ASYNCZ_TEST_REDIS_URL", DEFAULT_REDIS)


def ensure_database(url: str) -> None:
    """Create the test database if missing (connecting to the server's `postgres` db)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    name = str(info["dbname"])
    admin = psycopg.conninfo.make_conninfo(url, dbname="postgres")
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
            ).fetchone()
            if not exists:
                conn.execute(
                    psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name))
                )
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable at {admin}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def pg_url() -> str:
    from asyncz.store.migrations import apply_migrations

    url = database_url()
    ensure_database(url)
    apply_migrations(url)
    return url


@pytest.fixture(scope="session")
def redis_server_url() -> str:
    url = redis_url()
    try:
        redis.Redis.from_url(url, socket_connect_timeout=5).ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis is not reachable at {url}: {exc}", pytrace=False)
    return url


@pytest.fixture
def clean(pg_url: str, redis_server_url: str) -> Iterator[None]:
    """Empty jobs and this test database's Redis db before the test."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs, job_attempts, periodic_runs")
    redis.Redis.from_url(redis_server_url).flushdb()
    yield


def make_settings(pg_url: str, redis_server_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": pg_url,
        "redis_url": redis_server_url,
        "api_key_hashes": "0" * 64,
        "worker_function_name": "asyncz-worker",
        "heartbeat_seconds": 0.5,
        "lease_timeout_seconds": 3.0,
        "worker_poll_seconds": 0.5,
        "worker_idle_exit_seconds": 0,
        "backoff_base_seconds": 0.2,
        "backoff_max_seconds": 2.0,
        "db_pool_max": 4,
        "publish_gauges": False,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings(clean: None, pg_url: str, redis_server_url: str, tmp_path: Any) -> Settings:
    return make_settings(pg_url, redis_server_url, artifact_dir=str(tmp_path / "artifacts"))


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings as ASYNCZ_* variables, for subprocesses."""
    env = dict(os.environ)
    for name, value in settings.model_dump().items():
        if value is not None:
            env[f"ASYNCZ_{name.upper()}"] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
    return env


@asynccontextmanager
async def open_service(settings: Settings, **kwargs: Any) -> AsyncIterator[Any]:
    from asyncz import runtime

    service = await runtime.build_service(settings, **kwargs)
    try:
        yield service
    finally:
        await runtime.close_service(service)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def new_key() -> str:
    return str(uuid.uuid4())


_TIER_OF_FOLDER = {
    "unit": "unit",
    "integration": "integration",
    "infra": "infra",
    "localstack": "localstack",
    "chaos": "chaos",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test carries the marker of its tier folder, so `-m <tier>` selects by folder too."""
    for item in items:
        parts = item.path.parts
        for folder, marker in _TIER_OF_FOLDER.items():
            if (
                folder in parts[parts.index("tests") + 1 : parts.index("tests") + 2]
                if "tests" in parts
                else ()
            ):
                item.add_marker(getattr(pytest.mark, marker))
