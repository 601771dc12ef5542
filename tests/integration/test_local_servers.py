"""Provisioning for the local runner: given URLs start nothing; embedded servers start, keep
their data across restarts, and a server left by a killed run is reused, never duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
import redis

from asyncz.local.procs import pid_alive
from asyncz.local.servers.embedded import EmbeddedPostgres, EmbeddedRedis
from asyncz.local.servers.provision import LocalServers

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

OWNER = textwrap.dedent(
    """
    import json, sys, time
    import psycopg, redis
    from pathlib import Path
    from asyncz.local.servers.provision import LocalServers

    servers = LocalServers(Path(sys.argv[1]))
    urls = servers.start()
    with psycopg.connect(urls.database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS kept (v text)")
        conn.execute("INSERT INTO kept VALUES ('from the first run')")
    redis.Redis.from_url(urls.redis_url).set("kept", "from the first run")
    print(json.dumps({"db": urls.database_url, "redis": urls.redis_url}), flush=True)
    time.sleep(600)
    """
)


def _postmaster_pid(data_dir: Path) -> int:
    info = EmbeddedPostgres(data_dir).postmaster()
    assert info is not None
    return int(info["pid"])


def test_given_urls_start_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    servers = LocalServers(
        data_dir,
        database_url=os.environ.get(
            "ASYNCZ_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
        redis_url=os.environ.get("ASYNCZ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    )
    urls = servers.start()
    servers.close()
    assert not urls.embedded_postgres and not urls.embedded_redis
    assert not data_dir.exists()  # no data folder, no state, no server


def test_embedded_servers_persist_and_a_killed_runs_servers_are_reused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        assert line, "the first run did not start its servers"
        first = json.loads(line)
        pg_pid = _postmaster_pid(data_dir)
        valkey_pid = EmbeddedRedis(data_dir).running_pid()
        assert valkey_pid is not None

        # While its owner lives, another run shares the servers and leaves them running.
        guest = LocalServers(data_dir)
        urls = guest.start()
        assert (urls.database_url, urls.redis_url) == (first["db"], first["redis"])
        assert not guest.owns_postgres and not guest.owns_redis
        guest.close()
        assert _postmaster_pid(data_dir) == pg_pid
        assert EmbeddedRedis(data_dir).running_pid() == valkey_pid

        os.kill(owner.pid, signal.SIGKILL)  # the owner dies without cleaning up
        owner.wait(10)
        assert pid_alive(pg_pid)  # Postgres is detached by pg_ctl and survives
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)

    heir = LocalServers(data_dir)
    urls = heir.start()
    try:
        assert urls.database_url == first["db"]
        assert _postmaster_pid(data_dir) == pg_pid  # reused, not a second server
        assert heir.owns_postgres  # adopted: this run stops it
        assert not pid_alive(valkey_pid) or EmbeddedRedis(data_dir).running_pid() != valkey_pid
        with psycopg.connect(urls.database_url) as conn:
            assert conn.execute("SELECT v FROM kept").fetchall() == [("from the first run",)]
        assert redis.Redis.from_url(urls.redis_url).get("kept") == b"from the first run"
        postgres_procs = [
            p
            for p in Path("/proc").iterdir()
            if p.name.isdigit() and _is_postmaster_of(p, data_dir)
        ]
        assert len(postgres_procs) == 1
    finally:
        heir.close()
    assert EmbeddedPostgres(data_dir).postmaster() is None
    assert EmbeddedRedis(data_dir).running_pid() is None

    # A clean restart finds the same data again.
    again = LocalServers(data_dir)
    urls = again.start()
    try:
        with psycopg.connect(urls.database_url) as conn:
            assert conn.execute("SELECT count(*) FROM kept").fetchone() == (1,)
        assert redis.Redis.from_url(urls.redis_url).get("kept") == b"from the first run"
    finally:
        again.close()


def _is_postmaster_of(proc: Path, data_dir: Path) -> bool:
    try:
        cmd = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return cmd[0].endswith(b"/postgres") and str(data_dir / "postgres").encode() in cmd


def test_ensure_command_reuses_running_servers_and_stop_stops_them(tmp_path: Path) -> None:
    data_dir = tmp_path / "ensure"
    cmd = [sys.executable, "-m", "asyncz.local.servers"]
    started = time.monotonic()
    out1 = subprocess.run(
        [*cmd, "ensure", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    out2 = subprocess.run(
        [*cmd, "ensure", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    try:
        assert out1 == out2  # the second call found the running servers
        env = dict(line.split("=", 1) for line in out1.split())
        with psycopg.connect(env["ASYNCZ_TEST_DATABASE_URL"]) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("test",)
        assert redis.Redis.from_url(env["ASYNCZ_TEST_REDIS_URL"]).ping()
        assert time.monotonic() - started < 30
    finally:
        subprocess.run([*cmd, "stop", "--data-dir", str(data_dir)], timeout=60, check=True)
    assert EmbeddedPostgres(data_dir).postmaster() is None
    assert EmbeddedRedis(data_dir).running_pid() is None
