"""Port, process and database helpers shared by the local runner's servers and tests."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

LOCALHOST = "127.0.0.1"
PG_USER = "postgres"


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
        if stat_fields(pid)[0] == "Z":
            return False
    return True


def stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` is the state; the
    name may hold spaces); OSError when the process is gone, or where there is no ``/proc``."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_start_ticks(pid: int) -> int | None:
    """The process' start time (clock ticks since boot), to tell a reused pid from its owner."""
    try:
        return int(stat_fields(pid)[19])
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int, *, children: bool = False) -> float | None:
    """User + system CPU seconds of ``pid`` so far (with ``children``, also those of its
    children that ended and were waited for); None once it is gone, or where ``/proc`` does
    not say (not Linux)."""
    try:
        fields = stat_fields(pid)
        ticks = int(fields[11]) + int(fields[12])
        if children:
            ticks += int(fields[13]) + int(fields[14])
    except (OSError, IndexError, ValueError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


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


def pg_ctl_start_args(
    pgdata: Path,
    log_path: Path,
    port: int,
    socket_dir: Path,
    settings: dict[str, str] | None = None,
) -> list[str]:
    """``pg_ctl`` arguments that start a cluster on 127.0.0.1:``port`` and wait (60 s) until
    it accepts connections; ``settings`` become ``-c`` options."""
    options = f"-h {LOCALHOST} -p {port} -k {socket_dir}"
    options += "".join(f" -c {k}={v}" for k, v in (settings or {}).items())
    return ["-D", str(pgdata), "-w", "-t", "60", "-l", str(log_path), "-o", options, "start"]


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
