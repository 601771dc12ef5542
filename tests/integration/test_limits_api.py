"""Flow control over the api handler: concurrency keys at submit, why a job waits, limits in
GET /stats and /tasks, and pausing a queue (accepted, none starts, all run after resume)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from asyncz.api import handler as api_handler
from asyncz.connections import hash_api_key
from asyncz.settings import Settings, get_settings
from asyncz.worker.loop import WorkerLoop
from tests.support.api_lambda import handler_settings
from tests.support.apigw import Reply, call, drop_sandbox
from tests.support.ledger import rows, status_counts
from tests.support.settings import make_settings, open_service
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

KEY = "flow-key-" + "x" * 24


@pytest.fixture(scope="module")
def flow_settings(pg_url: str, redis_server_url: str) -> Iterator[Settings]:
    settings = make_settings(
        pg_url,
        redis_server_url,
        api_key_hashes=hash_api_key(KEY),
        wake_worker=False,
        queues="default,other",
        task_limits=json.dumps({"sleep": {"concurrency": 4, "key_concurrency": 1}}),
    )
    with handler_settings(settings) as ready:
        yield ready


@pytest.fixture
def api(flow_settings: Settings, clean: None) -> Iterator[Any]:
    api_handler._sandbox = api_handler.build_sandbox(flow_settings)

    def request(method: str, target: str, **kw: Any) -> Reply:
        return call(api_handler.handler, method, target, api_key=KEY, **kw)

    yield request
    drop_sandbox()


class Worker:
    """A worker loop on its own thread while the block runs (the test calls the api)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ready = threading.Event()
        self.box: dict[str, Any] = {}

    async def _work(self) -> None:
        async with open_service(self.settings) as svc:
            self.box["stop"], self.box["loop"] = asyncio.Event(), asyncio.get_running_loop()
            self.ready.set()
            await WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=self.box["stop"]).run()

    def __enter__(self) -> Worker:
        self.thread = threading.Thread(target=lambda: asyncio.run(self._work()), daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "worker loop did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.box["loop"].call_soon_threadsafe(self.box["stop"].set)
        self.thread.join(30)


def test_a_concurrency_key_is_taken_single_and_in_a_batch_and_bad_ones_are_refused(
    api: Any,
) -> None:
    one = api("POST", "/jobs", body={"task": "echo", "concurrency_key": "tenant:42"})
    assert one.status == 202
    got = api("GET", f"/jobs/{one.json()['job_id']}").json()
    assert got["concurrency_key"] == "tenant:42" and got["waiting_for"] is None
    batch = api("POST", "/jobs/batch", body={"jobs": [
        {"task": "echo", "concurrency_key": "A"}, {"task": "echo"}]})  # fmt: skip
    assert batch.status == 202
    keys = [api("GET", f"/jobs/{j['job_id']}").json()["concurrency_key"]
            for j in batch.json()["jobs"]]  # fmt: skip
    assert keys == ["A", None]
    for bad in ("k" * 201, "", "tab\there", "nul\x00"):
        reply = api("POST", "/jobs", body={"task": "echo", "concurrency_key": bad})
        assert reply.status == 422 and reply.json()["error"] == "validation_error", bad
    assert status_counts(get_settings().database_url or "").get("queued") == 3


def test_a_held_back_job_says_which_key_it_waits_for_and_stats_show_the_limit(
    api: Any, flow_settings: Settings
) -> None:
    body = {"task": "sleep", "payload": {"seconds": 0}, "concurrency_key": "tenant:42"}
    first, second = (api("POST", "/jobs", body=body).json()["job_id"] for _ in range(2))

    async def claim_both() -> list[str]:
        async with open_service(flow_settings) as svc:
            leases = await svc.claim_next("w1", ["default"], 10, 1.0, 600)
            svc.limits.slots.clear()  # keep the slot held after this service closes
            return [lease.job_id for lease in leases]

    assert asyncio.run(claim_both()) == [first]
    held = api("GET", f"/jobs/{second}").json()
    assert held["status"] == "queued" and held["attempts"] == 0
    assert held["waiting_for"] == "waiting for concurrency slot on tenant:42"
    stats = api("GET", "/stats").json()
    # (other tests' task modules may have registered limited tasks in this process too)
    sleep = {limit["task"]: limit for limit in stats["limits"]}["sleep"]
    assert sleep["limits"] == {"concurrency": 4, "key_concurrency": 1}
    assert sleep["running"] == 1 and sleep["waiting"] == 0
    assert sleep["keys"] == [{"key": "tenant:42", "running": 1, "waiting": 1}]
    tasks = {t["name"]: t for t in api("GET", "/tasks").json()["items"]}
    assert tasks["sleep"]["limits"] == {"concurrency": 4, "key_concurrency": 1}
    assert tasks["echo"]["limits"] == {}


def test_a_paused_queue_accepts_jobs_starts_none_and_runs_all_after_resume(
    api: Any, flow_settings: Settings
) -> None:
    paused = api("POST", "/queues/default/pause")
    assert paused.status == 200 and paused.json()["paused"] is True
    assert paused.json()["paused_by"]  # the name of the key that paused it
    assert api("POST", "/queues/default/pause").json()["paused"] is True  # again: no change
    ids = [api("POST", "/jobs", body={"task": "echo", "payload": {"i": i}}).json()["job_id"]
           for i in range(5)]  # fmt: skip
    other = api("POST", "/jobs", body={"task": "echo", "queue": "other"}).json()["job_id"]
    url = flow_settings.database_url or ""
    with Worker(flow_settings.model_copy(update={"queues": "default,other"})):
        wait_until(lambda: rows(url, "SELECT status FROM jobs WHERE id = %s", (other,))[0][
            "status"] == "completed", what="the other queue's job")  # fmt: skip
        time.sleep(5)  # a live worker for 5 s: still nothing of the paused queue starts
        started = rows(url, "SELECT count(*) AS n FROM jobs WHERE id = ANY(%s::uuid[]) "
                       "AND started_at IS NOT NULL", (ids,))  # fmt: skip
        assert started[0]["n"] == 0
        assert api("GET", f"/jobs/{ids[0]}").json()["waiting_for"] == "queue default is paused"
        stats = api("GET", "/stats").json()["queues"]
        assert stats["default"]["paused"] is True and stats["other"]["paused"] is False
        assert {q["queue"]: q["paused"] for q in api("GET", "/queues").json()["items"]} == {
            "default": True, "other": False}  # fmt: skip
        resumed = api("POST", "/queues/default/resume")
        assert resumed.status == 200 and resumed.json()["paused"] is False
        audit = api("GET", "/audit").json()["items"]  # newest first, with the key's name
        assert [(a["action"], a["target"], a["outcome"]) for a in audit[:3]] == [
            ("resume", "default", "ok"),
            ("pause", "default", "ok"),
            ("pause", "default", "ok"),
        ]
        assert audit[0]["key_name"] and audit[0]["key_name"] == audit[1]["key_name"]
        wait_until(lambda: status_counts(url).get("completed") == 6, what="all six jobs")


def test_pausing_an_unknown_or_malformed_queue_is_refused(api: Any) -> None:
    unknown = api("POST", "/queues/nope/pause")
    assert unknown.status == 422 and unknown.json()["error"] == "unknown_queue"
    bad = api("POST", "/queues/bad%20name/resume")
    assert bad.status == 422 and bad.json()["error"] == "validation_error"
