"""A PostgreSQL that stops answering without closing anything (frozen, or a black-holed
network as during a failover): the api must still answer ``503`` within a bound.

Before 660d2eb nothing bounded a query on a pooled connection, so the call hung
(docs/testing.md, the chaos tier); the bound is ASYNCZ_DB_QUERY_TIMEOUT_SECONDS (3 s here)
plus psycopg's own cancel wait. A submit whose INSERT got no answer then says its outcome
is unknown at once (a server that does not answer a cancel will not answer a look for the
row). ``POST /jobs`` (the submit) and ``GET /jobs/{id}`` (a read) run on the same async pool
under the same ``asyncio.timeout``: both are checked, so neither path can lose the bound.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import (
    OUTAGE_BOUND,
    PrivatePostgres,
    assert_unavailable,
    chaos_settings,
    create_database,
)
from tests.support.fleet import ApiSandbox
from tests.support.private_servers import RedisServer

pytestmark = pytest.mark.chaos


def cluster_pids(pg: PrivatePostgres) -> list[int]:
    info = pg.server.postmaster()
    assert info is not None
    root = int(info["pid"])
    pids = [root]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == root:
                    pids.append(int(entry.name))
    return pids


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def test_frozen_postgres_api_answers_503_within_a_bound(
    own_postgres: PrivatePostgres,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
) -> None:
    db = create_database(own_postgres.server_url, "asyncz_chaos")
    settings = chaos_settings(db, own_redis.url, tmp_path)
    api = api_factory(settings)
    reply = api.request("POST", "/jobs", {"task": "echo", "payload": {}}, timeout=30)
    assert reply is not None and reply["status"] == 202, reply
    job_id = reply["body"]["job_id"]

    pids = cluster_pids(own_postgres)
    signal_all(pids, signal.SIGSTOP)
    try:
        replies = {}
        for method, target, body in (
            ("GET", f"/jobs/{job_id}", None),  # a read
            ("POST", "/jobs", {"task": "echo", "payload": {}}),  # the submit
        ):
            started = time.monotonic()
            try:
                reply = api.request(method, target, body, timeout=OUTAGE_BOUND + 5)
            except AssertionError:
                reply = None
            replies[method] = (reply, time.monotonic() - started)
    finally:
        signal_all(pids, signal.SIGCONT)
    for method, (reply, took) in replies.items():
        assert reply is not None and took < OUTAGE_BOUND, (
            f"with Postgres frozen {method} hung for {took:.0f} s (no client-side bound on a "
            "query or a connection check)"
        )
        assert reply["status"] == 503, (method, reply)
        assert_unavailable(method, reply["body"])
    # thawed: the same sandbox recovers by itself; the next submit is accepted
    reply = api.request("POST", "/jobs", {"task": "echo", "payload": {}}, timeout=30)
    assert reply is not None and reply["status"] == 202, reply
