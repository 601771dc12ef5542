"""Listing jobs: GET /jobs with ?task= and ?queue= reads the ended jobs' indexes and the live
statuses' partial indexes, merged, so the pages are the same as a plain scan's, newest first,
whatever state each job is in; and a page of big jobs stays under a Lambda response."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.jobs import NewJob
from asyncz.settings import Settings
from tests.support.ledger import rows
from tests.support.settings import open_service

pytestmark = pytest.mark.integration


def test_task_and_queue_filters_page_through_live_and_ended_jobs(settings: Settings) -> None:
    settings = settings.model_copy(update={"queues": "default,other"})
    url = settings.database_url or ""

    async def submit() -> None:
        async with open_service(settings) as svc:
            for n in range(30):
                await svc.submit(
                    NewJob(task=("echo", "sleep")[n % 2], payload={"n": n},
                           queue=("default", "other")[n % 3 == 0])
                )  # fmt: skip

    asyncio.run(submit())
    # a mix of every status, spread over the creation order
    rows(url, "UPDATE jobs SET status = 'completed', finished_at = now() "
              "WHERE (payload->>'n')::int / 2 % 4 = 0")  # fmt: skip
    rows(url, "UPDATE jobs SET status = 'dead', finished_at = now() "
              "WHERE (payload->>'n')::int / 2 % 4 = 1")  # fmt: skip
    rows(url, "UPDATE jobs SET status = 'processing', lease_token = gen_random_uuid(), "
              "heartbeat_at = now(), attempts = 1 WHERE (payload->>'n')::int / 2 % 4 = 2 "
              "AND (payload->>'n')::int < 15")  # fmt: skip

    def truth(where: str, *args: Any) -> list[str]:
        got = rows(url, f"SELECT id::text AS id FROM jobs WHERE {where} "
                        "ORDER BY created_at DESC, id DESC", args)  # fmt: skip
        return [r["id"] for r in got]

    async def check() -> None:
        async with open_service(settings) as svc:
            cases = [
                ({"task": "echo"}, truth("task = %s", "echo")),
                ({"queue": "other"}, truth("queue = %s", "other")),
                ({"queue": "default", "task": "sleep"},
                 truth("queue = %s AND task = %s", "default", "sleep")),
                ({"task": "no-such-task"}, []),
                ({"task": "echo", "status": "dead"},
                 truth("task = %s AND status = %s", "echo", "dead")),
            ]  # fmt: skip
            for filters, expected in cases:
                assert expected or filters["task"] == "no-such-task"
                got = await _pages(svc, filters)
                assert got == expected, filters

    asyncio.run(check())


async def _pages(svc: Any, filters: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = await svc.list_jobs(limit=4, cursor=cursor, **filters)
        seen += [job.id for job in page.items]
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def test_pages_stay_under_a_lambda_response(settings: Settings) -> None:
    from asyncz.pagination import PAGE_BUDGET_BYTES

    async def scenario() -> list[Any]:
        async with open_service(settings) as svc:
            for _ in range(40):  # 40 x 200 KB of payload: 8 MB, more than a response holds
                await svc.submit(NewJob(task="echo", payload={"blob": "y" * 200_000}))
            pages = []
            cursor = None
            while True:
                page = await svc.list_jobs(limit=500, cursor=cursor)
                pages.append(page.items)
                cursor = page.next_cursor
                if not cursor:
                    break
            return pages

    pages = asyncio.run(scenario())
    assert len(pages) >= 2 and sum(len(p) for p in pages) == 40
    for items in pages:
        assert sum(len(j.payload["blob"]) for j in items) <= PAGE_BUDGET_BYTES
