"""The tests' PostgreSQL and Redis set-up: which servers, and fresh databases on them.

Every tier takes its servers from ``ASYNCZ_TEST_DATABASE_URL`` / ``ASYNCZ_TEST_REDIS_URL``
(``scripts/test`` sets them). A test that needs a database of its own names it after the test
database (:func:`sibling_url`), so two checkouts testing on one server never share one.

Under pytest-xdist each worker (``PYTEST_XDIST_WORKER`` = ``gw0``, ``gw1``) tests on a
database and a block of Redis dbs of its own, derived from those two variables, so workers
never empty or flush each other's data. A run uses :data:`REDIS_DBS_PER_RUN` Redis dbs: its
test db and the siblings at offsets 1 to 4; Redis has 16, so at most two workers fit beside
the block of a run without xdist.
"""

from __future__ import annotations

import contextlib
import os
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis
from psycopg import sql

DEFAULT_DB = "postgresql://postgres@127.0.0.1:5432/asyncz_test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/1"


REDIS_DBS = 16  # a Redis server's default number of dbs
REDIS_DBS_PER_RUN = 5  # the test db and its siblings (offsets 1 to 4)


def xdist_worker() -> int | None:
    """This pytest-xdist worker's number (``gw1`` -> 1), or None outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") else None


def database_url() -> str:
    """The test database: ``ASYNCZ_TEST_DATABASE_URL``'s, or a sibling of it per xdist worker."""
    base = os.environ.get("ASYNCZ_TEST_DATABASE_URL", DEFAULT_DB)
    worker = xdist_worker()
    return base if worker is None else _suffixed(base, f"gw{worker}")


def redis_url() -> str:
    """The test Redis db: ``ASYNCZ_TEST_REDIS_URL``'s, or per xdist worker the first db of the
    worker's own block after it (modulo 16)."""
    base = os.environ.get("ASYNCZ_TEST_REDIS_URL", DEFAULT_REDIS)
    worker = xdist_worker()
    if worker is None:
        return base
    if REDIS_DBS_PER_RUN * (worker + 2) > REDIS_DBS:
        raise RuntimeError(
            f"xdist worker gw{worker} has no Redis dbs of its own: {REDIS_DBS} dbs hold the "
            f"blocks of {REDIS_DBS // REDIS_DBS_PER_RUN - 1} workers beside the main run"
        )
    return _redis_db(base, REDIS_DBS_PER_RUN * (worker + 1))


def _suffixed(base: str, suffix: str) -> str:
    name = psycopg.conninfo.conninfo_to_dict(base).get("dbname") or "asyncz_test"
    return psycopg.conninfo.make_conninfo(base, dbname=f"{name}_{suffix}")


def _redis_db(base: str, offset: int) -> str:
    parts = urlsplit(base)
    db = (int(parts.path.lstrip("/") or 0) + offset) % REDIS_DBS
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", "", ""))


def sibling_url(suffix: str, base: str | None = None) -> str:
    """The URL of a database named after the test database plus ``_<suffix>``."""
    return _suffixed(base or database_url(), suffix)


def sibling_redis_url(offset: int) -> str:
    """The test Redis server's db ``offset`` (1 to 4) places after the test db (modulo 16)."""
    if not 0 < offset < REDIS_DBS_PER_RUN:
        raise ValueError(f"a sibling Redis db is 1 to {REDIS_DBS_PER_RUN - 1} places on: {offset}")
    return _redis_db(redis_url(), offset)


def _admin(url: str) -> tuple[str, str]:
    return psycopg.conninfo.make_conninfo(url, dbname="postgres"), str(
        psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    )


def ensure_database(url: str) -> str:
    """Create the database of ``url`` when missing; a server that does not answer fails the
    test with the address it tried."""
    admin, name = _admin(url)
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                # two processes may race to create it: either way it exists afterwards
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable at {admin}: {exc}", pytrace=False)
    return url


def drop_database(url: str) -> None:
    admin, name = _admin(url)
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn,
    ):
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def fresh_database(url: str, *, migrate: bool = False) -> str:
    """An empty database at ``url`` (dropped first if it exists), migrated when asked."""
    drop_database(url)
    ensure_database(url)
    if migrate:
        from asyncz.store.migrations import apply_migrations

        apply_migrations(url)
    return url


def empty_backends(suffix: str, redis_offset: int) -> tuple[str, str]:
    """(database URL, Redis URL) of an empty database and an emptied Redis db of a test
    module's own: :func:`sibling_url` ``suffix`` and :func:`sibling_redis_url` ``offset``."""
    import redis

    redis_url = sibling_redis_url(redis_offset)
    redis.Redis.from_url(redis_url).flushdb()
    return fresh_database(sibling_url(suffix)), redis_url


def empty_servers(pg_url: str, redis_url: str) -> None:
    """Empty the job tables and the Redis db (also between two halves of one test)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE jobs, job_steps, job_gathers, job_attempts, job_dependencies, periodic_runs, "
            "api_keys, audit_log, queue_pauses, events, job_outbox, webhooks, webhook_deliveries, "
            "webhook_attempts"
        )
    redis.Redis.from_url(redis_url).flushdb()
