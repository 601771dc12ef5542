"""The claim and the completion find their rows by primary key whatever the statistics say:
statistics taken before a backlog arrived (an empty table, a quiet queue) made the planner
walk every queued row along jobs_queued_run_at_idx for each claim, and hash every running
job for each completion."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest

from tests.support.databases import fresh_database, sibling_url
from tests.support.plans import plan_nodes, prepared_plan

pytestmark = pytest.mark.integration

BACKLOG = 5_000


@pytest.fixture(scope="module")
def stale_stats_db() -> str:
    """Statistics of an empty table, then a backlog of queued jobs and some running ones."""
    url = fresh_database(sibling_url("plans"), migrate=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
        conn.execute("ANALYZE jobs")
        conn.execute(
            "INSERT INTO jobs (id, task, status, lease_token, heartbeat_at, attempts)"
            " SELECT gen_random_uuid(), 'echo', s, CASE WHEN s = 'processing'"
            "        THEN gen_random_uuid() END, now(), (s = 'processing')::int"
            "   FROM generate_series(1, %s) i,"
            "        LATERAL (SELECT CASE WHEN i %% 5 = 0 THEN 'processing'"
            "                             ELSE 'queued' END AS s) st",
            (BACKLOG,),
        )
    return url


def _ids(conn: psycopg.Connection[Any], status: str) -> list[tuple[uuid.UUID, uuid.UUID]]:
    found = conn.execute(
        "SELECT id, lease_token FROM jobs WHERE status = %s LIMIT 10", (status,)
    ).fetchall()
    return [(r[0], r[1]) for r in found]


def _cases(conn: psycopg.Connection[Any]) -> list[tuple[str, dict[str, Any]]]:
    queued = [i for i, _ in _ids(conn, "queued")]
    running = _ids(conn, "processing")
    held = {"ids": [i for i, _ in running], "tokens": [t for _, t in running]}
    done = json.dumps([{"id": str(i), "token": str(t), "result": {}} for i, t in running])
    return [
        ("claim_jobs", {"ids": queued, "worker_id": "w", "max_timeout": 900, "nonce": "n"}),
        ("get_unclaimed", {"ids": queued}),
        ("complete_jobs", {"done": done}),
        ("heartbeat_jobs", held),
        ("adopt_claim", {"ids": [i for i, _ in running], "nonce": "n"}),
        (
            "save_progress",
            {**held, "fractions": [0.5] * len(running), "messages": ["half"] * len(running)},
        ),
    ]


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
def test_claim_and_completion_read_jobs_by_primary_key_with_stale_statistics(
    stale_stats_db: str, mode: str
) -> None:
    problems: list[str] = []
    with psycopg.connect(stale_stats_db, autocommit=True) as conn:
        for name, params in _cases(conn):
            nodes = list(plan_nodes(prepared_plan(conn, name, params, mode)))
            on_jobs = [n for n in nodes if n.get("Relation Name") == "jobs"
                       or n.get("Index Name", "").startswith("jobs_")]  # fmt: skip
            used = {n.get("Index Name") or n["Node Type"] for n in on_jobs
                    if n["Node Type"] != "ModifyTable"}  # fmt: skip
            if used - {"jobs_pkey", "Bitmap Heap Scan"}:
                problems.append(f"{name} ({mode}) reads jobs through {sorted(used)}")
    assert not problems, "\n".join(problems)
