"""Spawned jobs and ctx.gather on PostgreSQL and Redis with real worker loops: a task that
spawns 200 jobs and gathers them completes once with their 200 results in order, holding no
worker while it waits; a gather whose timeout passes raises in the task; 1,000 jobs ending at
the same moment on 16 concurrent connections (half while the gather begins) resolve it exactly
once; an end whose count a crash cut off is counted by recovery;
cancelling a gathering task cancels the jobs it created, not the one a unique key pointed it
to; GET /jobs/{id} shows spawned_by, spawned and what a gathering job waits for."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest

from asyncz.durable.spawning import spawned_id
from asyncz.errors import GatherTimeoutError
from asyncz.jobs import JobStatus, NewJob
from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.store.postgres import PostgresStore
from asyncz.tasks import TaskContext, task
from tests.support.settings import open_service
from tests.support.workers import running_worker

pytestmark = pytest.mark.integration

RUNS: Counter[str] = Counter()


@task("fan_page", max_retries=0)
def _fan_page(payload: dict[str, Any]) -> int:
    return int(payload["n"]) * 2


@task("fan_out", durable=True)
def _fan_out(payload: dict[str, Any], ctx: TaskContext) -> Any:
    RUNS["fan_out"] += 1
    delay = payload.get("delay", 0)
    kids = [ctx.spawn("fan_page", {"n": n}, delay_seconds=delay) for n in range(payload["n"])]
    if payload.get("held"):  # a unique key points this spawn at a job someone else made
        kids.append(ctx.spawn("fan_page", {"n": -1}, name="held", unique_key=payload["held"]))
    try:
        return ctx.gather(kids, timeout=payload.get("timeout", 120), name="pages")
    except GatherTimeoutError as exc:
        return f"timed out: {exc}"


def _fast(settings: Settings) -> Settings:
    return settings.model_copy(update={"backoff_base_seconds": 0.05, "backoff_max_seconds": 0.1,
                                       "worker_poll_seconds": 0.2})  # fmt: skip


async def _until(svc: Any, job_id: str, done: Callable[[Any], bool], what: str) -> Any:
    for _ in range(1200):  # a bound against a hang, not a figure: ~120 s
        job = await svc.get(job_id)
        if done(job):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never {what}: {job.status}")


def _run(settings: Settings, body: Callable[[Any, Any], Awaitable[None]], n: int = 4) -> None:
    async def go() -> None:
        async with open_service(_fast(settings)) as svc, running_worker(svc, concurrency=n) as w:
            await body(svc, w)

    asyncio.run(go())


def _rows(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, args).fetchall()  # type: ignore[arg-type]


def test_a_task_gathers_200_spawned_jobs_holding_no_worker_and_completes_once(
    settings: Settings, api: Any
) -> None:
    RUNS.clear()
    url = settings.database_url or ""
    ids: list[str] = []

    async def body(svc: Any, worker: Any) -> None:
        # they start 8 s later: after the checks below, though spawning 200 took ~3 s in a
        # loaded run (with 3 s, the first had run by then)
        new = NewJob(task="fan_out", payload={"n": 200, "delay": 8})
        job_id = (await svc.submit(new)).job_id
        ids.append(job_id)
        job = await _until(svc, job_id, lambda j: j.status is JobStatus.SUSPENDED, "suspended")
        view = await svc.activity.workers()  # GET /workers: nothing runs while it waits
        assert [w["running"] for w in view["workers"]] == [[]] and not worker.running
        reason = await svc.held_reason(job)  # GET /jobs/{id}'s waiting_for
        assert reason.startswith("0/200 spawned jobs ended: gather 'pages' of 200 spawned")
        job = await _until(svc, job_id, lambda j: j.status.terminal, "ended")
        assert (job.status, job.result) == (JobStatus.COMPLETED, [n * 2 for n in range(200)])
        assert [a.outcome for a in await svc.attempts(job_id)] == ["suspended", "completed"]

    _run(settings, body)
    assert RUNS["fan_out"] == 2  # the spawns replayed on the wake: none submitted twice
    [(count,)] = _rows(url, "SELECT count(*) FROM jobs WHERE task = 'fan_page'")
    assert count == 200
    job_id = ids[0]
    shown = api("GET", f"/jobs/{job_id}").json()
    assert shown["spawned"] == {"total": 200, "by_status": {"completed": 200}, "capped": False,
                                "list": f"/jobs?spawned_by={job_id}"}  # fmt: skip
    assert shown["dependents"] == [] and shown["spawned_by"] is None
    child = api("GET", f"/jobs/{spawned_id(job_id, 0, 'spawn:7')}").json()
    assert (child["spawned_by"], child["result"]) == (job_id, 12)
    page = api("GET", f"/jobs?spawned_by={job_id}&limit=500").json()
    assert len(page["items"]) == 200 and page["items"][0]["spawned_by"] == job_id
    refused = api("GET", f"/jobs?spawned_by={job_id}&task=fan_page")
    assert (refused.status, refused.json()["error"]) == (422, "invalid_filter")


def test_a_gather_whose_timeout_passes_raises_in_the_task(settings: Settings) -> None:
    async def body(svc: Any, worker: Any) -> None:
        new = NewJob(task="fan_out", payload={"n": 2, "delay": 3600, "timeout": 2})
        job_id = (await svc.submit(new)).job_id
        job = await _until(svc, job_id, lambda j: j.status.terminal, "ended")
        assert job.status is JobStatus.COMPLETED
        assert job.result == ("timed out: gather 'pages': its timeout of 2 s passed before every "
                              "one of its 2 spawned jobs had ended")  # fmt: skip

    _run(settings, body)


def test_cancel_cascades_to_the_jobs_it_spawned_but_not_to_one_a_unique_key_pointed_to(
    settings: Settings, api: Any
) -> None:
    ids: list[str] = []

    async def body(svc: Any, worker: Any) -> None:
        holder = NewJob(task="fan_page", payload={"n": 0}, unique_key="nightly", delay_seconds=3600)
        ids.append((await svc.submit(holder)).job_id)
        new = NewJob(task="fan_out", payload={"n": 3, "delay": 3600, "held": "nightly"})
        ids.append((await svc.submit(new)).job_id)
        await _until(svc, ids[1], lambda j: j.status is JobStatus.SUSPENDED, "suspended")

    _run(settings, body)
    held, job_id = ids
    assert api("POST", f"/jobs/{job_id}/cancel").json()["status"] == "cancelled"
    for i in (1, 2, 3):
        child = api("GET", f"/jobs/{spawned_id(job_id, 0, f'spawn:{i}')}").json()
        assert (child["status"], child["last_error"]) == (
            "cancelled", f"spawner_cancelled: {job_id}")  # fmt: skip
    assert api("GET", f"/jobs/{held}").json()["status"] == "queued"  # not its own: left alone
    assert api("GET", f"/jobs/{job_id}").json()["cascade_pending"] is False


def test_jobs_ending_at_once_on_concurrent_connections_resolve_the_gather_exactly_once(
    settings: Settings,
) -> None:
    url = settings.database_url or ""
    with psycopg.connect(url, autocommit=True) as conn:  # a log of the step's resolutions
        conn.execute("CREATE TABLE IF NOT EXISTS gather_resolutions (job_id uuid, at timestamptz)")
        conn.execute("TRUNCATE gather_resolutions")
        conn.execute(
            "CREATE OR REPLACE FUNCTION log_gather_resolution() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN INSERT INTO gather_resolutions VALUES (NEW.job_id, now()); "
            "RETURN NULL; END $$")  # fmt: skip
        conn.execute(
            "CREATE OR REPLACE TRIGGER log_gather_resolution AFTER UPDATE OF status ON job_steps "
            "FOR EACH ROW WHEN (OLD.status = 'waiting' AND NEW.status = 'completed') "
            "EXECUTE FUNCTION log_gather_resolution()"
        )
    n, lanes = 1000, 16
    try:

        async def body(svc: Any, worker: Any) -> None:
            stores = [PostgresStore.create(url) for _ in range(lanes)]
            for s in stores:
                await s.open()
            try:
                await _fan_in(svc, stores, n, lanes)
            finally:
                for s in stores:
                    await s.close()

        async def go() -> None:
            async with open_service(_fast(settings)) as svc:
                await body(svc, None)

        asyncio.run(go())
        [(resolutions,)] = _rows(url, "SELECT count(*) FROM gather_resolutions")
        assert resolutions == 1  # the count reached 0 once
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TRIGGER IF EXISTS log_gather_resolution ON job_steps")
            conn.execute("DROP TABLE IF EXISTS gather_resolutions")


async def _fan_in(svc: Any, stores: list[PostgresStore], n: int, lanes: int) -> None:
    """Spawn ``n`` jobs from a claimed spawner and claim them all; then half of them complete
    (on ``lanes`` connections at once, each end counted after its commit as a worker's is)
    while the gather begins, the rest at once after it."""
    parent = (await svc.submit(NewJob(task="fan_out", payload={"n": 0}))).job_id
    [lease] = await svc.store.claim([parent], "w", 3600)
    kids = [spawned_id(parent, 0, f"k{i}") for i in range(n)]
    for i, kid in enumerate(kids):
        await svc.spawns.spawn(lease, kid, NewJob(task="fan_page", payload={"n": i}))
    leases = await svc.store.claim(kids, "w2", 3600)
    assert len(leases) == n
    by_id = {x.job_id: x for x in leases}
    terms = {"jobs": kids, "total": n, "max_bytes": 1 << 22}
    step = {"seq": 1, "name": "all", "kind": "gather", "after_name": None, "job_attempt": 1,
            "result": json.dumps(terms), "wait_until": None,
            "wait_key": None}  # fmt: skip

    # each lane a service of its own on its own connection: the end, then its count
    lanes_svc = [JobService(st, svc.broker, svc.registry, svc.settings) for st in stores]

    async def complete(lane: int, ids: list[str]) -> None:
        done = await lanes_svc[lane].complete_many([(by_id[i], i) for i in ids])
        assert done == set(ids)

    first, rest = kids[: n // 2], kids[n // 2 :]
    lanes_first = [complete(k, first[k::lanes]) for k in range(lanes)]
    opened, *_ = await asyncio.gather(
        svc.store.steps.open_wait(parent, lease.token, step), *lanes_first
    )
    assert opened is not None and opened["status"] == "waiting"
    assert (await svc.store.steps.suspend(lease, 3600, "gather 'all'"))["status"] == "suspended"
    await asyncio.gather(*(complete(k, rest[k::lanes]) for k in range(lanes)))
    [row] = await svc.store.steps.load(parent, 0, 10)
    assert row["status"] == "completed"
    assert [e["result"] for e in row["result"]] == kids  # each in its place, none missing
    [woken] = _rows(svc.settings.database_url or "",
                    "SELECT status, run_at <= now() FROM jobs WHERE id = %s", parent)  # fmt: skip
    assert woken == ("suspended", True)  # due now: woken by the last end, once


def test_an_end_whose_count_a_crash_cut_off_is_counted_by_recovery(settings: Settings) -> None:
    url = settings.database_url or ""

    async def go() -> None:
        async with open_service(_fast(settings)) as svc:
            parent = (await svc.submit(NewJob(task="fan_out", payload={"n": 0}))).job_id
            [lease] = await svc.store.claim([parent], "w", 3600)
            kid = spawned_id(parent, 0, "only")
            await svc.spawns.spawn(lease, kid, NewJob(task="fan_page", payload={"n": 4}))
            terms = {"jobs": [kid], "total": 1, "max_bytes": 1 << 20}
            step = {"seq": 1, "name": "one", "kind": "gather", "after_name": None,
                    "job_attempt": 1, "result": json.dumps(terms), "wait_until": None,
                    "wait_key": None}  # fmt: skip
            assert (await svc.store.steps.open_wait(parent, lease.token, step))["status"] == (
                "waiting")  # fmt: skip
            await svc.store.steps.suspend(lease, 3600, "gather 'one'")
            [child] = await svc.store.claim([kid], "w2", 3600)
            # the end commits; the worker dies before its cascade counts it
            assert await svc.store.complete_many([(child, 8)])
            [(status,)] = _rows(url, "SELECT status FROM job_steps WHERE job_id = %s", parent)
            assert status == "waiting"
            report = await svc.recover()
            assert not report.failed
            [(status, due)] = _rows(url, "SELECT s.status, j.run_at <= now() FROM job_steps s "
                                         "JOIN jobs j ON j.id = s.job_id WHERE s.job_id = %s",
                                    parent)  # fmt: skip
            assert (status, due) == ("completed", True)  # due: its wake is enqueued
            [row] = await svc.store.steps.load(parent, 0, 10)
            assert row["result"] == [{"job_id": kid, "status": "completed", "result": 8,
                                      "error": None}]  # fmt: skip

    asyncio.run(go())
