"""A worker dies between a parent's completion and settling its children.

The worker runs with ``ASYNCZ_CRASH_AT=complete.before_dependents``: the parent's
completion is committed, then the process exits (137) before its children are counted down.
They stay ``waiting`` with every parent finished, until the next recovery sweep releases
them; then they run, each exactly once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from asyncz.jobs import Dependency, NewJob, ParentRule
from tests.support.chaos import chaos_settings
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import STRANDED_SQL, check_ledger, rows, wait_terminal
from tests.support.private_servers import RedisServer
from tests.support.settings import open_service
from tests.support.waiting import wait_until

pytestmark = pytest.mark.chaos


async def submit(settings: Any) -> dict[str, str]:
    graph = [
        NewJob(task="echo", payload={"n": 0}, ref="parent"),
        NewJob(task="echo", payload={"n": 1}, ref="left", depends_on=(Dependency("parent"),)),
        NewJob(
            task="echo",
            payload={"n": 2},
            ref="right",
            depends_on=(Dependency("parent", ParentRule.RUN),),
        ),
        NewJob(
            task="echo",
            payload={"n": 3},
            ref="join",
            depends_on=(Dependency("left"), Dependency("right")),
        ),
    ]
    async with open_service(settings) as svc:
        return {it.ref: it.job_id for it in await svc.submit_many(graph)}


def status(db: str, job_id: str) -> str:
    return str(rows(db, "SELECT status FROM jobs WHERE id = %s", (job_id,))[0]["status"])


def test_a_worker_killed_before_settling_children_loses_none(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    ids = asyncio.run(submit(settings))
    fleet = fleet_factory(settings)
    doomed = fleet.start(concurrency=1, env={"ASYNCZ_CRASH_AT": "complete.before_dependents"})
    assert doomed.wait(30) == 137, fleet.stderr_tail()
    assert status(chaos_db, ids["parent"]) == "completed"
    assert status(chaos_db, ids["left"]) == status(chaos_db, ids["right"]) == "waiting"
    stranded = {r["id"] for r in rows(chaos_db, STRANDED_SQL)}
    assert stranded == {ids["left"], ids["right"]}, "the crash came too early or too late"

    fleet.start(concurrency=4)
    recovery = recovery_factory(settings, interval=0.5)
    wait_until(lambda: recovery.runs >= 1, timeout=30, what="a recovery sweep")
    wait_terminal(chaos_db, len(ids), timeout=60)
    book = check_ledger(chaos_db, list(ids.values()))
    assert book["status"] == {"completed": 4}
    joined = rows(chaos_db, "SELECT * FROM job_attempt_history WHERE job_id = %s", (ids["join"],))
    assert len(joined) == 1
