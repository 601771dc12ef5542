"""The tests' one settings builder, its environment form for subprocesses and for a
handler that reads its own, and a service opened on it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from asyncz.settings import Settings, get_settings

if TYPE_CHECKING:
    import pytest


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


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings as ASYNCZ_* variables, for subprocesses."""
    env = dict(os.environ)
    for name, value in settings.model_dump().items():
        if value is not None:
            env[f"ASYNCZ_{name.upper()}"] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
    return env


@contextmanager
def handler_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """``settings`` as a handler reads them, from its environment (as in its Lambda): the
    settings ``get_settings()`` gives while inside."""
    for name, value in settings_env(settings).items():
        if name.startswith("ASYNCZ_"):
            monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        yield get_settings()
    finally:
        get_settings.cache_clear()


@asynccontextmanager
async def open_service(settings: Settings, **kwargs: Any) -> AsyncIterator[Any]:
    from asyncz import composition

    service = await composition.build_service(settings, **kwargs)
    try:
        yield service
    finally:
        await composition.close_service(service)
