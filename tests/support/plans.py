"""What a query reads, from its plan: ``EXPLAIN (ANALYZE, BUFFERS)`` of a named query run
unprepared (bound on the client, as the store runs its listings and counts); and the plan of
a named query prepared, as a warm worker runs it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg

from asyncz.store.queries import QUERIES


def reads(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> dict[str, int]:
    """``{"rows": rows out of every plan node, "buffers": shared blocks hit or read}`` of
    the named query with ``params``; no time (a test never asserts one)."""
    cur = psycopg.ClientCursor(conn)
    cur.execute("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) " + QUERIES[name], params)
    plan = cur.fetchone()[0][0]["Plan"]  # type: ignore[index]
    rows = sum(int(n["Actual Rows"] * n["Actual Loops"]) for n in plan_nodes(plan))
    return {"rows": rows, "buffers": plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]}


_PARAM = re.compile(r"%\((\w+)\)s")


def prepared_plan(
    conn: psycopg.Connection[Any], name: str, params: dict[str, Any], mode: str
) -> Any:
    """EXPLAIN the named query as a prepared statement, the way a warm worker runs it, under
    ``plan_cache_mode`` ``mode`` (custom = planned for these values; generic = for any)."""
    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    sql = _PARAM.sub(number, QUERIES[name]).replace("%%", "%")  # as psycopg sends it
    stmt = f"plan_{name}"
    conn.execute(f"SET plan_cache_mode = {mode}")
    conn.execute(f"PREPARE {stmt} AS {sql}")
    try:
        cur = psycopg.ClientCursor(conn)
        args = f"({', '.join(['%s'] * len(names))})" if names else ""
        cur.execute(f"EXPLAIN (FORMAT JSON) EXECUTE {stmt}{args}", [params[n] for n in names])
        return cur.fetchone()[0][0]["Plan"]  # type: ignore[index]
    finally:
        conn.execute(f"DEALLOCATE {stmt}")
        conn.execute("RESET plan_cache_mode")


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)
