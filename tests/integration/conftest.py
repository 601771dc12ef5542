"""Fixtures of the integration tests: the api handler in-process (``api``, ``api_settings``),
and ``asyncz dev`` runs."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from asyncz.api import handler as api_handler
from asyncz.connections import hash_api_key
from asyncz.settings import Settings
from tests.support import devrun
from tests.support.api_lambda import KEY, handler_settings, sandbox
from tests.support.apigw import Reply, call, drop_sandbox
from tests.support.databases import empty_backends
from tests.support.settings import make_settings


@pytest.fixture
def fresh_backends() -> tuple[str, str]:
    """An empty database and an empty Redis db of the ``asyncz dev`` tests' own."""
    return empty_backends("dev", 1)


@pytest.fixture
def dev_env(fresh_backends: tuple[str, str]) -> dict[str, str]:
    """The environment of a quick-cycling ``asyncz dev`` on fresh backends, two api sandboxes."""
    env = devrun.dev_env(*fresh_backends, devrun.API_KEY)
    env["ASYNCZ_DEV_API_SANDBOXES"] = "2"
    return env


@pytest.fixture
def runs() -> Iterator[list[devrun.DevRun]]:
    """The runs a test starts; each still running at the end is killed with its group."""
    started: list[devrun.DevRun] = []
    yield started
    for run in started:  # never leave a run behind, whatever the test did
        if run.proc.poll() is None:
            os.killpg(run.pgid, signal.SIGKILL)
            run.proc.wait(10)


@pytest.fixture(scope="module")
def api_settings(pg_url: str, redis_server_url: str) -> Iterator[Settings]:
    values: dict[str, Any] = {
        "api_key_hashes": hash_api_key(KEY),
        "max_payload_bytes": 64 * 1024,
        "wake_worker": False,
        "queues": "default,reports,other,q2",
        "cost_cache_seconds": 0,  # each test reads its own counts
    }
    with handler_settings(make_settings(pg_url, redis_server_url, **values)) as ready:
        yield ready


@pytest.fixture
def flavour() -> str:
    return "rest"  # tests marked with FLAVOURS run on both


@pytest.fixture
def api(api_settings: Settings, clean: None, flavour: str) -> Iterator[Any]:
    api_handler._sandbox = sandbox(api_settings)

    def request(method: str, target: str, key: str | None = KEY, **kw: Any) -> Reply:
        return call(api_handler.handler, method, target, api_key=key, flavour=flavour, **kw)

    yield request
    drop_sandbox()
