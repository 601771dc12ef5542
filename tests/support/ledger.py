"""Helpers for engine integration tests: worker processes, ledger queries, waiting."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.rows import dict_row

from asyncz.settings import Settings
from tests.support.workers import start_worker


def start_worker_process(
    settings: Settings,
    *,
    idle_exit: float = 0,
    seconds: float = 600,
    concurrency: int | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    return start_worker(
        settings, idle_exit=idle_exit, seconds=seconds, concurrency=concurrency, env=extra_env
    )


def rows(pg_url: str, sql: Any, params: Any = None) -> list[dict[str, Any]]:
    with psycopg.connect(pg_url, autocommit=True, row_factory=dict_row) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 60.0,
    interval: float = 0.1,
    what: str = "condition",
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def status_counts(pg_url: str) -> dict[str, int]:
    return {
        r["status"]: r["n"]
        for r in rows(pg_url, "SELECT status, count(*) AS n FROM jobs GROUP BY status")
    }


def stop_process(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    if proc.poll() is None:
        proc.terminate()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
    return f"{out}\n{err}"
