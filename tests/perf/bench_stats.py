"""GET /stats' counts and GET /jobs' task/queue filters on the 1,000,000-row table of
``tests/integration/test_recovery_scale.py`` (run it first: it builds the table), each
beside the whole-table query it replaced, in the same run (median of ``--rounds``).
``--backlog N``: instead, a database of its own holding N delayed queued jobs (a day out),
each query beside the one that counted and listed the backlog through its partial indexes.

    .venv/bin/python -m pytest tests/integration/test_recovery_scale.py -q
    .venv/bin/python -m tests.perf.bench_stats --rounds 5
    .venv/bin/python -m tests.perf.bench_stats --rounds 5 --backlog 1000000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg

from asyncz.store.migrations import apply_migrations
from asyncz.store.queries import QUERIES
from tests.perf.common import command, load_line, machine
from tests.support.databases import ensure_database, sibling_url
from tests.support.plans import reads

# What GET /stats and GET /jobs?task= ran before: a scan of the whole table.
OLD_COUNTS = "SELECT queue, status, count(*)::bigint AS n FROM jobs GROUP BY queue, status"
OLD_LIST = """SELECT * FROM jobs
 WHERE (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(task)s::text IS NULL OR task = %(task)s)
 ORDER BY created_at DESC, id DESC LIMIT %(limit)s"""
# What they ran before the live counts and the backlog's indexes (migration 0013): the live
# statuses counted from their partial indexes, the live jobs listed through them.
OLD_LIVE_COUNTS = " UNION ALL ".join(
    f"(SELECT queue, status, count(*) FROM jobs WHERE status = '{s}' GROUP BY queue, status)"
    for s in ("waiting", "queued", "processing", "dead")
)
OLD_LIVE_LIST = """SELECT * FROM jobs
 WHERE (status = 'waiting' OR status = 'queued' OR status = 'processing')
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(task)s::text IS NULL OR task = %(task)s)
 ORDER BY created_at DESC, id DESC LIMIT %(limit)s"""
BACKLOG = """INSERT INTO jobs (id, task, status, run_at, created_at)
SELECT gen_random_uuid(), 'echo', 'queued', now() + interval '1 day', clock_timestamp()
  FROM generate_series(1, %(n)s)"""


def timed(fn: Callable[[], Any], rounds: int) -> float:
    fn()  # warm the cache
    took = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        took.append(time.perf_counter() - t)
    return statistics.median(took) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--backlog", type=int, default=0, help="N delayed jobs in a database of its own"
    )
    args = ap.parse_args()
    if args.backlog:
        backlog(args.backlog, args.rounds)
        return
    url = sibling_url("scale")
    with psycopg.connect(url, autocommit=True) as conn:
        total = conn.execute("SELECT count(*) FROM jobs").fetchone()
        print(
            f"# GET /stats and GET /jobs filters on {total[0] if total else 0:,} rows — {machine()}"
        )
        print(f"# {load_line()}")
        print(f"# command: {command('tests.perf.bench_stats', sys.argv[1:])}")
        mark = conn.execute(QUERIES["get_fold_mark"]).fetchone()
        params = {"status": None, "queue": None, "task": "no-such-task", "limit": 50,
                  "after_created": None, "after_id": None}  # fmt: skip

        def run(sql: str, values: dict[str, Any] | None = None) -> None:
            conn.execute(sql, values, prepare=False).fetchall()  # type: ignore[call-overload]

        cases = [
            ("per-status counts", lambda: run(OLD_COUNTS),
             lambda: run(QUERIES["count_by_status"], {"folded_to": mark[0] if mark else None})),
            ("?task= matching nothing", lambda: run(OLD_LIST, params),
             lambda: run(QUERIES["list_jobs_by_task_or_queue"], params)),
            ("?queue= matching nothing", lambda: run(OLD_LIST, params | {
                "task": None, "queue": "no-such-queue"}),
             lambda: run(QUERIES["list_jobs_by_task_or_queue"], params | {
                 "task": None, "queue": "no-such-queue"})),
        ]  # fmt: skip
        print("| query | whole-table query, ms | now, ms | ratio |")
        print("|---|---|---|---|")
        for name, old, new in cases:
            before, after = timed(old, args.rounds), timed(new, args.rounds)
            print(f"| {name} | {before:.1f} | {after:.2f} | {before / after:.0f}× |", flush=True)


def backlog(n: int, rounds: int) -> None:
    url = sibling_url("backlog")
    ensure_database(url)
    apply_migrations(url)
    with psycopg.connect(url, autocommit=True) as conn:
        held = conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()
        if (held[0] if held else 0) != n:  # else reuse the backlog of an earlier run
            conn.execute("TRUNCATE jobs CASCADE")
            conn.execute("SET synchronous_commit = off")
            conn.execute(BACKLOG, {"n": n})
            conn.execute("VACUUM ANALYZE jobs")
        print(f"# GET /stats and GET /jobs filters with {n:,} delayed jobs queued — {machine()}")
        print(f"# {load_line()}")
        print(f"# command: {command('tests.perf.bench_stats', sys.argv[1:])}")
        mark = conn.execute(QUERIES["get_fold_mark"]).fetchone()
        counts = {"folded_to": mark[0] if mark else None}
        nope = {"status": None, "queue": None, "task": "nope", "limit": 1,
                "after_created": None, "after_id": None}  # fmt: skip

        def run(sql: str, values: dict[str, Any] | None = None) -> None:
            conn.execute(sql, values, prepare=False).fetchall()  # type: ignore[call-overload]

        cases = [
            ("per-status counts", OLD_LIVE_COUNTS, {}, "count_by_status", counts),
            ("?task= matching nothing", OLD_LIVE_LIST, nope, "list_jobs_by_task_or_queue", nope),
            ("?queue= matching nothing", OLD_LIVE_LIST, nope | {"task": None, "queue": "nope"},
             "list_jobs_by_task_or_queue", nope | {"task": None, "queue": "nope"}),
        ]  # fmt: skip
        print("| query | before, ms | now, ms | ratio | now: rows / buffers read |")
        print("|---|---|---|---|---|")
        for label, old, old_params, name, params in cases:
            with conn.transaction(force_rollback=True):  # the schema before: no backlog indexes
                conn.execute("DROP INDEX jobs_task_backlog_idx, jobs_queue_backlog_idx")
                before = timed(lambda o=old, p=old_params: run(o, p), rounds)  # type: ignore[misc]
            after = timed(lambda q=QUERIES[name], p=params: run(q, p), rounds)  # type: ignore[misc]
            now = reads(conn, name, params)
            print(f"| {label} | {before:.1f} | {after:.2f} | {before / after:.0f}× "
                  f"| {now['rows']} / {now['buffers']} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
