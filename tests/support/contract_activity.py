"""The store and broker contract for what the system is doing: each task's figures over a
window, each queue's oldest due job, the attempts running now, and the live workers with
when each first registered; run with the rest of the contract against the in-memory adapters
and PostgreSQL + Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.jobs import AttemptOutcome, JobStatus
from tests.support.contract import Ports, insert, scenario


def test_task_figures_count_each_tasks_attempts_in_the_window(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        done = [await insert(store, task="echo") for _ in range(3)]
        failed = await insert(store, task="fail")
        running = await insert(store, task="sleep")
        leases = await store.claim([*done, failed, running], "w1", 600)
        by_id = {lease.job_id: lease for lease in leases}
        for job_id in done:
            assert await store.complete(by_id[job_id], None)
        await store.finish_failed(
            by_id[failed], status=JobStatus.DEAD, outcome=AttemptOutcome.FAILED, error="x"
        )
        figures = {r["task"]: r for r in await store.activity.task_figures(60)}
        assert set(figures) == {"echo", "fail"}  # the running attempt has not finished
        echo = figures["echo"]
        assert (echo["queue"], echo["runs"], echo["completed"], echo["failures"]) == (
            "default", 3, 3, 0
        )  # fmt: skip
        assert echo["retries"] == 0 and echo["run_p50_ms"] is not None
        assert echo["wait_p50_ms"] is not None and echo["wait_p50_ms"] >= 0
        assert (figures["fail"]["runs"], figures["fail"]["failures"]) == (1, 1)
        [now] = await store.activity.running_jobs(10)
        assert (now["job_id"], now["task"], now["worker_id"], now["attempt"]) == (
            running, "sleep", "w1", 1
        )  # fmt: skip
        assert now["elapsed_seconds"] >= 0

    scenario(ports, body)


def test_the_live_workers_say_since_when(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        await broker.register_worker("w-a", 60)
        await broker.register_worker("w-gone", 0)
        first = {w["worker_id"]: w for w in await broker.live_worker_list()}
        await broker.register_worker("w-a", 60)  # a refresh keeps the first registration
        again = {w["worker_id"]: w for w in await broker.live_worker_list()}
        assert set(again) == {"w-a"} and again["w-a"]["since_ms"] == first["w-a"]["since_ms"]
        assert again["w-a"]["expires_ms"] > again["w-a"]["since_ms"]
        await broker.unregister_worker("w-a")
        assert await broker.live_worker_list() == []

    scenario(ports, body)


def test_each_asked_queues_oldest_due_job_has_an_age(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        await insert(store, queue="a")
        await insert(store, queue="a", run_at=datetime.now(UTC) - timedelta(seconds=30))
        await insert(store, queue="b", delay_seconds=600)  # not due: no age
        await insert(store, queue="c", run_at=datetime.now(UTC) - timedelta(seconds=90))
        ages = await store.oldest_queued_by_queue(["a", "b", "none"])
        assert set(ages) == {"a"}  # "c" was not asked for
        assert 29 <= ages["a"] < 85

    scenario(ports, body)
