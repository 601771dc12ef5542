"""The overview chart's query (``finished_per_minute``) on 1,000,000 jobs and their attempts.

Two spreads of the same 1M jobs (one attempt each, plus a failed first try for 5%):
``day`` finished evenly over the last 24 h (~42k in the chart's hour) and ``burst`` all in
the last hour (1M/h). A completed attempt is its job's row (``job_attempt_history``); the
attempts that did not complete are rows of ``job_attempts``. For each spread: the plan, and
the median time with the indexes the query reads (``jobs_finished_idx``, the 0004 index)
and without them (dropped inside a transaction that is rolled back: the same-run baseline).

    ASYNCZ_BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/asyncz_bench_series \\
        .venv/bin/python -m tests.perf.bench_series
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg

from asyncz.store.queries import QUERIES
from tests.perf.common import DB, machine, prepare

ROWS = 1_000_000
RUNS = 7
SPREADS = {"day": "24 hours", "burst": "1 hour"}


def fill(conn: psycopg.Connection[Any], spread: str) -> None:
    conn.execute("TRUNCATE jobs, job_steps, job_gathers, job_attempts, job_dependencies")
    conn.execute(
        """
        INSERT INTO jobs (id, task, payload, queue, status, attempts, max_retries,
                          created_at, started_at, finished_at, updated_at)
        SELECT gen_random_uuid(), 'echo', '{}'::jsonb, 'default',
               CASE WHEN i %% 20 = 0 THEN 'dead' ELSE 'completed' END,
               CASE WHEN i %% 20 = 0 THEN 2 ELSE 1 END, 1, t, t, t, t
          FROM (SELECT i, now() - random() * %s::interval AS t
                  FROM generate_series(1, %s) i) s
        """,
        (spread, ROWS),
    )
    conn.execute(
        """
        INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, finished_at,
                                  outcome, duration_ms)
        SELECT id, a, 'w', finished_at, finished_at, 'failed', 5
          FROM jobs, generate_series(1, 2) a WHERE status = 'dead'
        """
    )
    conn.execute("VACUUM ANALYZE jobs")
    conn.execute("VACUUM ANALYZE job_attempts")


def timed(conn: psycopg.Connection[Any]) -> tuple[float, int]:
    times = []
    rows = 0
    for _ in range(RUNS):
        start = time.perf_counter()
        rows = len(conn.execute(QUERIES["finished_per_minute"], {"minutes": 60}).fetchall())
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), rows


def plan(conn: psycopg.Connection[Any]) -> str:
    sql = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + QUERIES["finished_per_minute"]
    return "\n".join(r[0] for r in conn.execute(sql, {"minutes": 60}).fetchall())


def main() -> None:
    print(machine())
    prepare()
    with psycopg.connect(DB, autocommit=True) as conn:
        for name, spread in SPREADS.items():
            fill(conn, spread)
            in_hour = conn.execute(
                "SELECT count(*) FROM job_attempt_history"
                " WHERE finished_at > now() - interval '1 hour'"
            ).fetchone()
            with_index, minutes = timed(conn)
            print(
                f"\n== {name}: {ROWS:,} jobs over {spread}; attempts in the last hour: "
                f"{in_hour[0] if in_hour else '?':,}"
            )
            print(plan(conn))
            with conn.transaction(force_rollback=True):
                conn.execute("DROP INDEX job_attempts_finished_idx")
                conn.execute("DROP INDEX jobs_finished_idx")
                without, _ = timed(conn)
                print("-- without jobs_finished_idx and the 0004 index:\n" + plan(conn))
            print(
                f"{name}: median of {RUNS}: {with_index:.1f} ms with the indexes, "
                f"{without:.1f} ms without ({without / with_index:.1f}x); {minutes} minutes"
            )


if __name__ == "__main__":
    main()
