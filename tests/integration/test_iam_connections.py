"""The IAM-auth connection path (lean and serverless profiles) against the local PostgreSQL
and Redis: the same settings the functions get in AWS, with stand-in token signers (the
signers themselves are tested in tests/unit/test_iam_auth.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import redis

from asyncz import connections
from asyncz.errors import BrokerUnavailableError
from asyncz.jobs import NewJob
from asyncz.settings import Settings
from tests.support.settings import open_service

pytestmark = pytest.mark.integration


@pytest.fixture
def acl_user(redis_server_url: str) -> Iterator[tuple[str, str]]:
    """A Redis ACL user whose password is a token, as ElastiCache's IAM user is."""
    name, token = f"asyncz-iam-{uuid.uuid4().hex[:8]}", f"token-{uuid.uuid4().hex}"
    admin = redis.Redis.from_url(redis_server_url)
    admin.acl_setuser(
        name, enabled=True, passwords=[f"+{token}"], keys=["*"], channels=["*"], commands=["+@all"]
    )
    try:
        yield name, token
    finally:
        admin.acl_deluser(name)


def iam_settings(settings: Settings, redis_user: str) -> Settings:
    # a URL or key=value conninfo alike (an xdist worker's database is the latter)
    pg = psycopg.conninfo.conninfo_to_dict(settings.database_url or "")
    rd = urlsplit(settings.redis_url or "")
    return settings.model_copy(
        update={
            "database_url": None,
            "database_iam_auth": True,
            "database_host": pg.get("host") or "127.0.0.1",
            "database_port": int(pg.get("port") or 5432),
            "database_user": pg.get("user") or "postgres",
            "database_name": pg.get("dbname"),
            "database_sslmode": "disable",  # the local server has no TLS
            "redis_url": f"redis://{rd.hostname}:{rd.port}{rd.path}",
            "redis_iam_user": redis_user,
            "redis_cache_name": "local-cache",
        }
    )


def test_the_service_connects_with_signed_tokens(
    settings: Settings, acl_user: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    user, token = acl_user
    signed: dict[str, list[dict[str, Any]]] = {"rds": [], "elasticache": []}

    def rds(**kw: Any) -> str:
        signed["rds"].append(kw)
        return "pg-token"

    def elasticache(**kw: Any) -> str:
        signed["elasticache"].append(kw)
        return token

    monkeypatch.setattr(connections, "rds_token", rds)
    monkeypatch.setattr(connections, "elasticache_token", elasticache)
    iam = iam_settings(settings, user).require_for("api")

    async def go() -> None:
        async with open_service(iam) as svc:
            submitted = await svc.submit(NewJob(task="echo", payload={"x": 1}))
            assert (await svc.store.get_job(submitted.job_id)) is not None
            assert await svc.broker.backlog(["default"]) == {"default": (1, 0)}
            async with svc.store._pool.connection() as conn:
                # libpq got the token as the password, for the configured user
                assert conn.info.password == "pg-token"
                assert conn.info.user == iam.database_user

    asyncio.run(go())
    assert signed["rds"][0] == {
        "host": iam.database_host,
        "port": iam.database_port,
        "user": iam.database_user,
        "region": iam.aws_region,
    }
    assert signed["elasticache"][0] == {
        "cache_name": "local-cache",
        "user": user,
        "region": iam.aws_region,
        "serverless": False,
    }


def test_a_wrong_cache_token_is_refused_as_an_unavailable_broker(
    settings: Settings, acl_user: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    user, _ = acl_user
    monkeypatch.setattr(connections, "rds_token", lambda **kw: "pg-token")
    monkeypatch.setattr(connections, "elasticache_token", lambda **kw: "not-the-token")

    async def go() -> None:
        async with open_service(iam_settings(settings, user)) as svc:
            with pytest.raises(BrokerUnavailableError):
                await svc.broker.ping()

    asyncio.run(go())


def test_a_pool_with_no_minimum_lets_go_of_idle_connections(settings: Settings) -> None:
    """Serverless profile: Aurora pauses only when no connection is open, so the pool keeps
    none once idle (ASYNCZ_DB_POOL_MIN=0, a short ASYNCZ_DB_POOL_MAX_IDLE_SECONDS)."""
    from tests.support.waiting import wait_until

    name = f"asyncz-idle-{uuid.uuid4().hex[:6]}"
    lean = settings.model_copy(
        update={"db_pool_min": 0, "db_pool_max_idle_seconds": 0.3, "stage": name}
    )

    def open_connections() -> int:
        from tests.support.ledger import rows

        found = rows(
            settings.database_url,
            "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = %s",
            (f"asyncz-{name}",),
        )
        return int(found[0]["n"])

    async def go() -> None:
        async with open_service(lean) as svc:
            await svc.store.ping()
            assert open_connections() >= 1
            await asyncio.to_thread(
                wait_until,
                lambda: open_connections() == 0,
                30.0,
                0.1,
                "the idle connection to close",
            )

    asyncio.run(go())
