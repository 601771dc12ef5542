"""Shared helpers for the benchmarks: environment, percentiles, a fresh database state."""

from __future__ import annotations

import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime

import psycopg
import redis

from asyncz.store.migrations import apply_migrations

DB = os.environ.get(
    "ASYNCZ_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/asyncz_bench"
)
DB_NAME = str(psycopg.conninfo.conninfo_to_dict(DB)["dbname"])
REDIS = os.environ.get("ASYNCZ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/4")
API_KEY = "bench-key-0123456789abcdef"
JOB_TABLES = ("jobs", "job_steps", "job_gathers", "job_attempts", "job_dependencies")
SIDE_TABLES = ("job_outbox", "job_count_changes", "job_live_counts", "webhooks")
EXISTING = "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL"


def prepare() -> None:
    """Create and migrate the bench database; empty it and the bench Redis db.

    Every table a run writes starts empty, with no dead rows: the outbox (an ``asyncz dev``
    stopped at the last finish leaves events unpublished, which the next run's events
    function would publish inside its window), the count changes, and the webhooks (a
    ``--dead-webhook`` round's would outlive it). Bench servers may run without autovacuum,
    so a table emptied by ``DELETE`` would keep its dead rows for every later scan."""
    admin = psycopg.conninfo.make_conninfo(DB, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (DB_NAME,)).fetchone():
            conn.execute(
                psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(DB_NAME))
            )
    apply_migrations(DB)
    with psycopg.connect(DB, autocommit=True) as conn:
        # the side tables after jobs: its TRUNCATE trigger empties the live counts with a DELETE
        for tables, tail in ((JOB_TABLES, ""), (SIDE_TABLES, " CASCADE")):
            # only those the schema has: an older checkout's (compare_trees --bench-from-after)
            have = [t for (t,) in conn.execute(EXISTING, (list(tables),))]
            if have:
                names = psycopg.sql.SQL(", ").join(map(psycopg.sql.Identifier, have))
                conn.execute(psycopg.sql.SQL("TRUNCATE {}" + tail).format(names))
        conn.execute("VACUUM ANALYZE jobs")
    redis.Redis.from_url(REDIS).flushdb()


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary(latencies_ms: list[float], seconds: float) -> dict[str, float]:
    return {
        "n": len(latencies_ms),
        "rps": len(latencies_ms) / seconds if seconds else 0.0,
        "p50": pct(latencies_ms, 50),
        "p95": pct(latencies_ms, 95),
        "p99": pct(latencies_ms, 99),
        "mean": statistics.fmean(latencies_ms) if latencies_ms else float("nan"),
    }


def machine() -> str:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    pg = subprocess.run(["psql", "--version"], capture_output=True, text=True).stdout.strip()
    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"{pg or 'PostgreSQL ?'}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


# --- shared by the processing, latency, memory and HTTP benchmarks -------------------------

PREFIX = "bench"  # Redis key prefix of every benchmark (db 4)


def bench_env(**extra: str) -> dict[str, str]:
    """The environment a benchmark's worker/api process runs with (quiet, no AWS calls)."""
    from asyncz.connections import hash_api_key

    env = dict(os.environ)
    env.update(
        {
            "ASYNCZ_DATABASE_URL": DB,
            "ASYNCZ_REDIS_URL": REDIS,
            "ASYNCZ_REDIS_PREFIX": PREFIX,
            "ASYNCZ_API_KEY_HASHES": hash_api_key(API_KEY),
            "ASYNCZ_WAKE_WORKER": "false",
            "ASYNCZ_PUBLISH_GAUGES": "false",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            # an api sandbox serves one request at a time: one connection; 64 clients × 2 would
            # exhaust the shared server's max_connections=100 (workers take max(this, 3))
            "ASYNCZ_DB_POOL_MAX": os.environ.get("ASYNCZ_DB_POOL_MAX", "1"),
        }
    )
    env.update(extra)
    return env


def ready_key(queue: str = "default") -> str:
    return f"{PREFIX}:{{{queue}}}:ready"


def load_backlog(n: int, task: str = "echo", payload: str = '{"n": 1}') -> float:
    """Insert ``n`` queued jobs with ONE multi-row INSERT and enqueue their ids with pipelined
    ZADDs (not through the API); returns the seconds it took."""
    import time

    t = time.perf_counter()
    enqueue_backlog(insert_backlog(n, task, payload))
    return time.perf_counter() - t


def insert_backlog(n: int, task: str = "echo", payload: str = '{"n": 1}') -> list[str]:
    """Insert ``n`` queued jobs with ONE multi-row INSERT; returns their ids (not enqueued)."""
    import uuid

    ids = [str(uuid.uuid4()) for _ in range(n)]
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (id, task, payload)"
            " SELECT i, %s, %s::jsonb FROM unnest(%s::uuid[]) AS i",
            (task, payload, ids),
        )
        conn.execute("ANALYZE jobs")
    return ids


def enqueue_backlog(ids: list[str]) -> None:
    """Put inserted jobs on the default queue's ready set with pipelined ZADDs."""
    import time

    from asyncz.broker.keys import ready_score

    r = redis.Redis.from_url(REDIS)
    ms = int(time.time() * 1000)
    with r.pipeline(transaction=False) as pipe:
        for k in range(0, len(ids), 1000):
            pipe.zadd(ready_key(), {i: ready_score(0, ms + k) for i in ids[k : k + 1000]})
        pipe.sadd(f"{PREFIX}:queues", "default")
        pipe.execute()


def wait_completed(jobs: int, timeout: float = 120.0) -> None:
    """Until ``jobs`` jobs are completed in Postgres (polled every 0.1 s)."""
    import time

    end = time.monotonic() + timeout
    done = 0
    with psycopg.connect(DB, autocommit=True) as conn:
        while time.monotonic() < end:
            row = conn.execute("SELECT count(*) FROM jobs WHERE status = 'completed'").fetchone()
            done = row[0] if row else 0
            if done >= jobs:
                return
            time.sleep(0.1)
    raise SystemExit(f"only {done} of {jobs} jobs completed in {timeout:.0f} s")


def command(module: str, argv: list[str]) -> str:
    """The exact command line that reproduces a run (printed beside its figures)."""
    return " ".join([".venv/bin/python", "-m", module, *argv])


def load_line() -> str:
    """Load averages at the moment of measuring: the machine is shared, say how busy it was."""
    try:
        with open("/proc/loadavg") as avg:
            one, five, fifteen = avg.read().split()[:3]
    except OSError:
        return "load average ?"
    return f"load average {one}/{five}/{fifteen} (1/5/15 min) on {os.cpu_count()} cores"


# --- the one ``asyncz dev`` launcher of the benchmarks ------------------------------------

# The fleet and recovery pushed out to an hour and one worker at most: nothing drains the
# queue or competes for the CPU while a submit benchmark measures.
NOTHING_DRAINS = {
    "ASYNCZ_FLEET_INTERVAL_SECONDS": "3600",
    "ASYNCZ_RECOVERY_INTERVAL_SECONDS": "3600",
    "ASYNCZ_FLEET_MAX_WORKERS": "1",
}


def start_dev(
    port: int,
    log_path: str,
    *,
    args: Sequence[str] = ("--quiet",),
    dev_defaults: bool = False,
    settle: float = 0.0,
    **variables: str,
) -> subprocess.Popen[bytes]:
    """``asyncz dev --port PORT *args`` on the bench servers with ``API_KEY`` and a fresh data
    dir, logging to ``log_path``, returned once every api sandbox is warm and ``settle``
    seconds more (time for the fleet's first tick, at start, to see an empty queue).

    The environment is the benchmarks' own (:func:`bench_env`: no wake-on-submit, no gauges,
    no Powertools) or, with ``dev_defaults``, ``asyncz dev``'s defaults (no ``ASYNCZ_`` or
    ``POWERTOOLS_`` variable of this process passed on); ``variables`` are set last."""
    if dev_defaults:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ASYNCZ_", "POWERTOOLS_"))}
        env.update(ASYNCZ_DATABASE_URL=DB, ASYNCZ_REDIS_URL=REDIS)
    else:
        env = bench_env()
    env.update(
        ASYNCZ_DEV_API_KEY=API_KEY,
        ASYNCZ_DEV_DATA_DIR=tempfile.mkdtemp(prefix="asyncz-bench-dev-"),
        **variables,
    )
    proc = launch_dev(port, list(args), env, log_path)
    time.sleep(settle)
    return proc


def launch_dev(
    port: int, args: list[str], env: dict[str, str], log_path: str
) -> subprocess.Popen[bytes]:
    """``asyncz dev --port PORT *args`` in ``env`` logging to ``log_path``, once every api
    sandbox is warm (:func:`start_dev` builds the environment)."""
    argv = [sys.executable, "-m", "asyncz", "dev", "--port", str(port), *args]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    return wait_ready(proc, port, log_path)


def wait_ready(proc: subprocess.Popen[bytes], port: int, log_path: str) -> subprocess.Popen[bytes]:
    """``proc`` (an ``asyncz dev``) once every api sandbox is warm; exits the benchmark
    naming the log when it dies or is not ready in 120 s."""
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"asyncz dev exited with {proc.returncode}; see {log_path}")
        try:
            # the front serves once ONE sandbox is up; the rest initialise behind it
            # (seconds of CPU each): measure only once all of them are warm
            with (
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r,
                open(log_path) as f,
            ):
                if r.status == 200 and "api sandboxes ready" in f.read():  # human or JSON
                    return proc
        except OSError:
            pass
        time.sleep(0.3)
    stop_dev(proc)
    raise SystemExit(f"asyncz dev was not ready in 120 s; see {log_path}")


def stop_dev(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
