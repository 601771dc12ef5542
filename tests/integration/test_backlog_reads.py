"""GET /stats' counts and GET /jobs?task= / ?queue= read as much with 100,000 delayed jobs
queued as with 1,000, and each queue's oldest due job as much with 100,000 due: the rows and
buffers of their plans (EXPLAIN ANALYZE), not their times. The queued count comes from the
live counts, the listings from the backlog's own indexes; the counts stay the table's."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from asyncz.settings import Settings
from asyncz.store.queries import QUERIES
from tests.support.ledger import rows
from tests.support.plans import reads
from tests.support.settings import open_service

pytestmark = pytest.mark.integration

SMALL, LARGE = 1_000, 100_000

# Delayed jobs (a day out), newest last as submits leave them; a few of every other status
# beside them.
BACKLOG = """
INSERT INTO jobs (id, task, status, run_at, created_at)
SELECT gen_random_uuid(), 'echo', 'queued', now() + interval '1 day', clock_timestamp()
  FROM generate_series(1, %(n)s) AS i
"""
OTHERS = """
INSERT INTO jobs (id, task, status, lease_token, heartbeat_at, finished_at)
SELECT gen_random_uuid(), 'echo', s, CASE WHEN s = 'processing' THEN gen_random_uuid() END,
       now(), now()
  FROM unnest(ARRAY['waiting', 'processing', 'dead', 'completed', 'cancelled']) s,
       generate_series(1, 5)
"""


# Due jobs of one queue, an hour old, in the order of their run_at
DUE = """
INSERT INTO jobs (id, task, queue, status, run_at)
SELECT gen_random_uuid(), 'echo', %(queue)s, 'queued',
       now() - interval '1 hour' + make_interval(secs => i / 1000.0)
  FROM generate_series(1, %(n)s) AS i
"""


def listing(**filters: Any) -> dict[str, Any]:
    return {"status": None, "queue": None, "task": None, "limit": 1,
            "after_created": None, "after_id": None} | filters  # fmt: skip


CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("counts", "count_by_status", {}),
    ("oldest due of a queue", "oldest_queued_in_queue", {"queue": "default"}),
    ("?task= matching nothing", "list_jobs_by_task_or_queue", listing(task="nope")),
    ("?queue= matching nothing", "list_jobs_by_task_or_queue", listing(queue="nope")),
    ("?task= of the backlog", "list_jobs_by_task_or_queue", listing(task="echo", limit=50)),
    ("?queue= of the backlog", "list_jobs_by_task_or_queue", listing(queue="default", limit=50)),
]


def measure(url: str) -> dict[str, dict[str, int]]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE jobs")
        mark = conn.execute(QUERIES["get_fold_mark"]).fetchone()
        folded = {"folded_to": mark[0] if mark else None}
        return {label: reads(conn, name, folded | params) for label, name, params in CASES}


def test_stats_and_filtered_listings_read_the_same_at_1k_and_100k_queued(
    settings: Settings,
) -> None:
    url = settings.database_url or ""

    async def fold() -> dict[str, Any]:
        async with open_service(settings) as svc:
            await svc.store.maintenance.fold_finished_counts(0.0)
            return await svc.stats()

    rows(url, OTHERS)
    rows(url, BACKLOG, {"n": SMALL})
    asyncio.run(fold())
    small = measure(url)
    rows(url, BACKLOG, {"n": LARGE - SMALL})
    stats = asyncio.run(fold())
    large = measure(url)
    assert stats["queues"]["default"]["counts"] == {
        "waiting": 5, "queued": LARGE, "processing": 5, "suspended": 0, "completed": 5,
        "dead": 5, "cancelled": 5}  # fmt: skip
    for label, _, _ in CASES:
        # about the same: what the pages a listing reads hold varies a little with the rows
        # around them, an index may grow a level; never anything like the 99,000 rows more
        assert large[label]["rows"] <= small[label]["rows"] + 50, (label, small, large)
        assert large[label]["buffers"] <= small[label]["buffers"] + 10, (label, small, large)


QUEUES = ("default", "small")


def test_each_queues_oldest_due_job_reads_the_same_at_1k_and_100k_due(settings: Settings) -> None:
    url = settings.database_url or ""

    async def stats() -> dict[str, Any]:
        async with open_service(settings) as svc:
            return await svc.stats()

    def measure() -> dict[str, dict[str, int]]:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE jobs")
            return {q: reads(conn, "oldest_queued_in_queue", {"queue": q}) for q in QUEUES}

    rows(url, DUE, {"n": SMALL, "queue": "default"})
    # a small queue's jobs, due after every job of the big one: walking the due rows in
    # their order would read the whole big queue first
    rows(url, DUE.replace("1 hour", "1 minute"), {"n": 5, "queue": "small"})
    small = measure()
    rows(url, DUE, {"n": LARGE - SMALL, "queue": "default"})
    large = measure()
    queues = asyncio.run(stats())["queues"]
    assert 3_500 < queues["default"]["oldest_queued_age_seconds"] < 4_000, queues
    assert 55 < queues["small"]["oldest_queued_age_seconds"] < 500, queues
    for queue in QUEUES:
        assert large[queue]["rows"] <= small[queue]["rows"] + 50, (queue, small, large)
        assert large[queue]["buffers"] <= small[queue]["buffers"] + 10, (queue, small, large)
