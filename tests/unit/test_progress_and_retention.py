"""A task's progress reports (a fraction, written at most about once a second) and the
pruning of finished jobs (counted in a metric; zero keeps them for ever) and of the audit
trail, in memory."""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta
from typing import Any

import pytest

from asyncz.jobs import NewJob
from asyncz.tasks.registry import TaskContext
from asyncz.worker import upkeep as worker_upkeep
from asyncz.worker.loop import WorkerLoop
from tests.support.memory import service

pytestmark = pytest.mark.unit


def test_pruning_counts_in_a_metric_and_zero_keeps_forever() -> None:
    svc = service(retain_finished_seconds=1, retain_dead_seconds=0)

    async def go() -> int:
        job = await svc.submit(NewJob(task="echo", payload={}))
        [lease] = await svc.claim_next("w", ["default"], 1, 0.1, 3600)
        await svc.complete(lease, None)
        row = svc.store.jobs[job.job_id]  # type: ignore[attr-defined]
        row["finished_at"] -= timedelta(seconds=5)
        return await svc.prune()

    assert asyncio.run(go()) == 1
    assert svc.metrics.seen["JobsPruned"] == 1  # type: ignore[attr-defined]
    assert asyncio.run(service(retain_finished_seconds=0).prune()) == 0


def test_the_audit_trail_has_its_own_retention() -> None:
    async def go(keep: int) -> list[str]:
        svc = service(retain_finished_seconds=0, retain_audit_seconds=keep)
        audit = svc.store.access  # type: ignore[attr-defined]
        for target in ("old", "new"):
            await audit.insert_audit(
                key_id="key-1", key_name="ops", action="purge", target=target, detail={},
                outcome="ok",
            )  # fmt: skip
        audit.audit[0]["at"] -= timedelta(days=2)
        await svc.prune()
        return [r["target"] for r in audit.audit]

    assert asyncio.run(go(86400)) == ["new"]
    assert asyncio.run(go(0)) == ["old", "new"]  # 0 keeps it for ever


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, "half"])
def test_progress_is_a_fraction(bad: Any) -> None:
    ctx = TaskContext(job_id="j", attempt=1, queue="q", worker_id="w", artifact_dir="/tmp")
    with pytest.raises(ValueError):
        ctx.progress(bad)


def test_progress_is_written_at_most_about_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_upkeep, "PROGRESS_SECONDS", 0.2)
    svc = service()
    writes: list[Any] = []
    save = svc.store.save_progress

    async def counting(reports: Any) -> set[str]:
        writes.append([(r[1], r[2]) for r in reports])
        return await save(reports)

    svc.store.save_progress = counting  # type: ignore[method-assign]

    def chatty(payload: dict[str, Any], ctx: TaskContext) -> None:
        import time

        for i in range(1, 101):  # a hundred reports in about half a second
            ctx.progress(i / 100, f"step {i}")
            time.sleep(0.005)

    svc.registry.register("chatty", chatty)

    async def go() -> Any:
        job = await svc.submit(NewJob(task="chatty", payload={}))
        stop = asyncio.Event()
        worker = WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=stop)
        running = asyncio.create_task(worker.run())
        while (await svc.get(job.job_id)).status.value != "completed":
            await asyncio.sleep(0.05)
        stop.set()
        await running
        return await svc.get(job.job_id)

    done = asyncio.run(go())
    assert (done.progress, done.progress_message) == (1.0, "step 100")  # the last one is kept
    assert 1 <= len(writes) <= 6, writes  # not a hundred


def _finished_long_ago(svc: Any, n: int) -> None:
    async def go() -> None:
        for i in range(n):
            job = await svc.submit(NewJob(task="echo", payload={"i": i}))
            [lease] = await svc.claim_next("w", ["default"], 1, 0.1, 3600)
            await svc.complete(lease, None)
            svc.store.jobs[job.job_id]["finished_at"] -= timedelta(seconds=5)

    asyncio.run(go())


def test_one_run_of_retention_deletes_everything_due_not_a_fixed_number_of_batches() -> None:
    # 5 full batches of 10, past recovery_max_batches=2: a cap on batches would cap the rate
    svc = service(retain_finished_seconds=1, recovery_batch_size=10, recovery_max_batches=2)
    _finished_long_ago(svc, 50)
    assert asyncio.run(svc.prune()) == 50
    assert not svc.store.jobs  # type: ignore[attr-defined]


def test_a_run_of_retention_stops_after_its_time_even_with_more_left() -> None:
    svc = service(
        retain_finished_seconds=1, recovery_batch_size=10, retention_seconds_per_run=1e-9
    )
    _finished_long_ago(svc, 25)
    assert asyncio.run(svc.prune()) == 10  # one batch, then the time is up
    assert asyncio.run(svc.prune()) == 10  # the next run goes on where it stopped
