"""The overview chart's query (``finished_per_minute``) on 1,000,000 jobs and their attempts.

Two spreads of the same 1M jobs (one attempt each, plus a failed first try for 5%):
``day`` finished evenly over the last 24 h (~42k in the chart's hour) and ``burst`` all in
the last hour (1M/h). For each: the plan,
and the median time with the 0004 index and without it (dropped inside a transaction that
is rolled back: the same-run baseline). Also the write cost of the index on the hot path:
the worker's ``complete_jobs`` for 10,000 claimed jobs in batches of 100, with and without.

    ASYNCZ_BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/asyncz_bench_series \\
        .venv/bin/python -m tests.perf.bench_series
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

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
        SELECT id, 1, 'w', finished_at, finished_at,
               CASE WHEN status = 'dead' THEN 'failed' ELSE 'completed' END, 5
          FROM jobs
        UNION ALL
        SELECT id, 2, 'w', finished_at, finished_at, 'failed', 5 FROM jobs WHERE status = 'dead'
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


def complete_batches(conn: psycopg.Connection[Any], n: int = 10_000) -> float:
    """Submit, claim and complete ``n`` jobs 100 at a time with the worker's own statements
    (``claim_jobs``, ``complete_jobs``); only the completions are timed."""
    ids = [
        r[0]
        for r in conn.execute(
            """INSERT INTO jobs (id, task, payload, timeout_seconds)
               SELECT gen_random_uuid(), 'echo', '{}'::jsonb, 30 FROM generate_series(1, %s)
               RETURNING id""",
            (n,),
        ).fetchall()
    ]
    total = 0.0
    for i in range(0, n, 100):
        leases = conn.execute(
            QUERIES["claim_jobs"], {"ids": ids[i : i + 100], "worker_id": "w", "max_timeout": 60}
        ).fetchall()
        args = {
            "ids": [r[0] for r in leases],
            "tokens": [r[1] for r in leases],
            "results": [Jsonb({"ok": True}) for _ in leases],
        }
        start = time.perf_counter()
        conn.execute(QUERIES["complete_jobs"], args)
        total += time.perf_counter() - start
    return total * 1000


def main() -> None:
    print(machine())
    prepare()
    with psycopg.connect(DB, autocommit=True) as conn:
        for name, spread in SPREADS.items():
            fill(conn, spread)
            in_hour = conn.execute(
                "SELECT count(*) FROM job_attempts WHERE finished_at > now() - interval '1 hour'"
            ).fetchone()
            with_index, minutes = timed(conn)
            print(
                f"\n== {name}: {ROWS:,} jobs over {spread}; attempts in the last hour: "
                f"{in_hour[0] if in_hour else '?':,}"
            )
            print(plan(conn))
            with conn.transaction(force_rollback=True):
                conn.execute("DROP INDEX job_attempts_finished_idx")
                without, _ = timed(conn)
                print("-- without the 0004 index:\n" + plan(conn))
            print(
                f"{name}: median of {RUNS}: {with_index:.1f} ms with the index, "
                f"{without:.1f} ms without ({without / with_index:.1f}x); {minutes} minutes"
            )
        rounds = []
        for _ in range(3):  # alternating, so drift in the machine's load hits both
            # both in a transaction that is rolled back: the same commits (none) on each side
            with conn.transaction(force_rollback=True):
                with_idx = complete_batches(conn)
            with conn.transaction(force_rollback=True):
                conn.execute("DROP INDEX job_attempts_finished_idx")
                without_idx = complete_batches(conn)
            rounds.append((with_idx, without_idx))
            print(
                f"completing 10,000 jobs in batches of 100: {with_idx:.0f} ms with the index, "
                f"{without_idx:.0f} ms without ({with_idx / without_idx:.2f}x)"
            )
        ratio = statistics.median(w / wo for w, wo in rounds)
        print(f"completion with the index / without, median of 3 rounds: {ratio:.2f}x")


if __name__ == "__main__":
    main()
