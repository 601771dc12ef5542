"""The jobs ledger read straight from PostgreSQL: rows of a query, jobs counted by status."""

from __future__ import annotations

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
