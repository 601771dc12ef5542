"""Where connection settings come from: URLs locally, Secrets Manager in AWS (cached), or
IAM auth tokens signed in the function (lean and serverless profiles)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from psycopg.conninfo import make_conninfo
from redis.credentials import CredentialProvider

from asyncz.access import hash_api_key
from asyncz.iam_auth import CachedToken, elasticache_token, rds_token
from asyncz.settings import Settings

TokenProvider = Callable[[], str]

SECRET_MAX_AGE_SECONDS = 300


def read_secret(arn: str, max_age: int = SECRET_MAX_AGE_SECONDS) -> str:
    # Imported here: only AWS stages pay for boto3/Powertools parameters at first use.
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(arn, max_age=max_age)
    return value if isinstance(value, str) else value.decode()


def database_conninfo(settings: Settings) -> str:
    """A libpq conninfo for the job store (RDS Proxy host + secret credentials in AWS)."""
    extra: dict[str, Any] = {
        "connect_timeout": max(1, int(settings.db_connect_timeout_seconds)),
        "application_name": f"asyncz-{settings.stage}",
    }
    if settings.database_url:
        return make_conninfo(settings.database_url, **extra)
    if settings.database_host and settings.database_user and not settings.database_secret_arn:
        # IAM auth: the password is a token made per connection (database_password());
        # else the configured one (the migration step of the IAM-auth profiles).
        return make_conninfo(
            host=settings.database_host,
            port=settings.database_port,
            dbname=settings.database_name,
            user=settings.database_user,
            password=None if settings.database_iam_auth else settings.database_password,
            sslmode=settings.database_sslmode,
            **extra,
        )
    if not settings.database_secret_arn:
        raise ValueError("set ASYNCZ_DATABASE_URL or ASYNCZ_DATABASE_SECRET_ARN")
    secret = json.loads(read_secret(settings.database_secret_arn))
    return make_conninfo(
        host=settings.database_host or secret["host"],
        port=int(secret.get("port", 5432)),
        dbname=settings.database_name or secret.get("dbname", "postgres"),
        user=secret["username"],
        password=secret["password"],
        sslmode=settings.database_sslmode,
        **extra,
    )


def database_password(
    settings: Settings, sign: Callable[..., str] | None = None
) -> TokenProvider | None:
    """With IAM auth, what gives each new connection its password (a fresh token when the
    last nears expiry); otherwise None: the password, if any, is in the conninfo."""
    if settings.database_url or settings.database_secret_arn or not settings.database_iam_auth:
        return None
    host, port, user = settings.database_host, settings.database_port, settings.database_user
    if not (host and user):
        raise ValueError("ASYNCZ_DATABASE_IAM_AUTH needs ASYNCZ_DATABASE_HOST and _USER")
    region, signer = settings.aws_region, sign or rds_token
    return CachedToken(lambda: signer(host=host, port=port, user=user, region=region))


class TokenCredentials(CredentialProvider):
    """redis-py asks this for a (user, password) pair each time it opens a connection."""

    def __init__(self, user: str, token: TokenProvider) -> None:
        self.user = user
        self.token = token

    def get_credentials(self) -> tuple[str, str]:
        return self.user, self.token()


def redis_credentials(
    settings: Settings, sign: Callable[..., str] | None = None
) -> CredentialProvider | None:
    """ElastiCache IAM auth: a provider of ``(user, fresh token)``; None without IAM auth."""
    user, cache = settings.redis_iam_user, settings.redis_cache_name
    if not user:
        return None
    if not cache:
        raise ValueError("ASYNCZ_REDIS_IAM_USER needs ASYNCZ_REDIS_CACHE_NAME")
    region, serverless = settings.aws_region, settings.redis_serverless
    signer = sign or elasticache_token
    return TokenCredentials(
        user,
        CachedToken(
            lambda: signer(cache_name=cache, user=user, region=region, serverless=serverless)
        ),
    )


def redis_password(settings: Settings) -> str | None:
    """The ElastiCache AUTH token, when one is configured."""
    return read_secret(settings.redis_auth_secret_arn) if settings.redis_auth_secret_arn else None


def api_key_hashes(settings: Settings) -> frozenset[str]:
    """SHA-256 hex digests of every accepted API key (settings plus the keys secret).

    The secret may hold ``{"api_key": "..."}``, ``{"api_keys": [...]}``,
    ``{"api_key_hashes": [...]}`` or a comma-separated list of plain keys.
    """
    hashes = set(settings.api_key_hash_list)
    hashes |= {hash_api_key(k.strip()) for k in settings.api_keys.split(",") if k.strip()}
    if settings.api_keys_secret_arn:
        # not cached here: the api's KeyCheck holds the hashes for its own short TTL, the
        # one bound on how long a revoked key keeps working
        raw = read_secret(settings.api_keys_secret_arn, max_age=0).strip()
        keys: list[str] = []
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if isinstance(data, dict):
            if isinstance(data.get("api_key"), str):
                keys.append(data["api_key"])
            keys += [str(k) for k in data.get("api_keys", [])]
            hashes |= {str(h).lower() for h in data.get("api_key_hashes", [])}
        else:
            keys += [k.strip() for k in raw.split(",") if k.strip()]
        hashes |= {hash_api_key(k) for k in keys}
    return frozenset(hashes)
