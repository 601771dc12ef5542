"""The api handler imports without network I/O; schemathesis finds no 5xx or schema violation."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from asyncz.api.app import create_app
from asyncz.connections import hash_api_key
from tests.support.databases import empty_servers
from tests.support.settings import make_settings

pytestmark = pytest.mark.integration
KEY = "schemathesis-key-0123456789"


def test_importing_the_api_handler_does_no_network_io() -> None:
    probe = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise AssertionError("network I/O at import time")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        import asyncz.api.handler, asyncz.worker.handler, asyncz.fleet.handler
        import asyncz.recovery.handler, asyncz.migrate.handler
        print("ok")
    """)
    env = {
        "PATH": "/usr/bin:/bin",
        "ASYNCZ_DATABASE_URL": "postgresql://db.invalid/x",
        "ASYNCZ_REDIS_URL": "redis://redis.invalid:6379/0",
    }
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.fixture(scope="module")
def schema(pg_url: str, redis_server_url: str) -> Any:
    settings = make_settings(
        pg_url, redis_server_url, api_key_hashes=hash_api_key(KEY), redis_prefix="schemathesis"
    )
    app = create_app(settings)
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_api_schema_no_5xx_no_schema_violation(schema: Any) -> None:
    """Every operation of the app's own OpenAPI schema, a bounded number of examples each."""
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @hsettings(
            max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case: Any) -> None:
            case.headers = {**(case.headers or {}), "x-api-key": KEY}
            case.call_and_validate(
                checks=[
                    not_a_server_error,
                    status_code_conformance,
                    content_type_conformance,
                    response_schema_conformance,
                ]
            )

        try:
            check()
        except Exception as exc:  # noqa: BLE001 - collect every operation's failure
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}"[:2000])
    assert operations >= 11
    assert not failures, "\n\n".join(failures)


def test_api_stateful_links_no_5xx_no_schema_violation(
    schema: Any, pg_url: str, redis_server_url: str
) -> None:
    """Schemathesis' stateful run: sequences that follow the links it infers between
    operations (a listed job's id into GET/cancel/replay/purge, a created key's name into
    its revoke), bounded in steps; each sequence starts from empty servers, so what one
    created cannot change what the next may draw."""
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
    ]

    calls: list[str] = []

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            empty_servers(pg_url, redis_server_url)

        def before_call(self, case: Any) -> None:
            case.headers = {**(case.headers or {}), "x-api-key": KEY}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            calls.append(f"{case.method} {case.path} -> {response.status_code}")
            case.validate_response(response, checks=checks)

    Workflow.run(
        settings=hsettings(
            max_examples=30,
            stateful_step_count=6,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    assert len(calls) >= 30, calls  # it did run sequences
