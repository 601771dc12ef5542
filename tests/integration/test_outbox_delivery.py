"""An end's event is delivered even when the process that should hand it on dies: a worker
killed between the commit of a completion and the wake of the events function, or a
publisher killed holding a page it had not sent. The minute's sweep delivers each event,
once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from asyncz.jobs import NewJob
from asyncz.outbox.pump import Pump
from asyncz.outbox.sink import Envelope
from asyncz.settings import Settings
from tests.support.ledger import rows
from tests.support.settings import open_service, settings_env
from tests.support.waiting import wait_until
from tests.support.workers import REPO, start_worker, stop_worker

pytestmark = pytest.mark.integration


class Recording:
    def __init__(self) -> None:
        self.got: list[Envelope] = []

    async def publish(self, events: Sequence[Envelope]) -> None:
        self.got.extend(events)

    async def tick(self, deadline: float) -> None:
        return None


def sweep(settings: Settings, sink: Recording) -> int:
    """One run of the publisher, as its minute's rule starts it."""

    async def go() -> int:
        async with open_service(settings) as svc:
            pump = Pump(svc.store.outbox, svc.broker, [sink], settings)
            return (await pump.run(asyncio.get_running_loop().time() + 10)).published

    return asyncio.run(go())


def submit(settings: Settings, task: str = "echo", **kw: Any) -> str:
    async def go() -> str:
        async with open_service(settings) as svc:
            return (await svc.submit(NewJob(task=task, payload={}, **kw))).job_id

    return asyncio.run(go())


def test_a_worker_killed_before_it_wakes_the_publisher_still_gets_its_event_out_once(
    settings: Settings,
) -> None:
    job_id = submit(settings)
    env = {"ASYNCZ_CRASH_AT": "outbox.before_wake", "ASYNCZ_EVENTS_FUNCTION_NAME": "asyncz-events"}
    worker = start_worker(settings, env=env)
    assert worker.wait(60) == 137, stop_worker(worker)
    stop_worker(worker)
    [job] = rows(settings.database_url, "SELECT status FROM jobs WHERE id = %s", (job_id,))
    assert job["status"] == "completed"  # committed; nobody was told
    sink = Recording()
    assert sweep(settings, sink) == 1
    assert sweep(settings, sink) == 0
    assert [(e.type, e.data["job_id"]) for e in sink.got] == [("asyncz.job.completed", job_id)]


PUBLISH_ONCE = (
    "import asyncio; from asyncz.outbox.handler import _publish; "
    "print(asyncio.run(_publish(1.0)))"
)


def test_a_publisher_killed_holding_a_page_leaves_it_for_the_sweep_once(
    settings: Settings,
) -> None:
    job_id = submit(settings, task="fail", max_retries=0)
    rows(settings.database_url, "UPDATE jobs SET status = 'dead', finished_at = now() "
                                "WHERE id = %s", (job_id,))  # fmt: skip
    env = {**settings_env(settings), "ASYNCZ_CONSOLE_EVENTS": "true",
           "ASYNCZ_CRASH_AT": "outbox.before_publish"}  # fmt: skip
    dead = subprocess.run([sys.executable, "-c", PUBLISH_ONCE], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert dead.returncode == 137, dead.stderr
    assert "asyncz.job.dead" not in dead.stdout  # it died before any sink saw the page
    sink = Recording()
    # the dead publisher's lock lapses (its run's length and a margin), then the sweep sends
    wait_until(lambda: sweep(settings, sink) == 1, timeout=30, what="the sweep's delivery")
    assert sweep(settings, sink) == 0
    assert [(e.type, e.data["job_id"]) for e in sink.got] == [("asyncz.job.dead", job_id)]
