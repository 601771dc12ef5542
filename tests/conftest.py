"""Shared fixtures. Integration fixtures talk to real PostgreSQL and Redis.

Servers come from ASYNCZ_TEST_DATABASE_URL / ASYNCZ_TEST_REDIS_URL (scripts/test sets
them, falling back to embedded servers when no system server answers). A missing server
fails the test loudly; nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from asyncz.settings import Settings
from tests.support.databases import database_url, empty_servers, ensure_database, redis_url
from tests.support.private_servers import RedisServer
from tests.support.settings import make_settings


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
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A throwaway ``redis-server`` of the test's own, which it may flush, stop or restart."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def clean(pg_url: str, redis_server_url: str) -> Iterator[None]:
    """Empty jobs and this test database's Redis db before the test."""
    empty_servers(pg_url, redis_server_url)
    yield


@pytest.fixture
def settings(clean: None, pg_url: str, redis_server_url: str, tmp_path: Any) -> Settings:
    return make_settings(pg_url, redis_server_url, artifact_dir=str(tmp_path / "artifacts"))


_TIER_OF_FOLDER = {
    "unit": "unit",
    "integration": "integration",
    "infra": "infra",
    "localstack": "localstack",
    "browser": "browser",
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
