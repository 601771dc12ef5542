"""The jobs ledger read straight from PostgreSQL: rows of a query, jobs counted by status, and
the invariants every chaos scenario ends with (:func:`check_ledger`)."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg.rows import dict_row


def rows(pg_url: str, sql: Any, params: Any = None) -> list[dict[str, Any]]:
    with psycopg.connect(pg_url, autocommit=True, row_factory=dict_row) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def status_counts(pg_url: str) -> dict[str, int]:
    return {
        r["status"]: r["n"]
        for r in rows(pg_url, "SELECT status, count(*) AS n FROM jobs GROUP BY status")
    }


TERMINAL = ("completed", "dead", "cancelled")
SUCCEEDING = ("echo", "sleep", "flaky")  # built-in tasks that end completed unless killed


LEDGER_SQL = """
SELECT j.id::text AS id, j.task, j.status, j.attempts, j.max_retries, j.last_error,
       count(a.*) AS attempt_rows,
       count(a.*) FILTER (WHERE a.outcome = 'completed') AS completed_rows,
       count(a.*) FILTER (WHERE a.outcome = 'lost') AS lost_rows,
       count(a.*) FILTER (WHERE a.outcome IS NULL OR a.finished_at IS NULL) AS open_rows,
       coalesce(max(a.attempt), 0) AS max_attempt,
       coalesce(array_agg(a.outcome ORDER BY a.attempt)
                FILTER (WHERE a.job_id IS NOT NULL), '{}') AS outcomes
  FROM jobs j LEFT JOIN job_attempt_history a ON a.job_id = j.id
 GROUP BY j.id
"""


# A waiting job none of whose parents is live: nothing would ever release it.
STRANDED_SQL = """
SELECT c.id::text AS id FROM jobs c
 WHERE c.status = 'waiting'
   AND NOT EXISTS (SELECT 1 FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id
                    WHERE d.child_id = c.id AND p.status IN ('waiting', 'queued', 'processing'))
"""


def ledger(db_url: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in rows(db_url, LEDGER_SQL)}


def non_terminal(db_url: str) -> int:
    found = rows(
        db_url, "SELECT count(*) AS n FROM jobs WHERE status <> ALL(%s)", (list(TERMINAL),)
    )
    return int(found[0]["n"])


def stats_counts(db_url: str) -> dict[tuple[str, str], int]:
    """What GET /stats counts per queue and status: the counts the recovery loop folded,
    the rows finished since, the live statuses from their indexes."""
    from asyncz.store.queries import QUERIES

    with psycopg.connect(db_url, autocommit=True) as conn:
        [mark] = conn.execute(QUERIES["get_fold_mark"]).fetchone() or [None]
        out = conn.execute(QUERIES["count_by_status"], {"folded_to": mark}).fetchall()
    return {(q, s): int(n) for q, s, n in out if n}


def table_counts(db_url: str) -> dict[tuple[str, str], int]:
    got = rows(db_url, "SELECT queue, status, count(*) AS n FROM jobs GROUP BY queue, status")
    return {(r["queue"], r["status"]): int(r["n"]) for r in got}


def check_ledger(db_url: str, submitted: list[str]) -> dict[str, Any]:
    """The invariants every scenario ends with; returns outcome totals for further checks."""
    stranded = rows(db_url, STRANDED_SQL)
    assert not stranded, f"waiting jobs whose parents have all finished: {stranded[:5]}"
    book = ledger(db_url)
    missing = set(submitted) - set(book)
    assert not missing, f"{len(missing)} submitted jobs have no row: {sorted(missing)[:5]}"
    assert set(book) == set(submitted), "rows exist that nobody submitted"
    problems: list[str] = []
    totals: dict[str, int] = {}
    for job in book.values():
        outcomes = list(job["outcomes"])
        for o in outcomes:
            totals[o] = totals.get(o, 0) + 1
        where = f"{job['id']} ({job['task']}, {job['status']}, {outcomes})"
        if job["status"] not in TERMINAL:
            problems.append(f"not terminal: {where}")
        if job["completed_rows"] > 1:
            problems.append(f"completed twice: {where}")
        if (job["status"] == "completed") != (job["completed_rows"] == 1):
            problems.append(f"status and attempt log disagree: {where}")
        if job["attempt_rows"] != job["attempts"] or job["max_attempt"] != job["attempts"]:
            problems.append(f"attempts={job['attempts']} but {job['attempt_rows']} rows: {where}")
        if job["open_rows"]:
            problems.append(f"attempt left open: {where}")
        if job["status"] == "completed" and outcomes[-1] != "completed":
            problems.append(f"completed job's last attempt is not: {where}")
        ended_by_parent = (job["last_error"] or "").startswith("parent_failed: ")
        if ended_by_parent and job["attempts"]:
            problems.append(f"ran before its parent failed: {where}")
        if (job["status"] == "dead" and not ended_by_parent
                and job["attempts"] != job["max_retries"] + 1):  # fmt: skip
            problems.append(f"dead before its retries ran out: {where}")
        if job["task"] == "fail" and job["status"] != "dead":
            problems.append(f"an always-failing job did not end dead: {where}")
        if (job["task"] in SUCCEEDING and job["status"] == "dead" and "lost" not in outcomes
                and not ended_by_parent):  # fmt: skip
            problems.append(f"a job that should succeed died without a loss: {where}")
    assert not problems, f"{len(problems)} ledger problems:\n" + "\n".join(problems[:20])
    assert stats_counts(db_url) == table_counts(db_url), "GET /stats' counts drifted"
    by_status: dict[str, int] = {}
    for job in book.values():
        by_status[job["status"]] = by_status.get(job["status"], 0) + 1
    return {"status": by_status, "outcomes": totals, "jobs": book}


def wait_terminal(db_url: str, n: int, timeout: float, what: str = "every job terminal") -> None:
    deadline = time.monotonic() + timeout
    left = -1
    while time.monotonic() < deadline:
        left = non_terminal(db_url)
        if left == 0 and rows(db_url, "SELECT count(*) AS n FROM jobs")[0]["n"] >= n:
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}: {left} left")
