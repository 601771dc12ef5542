"""What a query reads, from its plan: ``EXPLAIN (ANALYZE, BUFFERS)`` of a named query run
unprepared (bound on the client, as the store runs its listings and counts)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg

from asyncz.store.queries import QUERIES


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def reads(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> dict[str, int]:
    """``{"rows": rows out of every plan node, "buffers": shared blocks hit or read}`` of
    the named query with ``params``; no time (a test never asserts one)."""
    cur = psycopg.ClientCursor(conn)
    cur.execute("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) " + QUERIES[name], params)
    plan = cur.fetchone()[0][0]["Plan"]  # type: ignore[index]
    rows = sum(int(n["Actual Rows"] * n["Actual Loops"]) for n in _nodes(plan))
    return {"rows": rows, "buffers": plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]}
