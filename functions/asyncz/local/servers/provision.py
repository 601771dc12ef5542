"""Postgres and Redis for the local runner: the URLs given, or embedded servers in a data folder.

``servers.json`` in the data folder remembers each embedded server's port and owning process,
so a later run reuses a server whose owner is alive, adopts a Postgres left by a killed run,
and restarts a Valkey left by one -- never a second server on the same data.

Also a small command for test scripts (servers outlive it, kept by a detached keeper)::

    python -m asyncz.local.servers ensure --data-dir DIR   # prints ASYNCZ_TEST_*_URL=... lines
    python -m asyncz.local.servers stop --data-dir DIR
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from asyncz.local.procs import (
    LOCALHOST,
    ensure_database,
    free_port,
    pid_alive,
    port_is_free,
    redis_answers,
    wait_for,
)
from asyncz.local.servers.embedded import EmbeddedPostgres, EmbeddedRedis, ServerError, ServerUrls
from asyncz.local.servers.state import State

log = logging.getLogger("asyncz.local.servers")

# --------------------------------------------------------------------------- provisioning


def _choose_port(remembered: Any, requested: int | None) -> int:
    if requested:
        return requested
    if isinstance(remembered, int) and port_is_free(remembered):
        return remembered
    return free_port()


class LocalServers:
    """Resolves the runner's Postgres and Redis; stops on :meth:`close` only what it owns.

    A URL given wins and starts nothing. Otherwise an embedded server already running on the
    data folder is reused; one left by a dead owner is adopted (Postgres) or restarted
    (Redis); none running is started.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        database_url: str | None = None,
        redis_url: str | None = None,
        database_name: str = "asyncz",
        pg_port: int | None = None,
        redis_port: int | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.database_url = database_url
        self.redis_url = redis_url
        self.database_name = database_name
        self.pg_port = pg_port
        self.redis_port = redis_port
        self.postgres = EmbeddedPostgres(self.data_dir)
        self.redis = EmbeddedRedis(self.data_dir)
        self.owns_postgres = False
        self.owns_redis = False
        self.state = State(self.data_dir)
        self._closed = threading.Event()

    def start(self) -> ServerUrls:
        database_url, redis_url = self.database_url, self.redis_url
        if database_url is None or redis_url is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._wait_for_stopping_owners()
            with self.state.locked() as state:
                if database_url is None:
                    database_url = self._start_postgres(state)
                if redis_url is None:
                    redis_url = self._start_redis(state)
        if self.database_url is None:
            ensure_database(database_url)
        return ServerUrls(
            database_url=database_url,
            redis_url=redis_url,
            embedded_postgres=self.database_url is None,
            embedded_redis=self.redis_url is None,
        )

    def _start_postgres(self, state: State) -> str:
        entry = state.server("postgres")
        port = self.postgres.running_port()
        if port is not None and (self.pg_port is None or port == self.pg_port):
            adopt = not state.owner_alive("postgres")
            note = " (adopted from a dead owner)" if adopt else ""
            log.info("reusing embedded PostgreSQL on port %s%s", port, note)
        else:
            port = _choose_port(entry.get("port"), self.pg_port)
            self.postgres.start(port)
            adopt = True
        self.owns_postgres = adopt
        state.set_owner("postgres", port, owned=adopt)
        return self.postgres.url(port, self.database_name)

    def _start_redis(self, state: State) -> str:
        entry = state.server("redis")
        pid = self.redis.running_pid()
        port = entry.get("port")
        owned_elsewhere = pid is not None and state.owner_alive("redis")
        if owned_elsewhere and isinstance(port, int) and redis_answers(port):
            log.info("reusing embedded Redis on port %s (owner pid %s)", port, entry["owner_pid"])
            return f"redis://{LOCALHOST}:{port}/0"
        if pid is not None:
            self.redis.stop_stale(pid)
        port = _choose_port(port, self.redis_port)
        self.redis.start(port)
        self.owns_redis = True
        state.set_owner("redis", port, owned=True)
        return f"redis://{LOCALHOST}:{port}/0"

    def _wait_for_stopping_owners(self, timeout: float = 60) -> None:
        # An owner that is shutting down will stop its servers: let it finish, then start ours
        # (reusing it would leave us with servers that vanish under us).
        self.state.load()
        for name in ("postgres", "redis"):
            entry = self.state.data.get(name) or {}
            if entry.get("stopping") and self.state.owner_alive(name):
                pid = int(entry["owner_pid"])
                log.info("waiting for pid %s to stop its embedded %s", pid, name)
                wait_for(lambda pid=pid: not pid_alive(pid), timeout, interval=0.1)  # type: ignore[misc]

    def begin_stop(self) -> None:
        """Tell other runs that this one is about to stop the servers it owns."""
        if not (self.owns_postgres or self.owns_redis):
            return
        with self.state.locked() as state:
            for name, owned in (("postgres", self.owns_postgres), ("redis", self.owns_redis)):
                if owned:
                    state.server(name)["stopping"] = True

    def close(self) -> None:
        """Stop the embedded servers this object started or adopted (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self.owns_redis:
            self.redis.stop()
        if self.owns_postgres:
            self.postgres.stop()
        if self.owns_redis or self.owns_postgres:
            with self.state.locked() as state:
                state.release("redis")
                state.release("postgres")


# --------------------------------------------------------------------------- test-runner command


def _print_urls(urls: ServerUrls, redis_db: int) -> None:
    redis_url = urls.redis_url.rsplit("/", 1)[0] + f"/{redis_db}"
    print(f"ASYNCZ_TEST_DATABASE_URL={urls.database_url}")
    print(f"ASYNCZ_TEST_REDIS_URL={redis_url}")


def _running_urls(data_dir: Path, database: str) -> ServerUrls | None:
    state = State(data_dir)
    state.load()
    pg_port = EmbeddedPostgres(data_dir).running_port()
    redis_port = state.server("redis").get("port")
    if (
        pg_port is None
        or EmbeddedRedis(data_dir).running_pid() is None
        or not isinstance(redis_port, int)
        or not redis_answers(redis_port)
    ):
        return None
    return ServerUrls(
        EmbeddedPostgres.url(pg_port, database), f"redis://{LOCALHOST}:{redis_port}/0", True, True
    )


def ensure(data_dir: Path, database: str, timeout: float = 120) -> ServerUrls:
    """Make sure embedded servers run on ``data_dir`` (reusing them), kept by a detached keeper."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    urls = _running_urls(data_dir, database)
    if urls is None:
        log_file = open(data_dir / "servers.log", "ab")  # noqa: SIM115 - handed to the child
        with log_file:
            keeper = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "asyncz.local.servers",
                    "serve",
                    "--data-dir",
                    str(data_dir),
                    "--database",
                    database,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while urls is None:
            if keeper.poll() is not None:
                tail = (data_dir / "servers.log").read_text(errors="replace")[-3000:]
                raise ServerError(f"server keeper exited with {keeper.returncode}:\n{tail}")
            if time.monotonic() > deadline:
                raise ServerError("embedded servers did not start in time")
            time.sleep(0.1)
            urls = _running_urls(data_dir, database)
    ensure_database(urls.database_url)
    return urls


def stop(data_dir: Path, timeout: float = 30) -> None:
    """Stop the embedded servers on ``data_dir``: ask their owners, then stop leftovers."""
    data_dir = data_dir.resolve()
    state = State(data_dir)
    state.load()
    owners = {
        int(state.server(name)["owner_pid"])
        for name in ("postgres", "redis")
        if state.owner_alive(name)
    }
    for pid in owners:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in owners:
        wait_for(lambda pid=pid: not pid_alive(pid), timeout)  # type: ignore[misc]
    redis = EmbeddedRedis(data_dir)
    stale = redis.running_pid()
    if stale is not None:
        redis.stop_stale(stale)
    EmbeddedPostgres(data_dir).stop()


def serve(data_dir: Path, database: str) -> None:
    """Keep embedded servers running until SIGTERM/SIGINT (the keeper behind ``ensure``)."""
    stop_event = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop_event.set())
    servers = LocalServers(data_dir, database_name=database)
    try:
        urls = servers.start()
        log.info("embedded servers ready: %s %s", urls.database_url, urls.redis_url)
        stop_event.wait()
    finally:
        servers.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asyncz.local.servers")
    parser.add_argument("command", choices=["ensure", "stop", "serve"])
    parser.add_argument("--data-dir", type=Path, default=Path(".asyncz/test-servers"))
    parser.add_argument("--database", default="test", help="database to create (default: test)")
    parser.add_argument("--redis-db", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    try:
        if args.command == "ensure":
            _print_urls(ensure(args.data_dir, args.database), args.redis_db)
        elif args.command == "stop":
            stop(args.data_dir)
        else:
            serve(args.data_dir, args.database)
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
