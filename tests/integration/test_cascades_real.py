"""Cascades in bounded pages through the job service on PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.settings import Settings
from tests.support.cascades import *  # noqa: F403 - the suite's tests run here
from tests.support.ledger import rows
from tests.support.memory import Recorder
from tests.support.settings import open_service
from tests.support.workflows import job, run_ready, statuses

pytestmark = pytest.mark.integration


@pytest.fixture
def cascade_services(settings: Settings) -> Any:
    return lambda **overrides: open_service(
        settings.model_copy(update=overrides), metrics=Recorder()
    )


def test_a_parent_retention_deleted_counts_as_it_ended_when_another_parent_is_replayed(
    settings: Settings,
) -> None:
    async def body() -> None:
        async with open_service(settings) as svc:
            items = await svc.submit_many([job("a"), job("b"), job("c", "a", "b")])
            ids = {it.ref: it.job_id for it in items}
            await run_ready(svc, fail={ids["b"]})  # a completed, b dead: c dead, blaming b
            assert await statuses(svc, ids) == {"a": "completed", "b": "dead", "c": "dead"}
            rows(settings.database_url, "DELETE FROM jobs WHERE id = %s", (ids["a"],))  # retention
            await svc.replay(ids["b"])
            assert (await svc.get(ids["c"])).status.value == "waiting", "a completed: c waits on b"
            await run_ready(svc)
            assert await run_ready(svc) == [ids["c"]]

    asyncio.run(body())
