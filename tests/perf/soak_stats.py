"""What the soak benchmark reads about the system it loads: the tables' and indexes' sizes,
dead tuples and autovacuum runs from PostgreSQL's statistics, and the resident memory of
every process (``asyncz dev`` and its sandboxes, PostgreSQL's, Redis) from ``/proc``."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import psycopg

from tests.perf.proc_reader import stat_fields

TABLES = ("jobs", "job_attempts")
SANDBOX_MODULE = "asyncz.local.lambda_.bootstrap"

TABLE_STATS = """
SELECT relname,
       pg_table_size(relid) AS heap, pg_indexes_size(relid) AS indexes,
       n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count,
       n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
  FROM pg_stat_user_tables WHERE relname = ANY(%s)
"""


def box_cpu() -> dict[str, int]:
    """The whole machine's CPU time so far (``/proc/stat``, in ticks): busy, stolen by the
    host, and all. Per window it tells a box that got slower (steal, other load) from an
    engine that spends more a job."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return {"busy": user + nice + system + irq + softirq, "steal": steal, "all": sum(ticks)}


def table_stats(conn: psycopg.Connection[Any]) -> dict[str, dict[str, int]]:
    """Per table: heap (with TOAST) and index bytes, live and dead tuples, and the cumulative
    counters (autovacuum and autoanalyze runs, inserts, updates, HOT updates, deletes)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = conn.execute(TABLE_STATS, (list(TABLES),)).fetchall()
    keys = (
        "heap",
        "indexes",
        "live",
        "dead",
        "autovacuum",
        "autoanalyze",
        "ins",
        "upd",
        "hot",
        "del",
    )
    return {row[0]: dict(zip(keys, (int(v) for v in row[1:]), strict=True)) for row in rows}


def index_sizes(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Each index of the two tables and its bytes."""
    rows = conn.execute(
        "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes"
        " WHERE relname = ANY(%s)",
        (list(TABLES),),
    ).fetchall()
    return {name: int(size) for name, size in rows}


def _stat_ppid(pid: int) -> int:
    return int(stat_fields(pid)[1])


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB without shared memory (0 when it is gone): a
    PostgreSQL backend's resident shared buffers grow as it touches them, and are not its."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "RssShmem:")):
                fields[line.split(":")[0]] = int(line.split()[1])
    return (fields.get("VmRSS", 0) - fields.get("RssShmem", 0)) / 1024


def cmdline(pid: int) -> list[str]:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    return []


def children_of(root: int) -> list[int]:
    """Every process under ``root`` (children, grandchildren...)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents[int(entry.name)] = _stat_ppid(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found.extend(kids)
        frontier.extend(kids)
    return found


def sandbox_name(pid: int) -> str | None:
    """The local Lambda sandbox's name (``api-2``, ``worker-7``, ``recovery-1``), or None."""
    argv = cmdline(pid)
    return argv[-1] if SANDBOX_MODULE in argv else None


def worker_sandboxes(dev_pid: int) -> list[int]:
    return [p for p in children_of(dev_pid) if (sandbox_name(p) or "").startswith("worker-")]


def rss_by_role(dev_pid: int, pg_pids: list[int], redis_pid: int | None) -> dict[str, float]:
    """RSS in MB by role: ``asyncz dev`` itself, each api sandbox, the largest worker sandbox
    (they come and go), recovery, fleet, the largest PostgreSQL process and Redis."""
    out: dict[str, float] = {"asyncz dev": rss_mb(dev_pid)}
    for pid in children_of(dev_pid):
        name = sandbox_name(pid)
        if name is None:
            continue
        role = name if name.startswith("api-") else name.rsplit("-", 1)[0]
        out[role] = max(out.get(role, 0.0), rss_mb(pid))
    out["postgres (largest)"] = max((rss_mb(p) for p in pg_pids), default=0.0)
    if redis_pid is not None:
        out["redis"] = rss_mb(redis_pid)
    return out
