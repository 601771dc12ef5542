"""GET /stats' per-status counts without reading history: completed and cancelled jobs are
folded into ``job_counts`` by the recovery sweep, the rows finished since are added at read
time, deletes take folded rows back out (a statement trigger), and the live statuses come
from their partial indexes. Whatever the order of finishing, folding and pruning, the counts
are the table's."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from asyncz.jobs import NewJob
from asyncz.settings import Settings
from asyncz.store import maintenance
from tests.support.ledger import rows
from tests.support.settings import open_service

pytestmark = pytest.mark.integration

STATUSES = ("waiting", "queued", "processing", "suspended", "completed", "dead", "cancelled")


def truth(url: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in rows(url, "SELECT queue, status, count(*) AS n FROM jobs GROUP BY queue, status"):
        out.setdefault(r["queue"], dict.fromkeys(STATUSES, 0))[r["status"]] = r["n"]
    return out


def counted(stats: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {q: s["counts"] for q, s in stats["queues"].items() if any(s["counts"].values())}


def finish(url: str, status: str, n: int, queue: str = "default") -> None:
    rows(
        url,
        "UPDATE jobs SET status = %s, finished_at = now() WHERE id IN ("
        " SELECT id FROM jobs WHERE status = 'queued' AND queue = %s LIMIT %s)",
        (status, queue, n),
    )


def test_counts_stay_exact_through_finishing_folding_and_pruning(settings: Settings) -> None:
    settings = settings.model_copy(update={"queues": "default,other"})
    url = settings.database_url or ""

    async def go() -> list[tuple[dict[str, Any], dict[str, Any]]]:
        seen = []
        async with open_service(settings) as svc:
            for queue in ("default", "other"):
                await svc.submit_many([NewJob(task="echo", payload={}, queue=queue)] * 30)

            async def check() -> None:
                seen.append((counted(await svc.stats()), truth(url)))

            finish(url, "completed", 10)
            finish(url, "cancelled", 3)
            finish(url, "completed", 4, "other")
            await check()  # nothing folded yet: all from the recent rows
            assert await svc.store.maintenance.fold_finished_counts(0.0) == 17
            await check()  # all folded
            finish(url, "completed", 5)
            await check()  # folded + recent
            rows(url, "UPDATE jobs SET status = 'dead', finished_at = now() WHERE id IN ("
                      " SELECT id FROM jobs WHERE status = 'queued' LIMIT 2)")  # fmt: skip
            pruned = await svc.store.maintenance.prune_finished(
                0.0, 6
            )  # folded and recent rows alike
            assert pruned == 6
            await check()
            await svc.store.maintenance.fold_finished_counts(0.0)
            assert await svc.store.maintenance.prune_finished(0.0, 1000) == 16
            await check()
            finish(url, "completed", 1)
            rows(url, "TRUNCATE jobs, job_steps, job_gathers, job_attempts, job_dependencies")
            await check()
        return seen

    for stats, table in asyncio.run(go()):
        assert stats == table


def test_two_folds_at_once_count_each_job_once(settings: Settings) -> None:
    url = settings.database_url or ""

    async def go() -> tuple[list[int], dict[str, Any]]:
        async with open_service(settings) as a, open_service(settings) as b:
            await a.submit_many([NewJob(task="echo", payload={})] * 50)
            finish(url, "completed", 50)
            folded = await asyncio.gather(
                a.store.maintenance.fold_finished_counts(0.0),
                b.store.maintenance.fold_finished_counts(0.0),
            )
            return list(folded), counted(await a.stats())

    folded, stats = asyncio.run(go())
    assert sorted(folded) == [0, 50]
    assert stats["default"]["completed"] == 50
    assert rows(url, "SELECT sum(n)::int AS n FROM job_counts") == [{"n": 50}]


def test_the_runtime_role_may_fold_and_prune(settings: Settings) -> None:
    """The functions connect as asyncz_app: the fold writes job_counts, a delete's trigger
    too (rights from migration 0005)."""
    url = settings.database_url or ""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET ROLE asyncz_app")
        conn.execute(
            "INSERT INTO jobs (id, task, status, finished_at) "
            "VALUES (gen_random_uuid(), 'echo', 'completed', now() - interval '1 h')"
        )
        conn.execute("UPDATE job_counts_folded SET folded_to = now()")
        conn.execute("INSERT INTO job_counts VALUES ('default', 'completed', 1)")
        conn.execute("DELETE FROM jobs")
        assert conn.execute("SELECT n FROM job_counts").fetchall() == [(0,)]


def test_live_counts_fold_in_pages_and_stay_exact(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every status change appends to job_count_changes; folds (two at once, two changes a
    page) move them into job_live_counts, and the counts read the table's throughout."""
    monkeypatch.setattr(maintenance, "FOLD_PAGE", 2)
    settings = settings.model_copy(update={"queues": "default,other"})
    url = settings.database_url or ""

    async def go() -> list[tuple[dict[str, Any], dict[str, Any]]]:
        seen = []
        async with open_service(settings) as a, open_service(settings) as b:
            for queue in ("default", "other", "default"):
                await a.submit_many([NewJob(task="echo", payload={}, queue=queue)] * 7)
            leases = await a.claim_next("w", settings.queue_list, 4, 2.0, 3600)
            assert await a.complete(leases[0], {"ok": True})
            finish(url, "dead", 2, "other")
            # a suspended job is live: counted as it suspends, and again as its wake runs
            assert await a.store.steps.suspend(leases[1], 60.0, "sleep 'nap'") is not None
            seen.append((counted(await a.stats()), truth(url)))
            await asyncio.gather(
                a.store.maintenance.fold_finished_counts(0.0),
                b.store.maintenance.fold_finished_counts(0.0),
            )
            seen.append((counted(await b.stats()), truth(url)))
        return seen

    for stats, table in asyncio.run(go()):
        assert stats == table
    assert rows(url, "SELECT count(*)::int AS n FROM job_count_changes") == [{"n": 0}]
