"""Shared helpers for the benchmarks: environment, percentiles, a fresh database state."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from datetime import UTC, datetime

import psycopg
import redis

from asyncz.store.migrations import apply_migrations

DB = os.environ.get("ASYNCZ_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/asyncz_bench")
REDIS = os.environ.get("ASYNCZ_BENCH_REDIS_URL", "redis://127.0.0.1:6379/4")
API_KEY = "bench-key-0123456789abcdef"


def prepare() -> None:
    """Create and migrate the bench database; empty it and the bench Redis db."""
    admin = psycopg.conninfo.make_conninfo(DB, dbname="postgres")
    name = psycopg.conninfo.conninfo_to_dict(DB)["dbname"]
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (name,)).fetchone():
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(str(name))))
    apply_migrations(DB)
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs, job_attempts")
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
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    pg = subprocess.run(["psql", "--version"], capture_output=True, text=True).stdout.strip()
    return (f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
            f"{pg or 'PostgreSQL ?'}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
