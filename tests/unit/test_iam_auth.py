"""The IAM auth token signers (botocore, no network) and the providers built on them."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from moto import mock_aws

from asyncz.connections import database_conninfo, database_password, redis_credentials
from asyncz.iam_auth import (
    REUSE_MARGIN_SECONDS,
    TOKEN_LIFETIME_SECONDS,
    CachedToken,
    elasticache_token,
    rds_token,
)
from asyncz.settings import Settings

pytestmark = pytest.mark.unit


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    # Signing must not open a socket: any connection attempt fails the test.
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a token signer touched the network")

    with mock_aws():
        monkeypatch.setattr(socket.socket, "connect", no_network)
        yield


def _query(token: str) -> tuple[str, dict[str, list[str]]]:
    parts = urlsplit(f"https://{token}")
    return parts.netloc + parts.path, parse_qs(parts.query)


def test_the_rds_token_is_a_presigned_connect_for_the_user(aws: None) -> None:
    token = rds_token(host="db.example.internal", port=5432, user="asyncz_app", region="eu-west-1")
    where, query = _query(token)
    assert where == "db.example.internal:5432/"
    assert query["Action"] == ["connect"] and query["DBUser"] == ["asyncz_app"]
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Expires"] == [str(TOKEN_LIFETIME_SECONDS)]
    assert "/eu-west-1/rds-db/aws4_request" in query["X-Amz-Credential"][0]
    assert query["X-Amz-Security-Token"] == ["session-token"]
    assert len(query["X-Amz-Signature"][0]) == 64


@pytest.mark.parametrize("serverless", [False, True])
def test_the_elasticache_token_is_a_sigv4_presigned_connect(aws: None, serverless: bool) -> None:
    token = elasticache_token(
        cache_name="asyncz-cache", user="asyncz-app", region="us-east-1", serverless=serverless
    )
    assert not token.startswith("http")
    where, query = _query(token)
    assert where == "asyncz-cache/"
    assert query["Action"] == ["connect"] and query["User"] == ["asyncz-app"]
    assert query.get("ResourceType") == (["ServerlessCache"] if serverless else None)
    assert query["X-Amz-Expires"] == [str(TOKEN_LIFETIME_SECONDS)]
    assert "/us-east-1/elasticache/aws4_request" in query["X-Amz-Credential"][0]
    assert query["X-Amz-SignedHeaders"] == ["host"]
    assert len(query["X-Amz-Signature"][0]) == 64


def test_a_cached_token_is_signed_again_only_near_expiry() -> None:
    now = [0.0]
    signed: list[int] = []

    def sign() -> str:
        signed.append(1)
        return f"token-{len(signed)}"

    token = CachedToken(sign, clock=lambda: now[0])
    assert token() == token() == "token-1"
    now[0] = TOKEN_LIFETIME_SECONDS - REUSE_MARGIN_SECONDS - 1
    assert token() == "token-1"
    now[0] = TOKEN_LIFETIME_SECONDS - REUSE_MARGIN_SECONDS
    assert token() == "token-2" and len(signed) == 2


def _iam_settings(**kw: Any) -> Settings:
    values: dict[str, Any] = {
        "database_iam_auth": True,
        "database_host": "db.internal",
        "database_port": 5432,
        "database_user": "asyncz_app",
        "database_sslmode": "require",
        "redis_url": "rediss://cache.internal:6380/0",
        "redis_iam_user": "asyncz-app",
        "redis_cache_name": "asyncz-cache",
    }
    values.update(kw)
    return Settings(**values)


def test_iam_settings_give_a_passwordless_conninfo_and_token_providers() -> None:
    settings = _iam_settings()
    conninfo = database_conninfo(settings)
    assert "password" not in conninfo and "user=asyncz_app" in conninfo
    assert "sslmode=require" in conninfo
    calls: list[dict[str, Any]] = []
    provider = database_password(settings, sign=lambda **kw: calls.append(kw) or "pg-token")
    assert provider is not None and provider() == "pg-token"
    assert calls == [{"host": "db.internal", "port": 5432, "user": "asyncz_app", "region": None}]
    creds = redis_credentials(settings, sign=lambda **kw: f"rd-{kw['cache_name']}")
    assert creds is not None and creds.get_credentials() == ("asyncz-app", "rd-asyncz-cache")
    settings.require_for("worker")


def test_password_settings_need_no_provider() -> None:
    url = Settings(database_url="postgresql://u:p@h/db", redis_url="redis://h/0")
    assert database_password(url) is None and redis_credentials(url) is None
    migrate = _iam_settings(database_iam_auth=False, database_password="owner-pw")
    assert database_password(migrate) is None
    assert "password=owner-pw" in database_conninfo(migrate)
    migrate.require_for("migrate")


def test_an_iam_user_without_a_cache_name_is_refused() -> None:
    with pytest.raises(ValueError, match="ASYNCZ_REDIS_CACHE_NAME"):
        _iam_settings(redis_cache_name=None).require_for("worker")
