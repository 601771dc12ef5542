"""The api Lambda handler in-process, as the integration tests drive it: the test key, both
flavours of API Gateway event, a sandbox as the handler builds it, a worker loop on a thread to
drain what a test submitted, and the rows it left."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from asyncz.api import handler as api_handler
from asyncz.api.app import Waker
from asyncz.settings import Settings, get_settings
from asyncz.worker.loop import WorkerLoop
from tests.support.apigw import EVENTS, drop_sandbox
from tests.support.ledger import rows
from tests.support.settings import open_service, settings_env
from tests.support.waiting import wait_until

KEY = "test-key-" + "x" * 24


# The api serves the events of both flavours of API Gateway: REST API (v1, as deployed) and
# HTTP API (2.0). Submit tests run on both; the rest of the API on REST events.
FLAVOURS = pytest.mark.parametrize("flavour", sorted(EVENTS))


def sandbox(settings: Settings, waker: Waker | None = None) -> Any:
    """An api sandbox as the handler builds it."""
    return api_handler.build_sandbox(settings, waker=waker)


def job_row(settings: Settings, job_id: str) -> dict[str, Any]:
    return rows(settings.database_url, "SELECT * FROM jobs WHERE id=%s", (job_id,))[0]


def drain(settings: Settings, until: Any, timeout: float = 30) -> None:
    """Run a worker loop on its own thread (and loop) until ``until()`` holds; the test's
    thread stays free to call the api handler meanwhile."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def work() -> None:
        async with open_service(settings) as svc:
            box["stop"], box["loop"] = asyncio.Event(), asyncio.get_running_loop()
            ready.set()
            box["summary"] = await WorkerLoop(
                svc, remaining_seconds=lambda: 3600, stop=box["stop"]
            ).run()

    thread = threading.Thread(target=lambda: asyncio.run(work()), daemon=True)
    thread.start()
    assert ready.wait(10), "worker loop did not start"
    try:
        wait_until(until, timeout=timeout, what="the jobs to finish")
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)


def make_dead(api: Any, settings: Settings, n: int, task: str = "fail") -> list[str]:
    ids = [
        api(
            "POST", "/jobs", body={"task": task, "payload": {"message": f"m{i}"}, "max_retries": 0}
        ).json()["job_id"]
        for i in range(n)
    ]
    drain(settings, lambda: all(job_row(settings, i)["status"] == "dead" for i in ids))
    return ids


def job(api: Any, job_id: str) -> dict[str, Any]:
    reply = api("GET", f"/jobs/{job_id}")
    assert reply.status == 200, reply.body
    return dict(reply.body)


@contextmanager
def handler_settings(settings: Settings) -> Iterator[Settings]:
    """``settings`` as the api handler reads them (its ``ASYNCZ_*`` environment), the handler's
    cached sandbox dropped before and after."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in settings_env(settings).items():
            if name.startswith("ASYNCZ_"):
                mp.setenv(name, value)
        mp.delenv("ASYNCZ_WORKER_FUNCTION_NAME", raising=False)
        get_settings.cache_clear()
        drop_sandbox()
        yield get_settings()
        get_settings.cache_clear()
        drop_sandbox()
