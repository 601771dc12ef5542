"""A durable task's spawned jobs on the in-memory store: each ctx.spawn submits one job
however often the task is replayed, with its spawner's key and one more level of depth;
options a spawn does not take, unknown tasks and too deep a spawner end the job as
spawn_refused; GET /jobs/{id} tells spawned_by and spawned; a cancelled spawner's cascade
cancels the jobs it created and never one a unique key pointed it to."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from asyncz.durable.spawning import Spawned, spawned_id
from asyncz.errors import SpawnRefusedError
from asyncz.jobs import AttemptOutcome, JobStatus, NewJob
from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskContext, TaskRegistry, task
from asyncz.testing import MemoryBroker, MemoryStore, run_durable

pytestmark = pytest.mark.unit


def _tasks(reg: TaskRegistry, tries: Counter[str]) -> Any:
    @task("page", registry=reg)
    def page(payload: dict[str, Any]) -> int:
        return int(payload["n"]) * 10

    @task("split", durable=True, registry=reg)
    def split(payload: dict[str, Any], ctx: TaskContext) -> list[str]:
        spawned = [ctx.spawn("page", {"n": n}) for n in range(payload["pages"])]
        named = ctx.spawn("page", {"n": 99}, name="cover", priority=5)
        tries["split"] += 1
        if tries["split"] == 1:
            raise RuntimeError("the first try fails after its spawns")
        assert all(isinstance(s, Spawned) and s.created for s in [*spawned, named])
        return [s.job_id for s in [*spawned, named]]

    return split


def test_each_spawn_submits_one_job_however_often_its_task_replays() -> None:
    reg, tries = TaskRegistry(), Counter[str]()
    run = run_durable(_tasks(reg, tries), {"pages": 3}, max_retries=1, registry=reg)
    assert run.status == "completed", run.error
    assert tries["split"] == 2
    store: Any = run.service.store
    children = [j for j in store.jobs.values() if j.get("spawned_by") == run.job_id]
    assert len(children) == 4 and sorted(run.result) == sorted(j["id"] for j in children)
    assert run.result[:3] == [spawned_id(run.job_id, 0, f"spawn:{i}") for i in (1, 2, 3)]
    assert run.result[3] == spawned_id(run.job_id, 0, "cover")
    assert [(s["name"], s["kind"]) for s in run.steps] == [
        ("spawn:1", "spawn"),
        ("spawn:2", "spawn"),
        ("spawn:3", "spawn"),
        ("cover", "spawn"),
    ]
    cover = store.jobs[run.result[3]]
    assert (cover["priority"], cover["payload"], cover["spawn_depth"]) == (5, {"n": 99}, 1)


def _service(**settings: Any) -> JobService:
    config = Settings(database_url="postgresql://unused", redis_url="redis://unused",
                      **settings)  # fmt: skip
    reg = TaskRegistry()
    _tasks(reg, Counter())
    return JobService(MemoryStore(), MemoryBroker(), reg, config)


async def _spawner(svc: JobService, **kw: Any) -> Any:
    new = NewJob(task="split", payload={"pages": 0}, submitted_by="team-a",
                 submitted_by_key_id="key-a", **kw)  # fmt: skip
    job_id = (await svc.submit(new)).job_id
    [lease] = await svc.store.claim([job_id], "w", 3600)
    return lease


def test_a_spawn_run_again_after_its_job_was_stored_finds_that_job() -> None:
    async def go() -> None:
        svc = _service()
        lease = await _spawner(svc)
        child = spawned_id(lease.job_id, 0, "spawn:1")
        first = await svc.spawns.spawn(lease, child, NewJob(task="page", payload={"n": 1}))
        again = await svc.spawns.spawn(lease, child, NewJob(task="page", payload={"n": 1}))
        assert first == again == {"job_id": child, "task": "page", "created": True}
        job = await svc.get(child)
        assert (job.spawned_by, job.submitted_by_key_id) == (lease.job_id, "key-a")
        broker: Any = svc.broker
        assert child in broker.ready["default"]  # committed, then enqueued (again: ZADD NX)

    asyncio.run(go())


def test_a_spawn_that_cannot_be_stored_as_asked_is_refused() -> None:
    async def go() -> None:
        svc = _service(max_spawn_depth=1)
        lease = await _spawner(svc)
        for new in (NewJob(task="nope", payload={}),
                    NewJob(task="page", payload={}, queue="elsewhere"),
                    NewJob(task="page", payload={}, priority=1000)):  # fmt: skip
            with pytest.raises(SpawnRefusedError, match="spawn of"):
                await svc.spawns.spawn(lease, spawned_id(lease.job_id, 0, "x"), new)
        child = spawned_id(lease.job_id, 0, "deep")
        await svc.spawns.spawn(lease, child, NewJob(task="split", payload={"pages": 0}))
        [deep] = await svc.store.claim([child], "w", 3600)
        with pytest.raises(SpawnRefusedError, match="ASYNCZ_MAX_SPAWN_DEPTH"):
            await svc.spawns.spawn(deep, spawned_id(child, 0, "y"), NewJob(task="page",
                                                                          payload={}))  # fmt: skip

    asyncio.run(go())


def test_a_spawn_with_an_option_it_does_not_take_ends_the_job_as_spawn_refused() -> None:
    reg = TaskRegistry()

    @task("wrong_spawn", durable=True, registry=reg)
    def wrong_spawn(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.spawn("wrong_spawn", {}, depends_on=["x"])

    run = run_durable(wrong_spawn, registry=reg, max_retries=3)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("spawn_refused: spawn of 'wrong_spawn': depends_on")
    assert len(run.attempts) == 1  # final: no retry


def test_a_cancelled_spawner_cancels_what_it_created_and_not_what_a_unique_key_pointed_to(
) -> None:  # fmt: skip
    async def go() -> None:
        svc = _service()
        holder = (await svc.submit(NewJob(task="page", payload={"n": 0},
                                          unique_key="nightly"))).job_id  # fmt: skip
        lease = await _spawner(svc)
        mine = await svc.spawns.spawn(lease, spawned_id(lease.job_id, 0, "a"),
                                      NewJob(task="page", payload={"n": 1}))  # fmt: skip
        other = await svc.spawns.spawn(lease, spawned_id(lease.job_id, 0, "b"),
                                       NewJob(task="page", payload={"n": 2},
                                              unique_key="nightly"))  # fmt: skip
        assert other == {"job_id": holder, "task": "page", "created": False}
        shown = await svc.graph(await svc.get(lease.job_id))
        assert shown["spawned"]["total"] == 1 and shown["spawned"]["by_status"] == {"queued": 1}
        assert shown["spawned"]["list"] == f"/jobs?spawned_by={lease.job_id}"
        assert shown["dependents"] == []  # spawned jobs are not its dependents
        page = await svc.spawns.page(lease.job_id, 10, None)
        assert [j.id for j in page.items] == [mine["job_id"]]
        await svc.store.steps.suspend(lease, 3600, "gathering")
        assert await svc.cancel(lease.job_id) is JobStatus.CANCELLED
        cancelled = await svc.get(mine["job_id"])
        assert cancelled.status is JobStatus.CANCELLED
        assert cancelled.last_error == f"spawner_cancelled: {lease.job_id}"
        assert (await svc.get(holder)).status is JobStatus.QUEUED
        assert not (await svc.get(lease.job_id)).cascade_pending

    asyncio.run(go())


def test_a_running_spawner_cancelled_cancels_its_jobs_when_its_attempt_stops() -> None:
    async def go() -> None:
        svc = _service()
        lease = await _spawner(svc)
        child = await svc.spawns.spawn(lease, spawned_id(lease.job_id, 0, "a"),
                                       NewJob(task="page", payload={"n": 1}))  # fmt: skip
        assert await svc.cancel(lease.job_id) is JobStatus.PROCESSING  # flagged: it runs on
        assert (await svc.get(child["job_id"])).status is JobStatus.QUEUED
        await svc.fail(lease, "cancelled on request", AttemptOutcome.CANCELLED)  # its heartbeat
        assert (await svc.get(child["job_id"])).status is JobStatus.CANCELLED

    asyncio.run(go())


def test_a_gather_of_something_ctx_spawn_did_not_return_is_step_usage() -> None:
    reg = TaskRegistry()

    @task("odd_gather", durable=True, registry=reg)
    def odd_gather(payload: dict[str, Any], ctx: TaskContext) -> Any:
        return ctx.gather([42], timeout=60)

    run = run_durable(odd_gather, registry=reg)
    assert run.status == "dead" and run.error is not None
    assert run.error.startswith("step_usage: gather 'gather:1': give it the jobs ctx.spawn")
