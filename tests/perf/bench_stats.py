"""GET /stats' counts and GET /jobs' task/queue filters on the 1,000,000-row table of
``tests/integration/test_recovery_scale.py`` (run it first: it builds the table), each
beside the whole-table query it replaced, in the same run (median of ``--rounds``).

    .venv/bin/python -m pytest tests/integration/test_recovery_scale.py -q
    .venv/bin/python -m tests.perf.bench_stats --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg

from asyncz.store.queries import QUERIES
from tests.perf.common import command, load_line, machine
from tests.support.databases import sibling_url

# What GET /stats and GET /jobs?task= ran before: a scan of the whole table.
OLD_COUNTS = "SELECT queue, status, count(*)::bigint AS n FROM jobs GROUP BY queue, status"
OLD_LIST = """SELECT * FROM jobs
 WHERE (%(status)s::text IS NULL OR status = %(status)s)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s)
   AND (%(task)s::text IS NULL OR task = %(task)s)
 ORDER BY created_at DESC, id DESC LIMIT %(limit)s"""


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
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
