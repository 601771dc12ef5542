"""IAM authentication tokens for RDS/Aurora PostgreSQL and ElastiCache (Valkey), signed in
the function with botocore from the sandbox's own credentials: no network call, no secret.

Both tokens live 15 minutes and are checked only when a connection opens, so a pool asks
for a fresh one per new connection (psycopg's callable ``kwargs``, redis-py's credential
provider); open connections outlive their token.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode

TOKEN_LIFETIME_SECONDS = 900  # both services accept at most 15 minutes
# A token is reused while it has this much life left: a burst of new connections need
# not sign (and resolve credentials) once each.
REUSE_MARGIN_SECONDS = 300

TokenProvider = Callable[[], str]


@lru_cache(maxsize=4)
def _session(region: str | None) -> Any:
    import botocore.session  # only the IAM-auth profiles pay for botocore at first use

    session = botocore.session.get_session()
    if region:
        session.set_config_variable("region", region)
    return session


@lru_cache(maxsize=4)
def _rds_client(region: str | None) -> Any:
    return _session(region).create_client("rds", region_name=region)


def rds_token(*, host: str, port: int, user: str, region: str | None = None) -> str:
    """An RDS IAM auth token (the password) for ``user`` at ``host:port``."""
    client = _rds_client(region)
    return str(
        client.generate_db_auth_token(DBHostname=host, Port=port, DBUsername=user, Region=region)
    )


def elasticache_token(
    *, cache_name: str, user: str, region: str | None = None, serverless: bool = False
) -> str:
    """An ElastiCache IAM auth token: a SigV4-presigned ``connect`` request for ``user`` on
    replication group (or serverless cache) ``cache_name``, without its scheme."""
    from botocore.model import ServiceId
    from botocore.signers import RequestSigner

    session = _session(region)
    credentials = session.get_credentials()
    if credentials is None:
        raise RuntimeError("no AWS credentials to sign an ElastiCache IAM auth token with")
    region = region or session.get_config_variable("region")
    if not region:
        raise RuntimeError("no AWS region to sign an ElastiCache IAM auth token for")
    query: dict[str, str] = {"Action": "connect", "User": user}
    if serverless:
        query["ResourceType"] = "ServerlessCache"
    signer = RequestSigner(
        ServiceId("elasticache"),
        region,
        "elasticache",
        "v4",
        credentials,
        session.get_component("event_emitter"),
    )
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"http://{cache_name}/?{urlencode(query)}",
            "body": {},
            "headers": {},
            "context": {},
        },
        operation_name="connect",
        expires_in=TOKEN_LIFETIME_SECONDS,
        region_name=region,
    )
    return str(url).removeprefix("http://")


@dataclass
class CachedToken:
    """A token provider that signs again only when the last token nears expiry."""

    sign: TokenProvider
    clock: Callable[[], float] = time.monotonic
    _token: str | None = field(default=None, init=False)
    _expires: float = field(default=0.0, init=False)

    def __call__(self) -> str:
        now = self.clock()
        if self._token is None or now >= self._expires - REUSE_MARGIN_SECONDS:
            self._token = self.sign()
            self._expires = now + TOKEN_LIFETIME_SECONDS
        return self._token
