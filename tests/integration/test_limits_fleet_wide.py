"""Concurrency and rate limits against real PostgreSQL and Redis, fleet-wide: judged from
the attempts' start and finish times in PostgreSQL, never from the wall clock."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from asyncz.fleet.plan import ready_backlog
from asyncz.jobs import AttemptOutcome, JobStatus, NewJob
from asyncz.settings import Settings
from tests.support.ledger import rows, status_counts
from tests.support.overlap import attempt_spans, most_at_once, most_starts_in
from tests.support.settings import open_service
from tests.support.waiting import wait_until
from tests.support.workers import start_worker, stop_worker

pytestmark = pytest.mark.integration

TASKS = "tests.support.limited_tasks"


def limited(settings: Settings, **limits: dict[str, object]) -> Settings:
    return settings.model_copy(
        update={"task_modules": TASKS, "task_limits": json.dumps(limits), "worker_concurrency": 5}
    )


async def submit(settings: Settings, news: list[NewJob]) -> list[str]:
    async with open_service(settings) as svc:
        items = []
        for at in range(0, len(news), 500):
            items += await svc.submit_many(news[at : at + 500])
        return [str(it.job_id) for it in items]


def drain(settings: Settings, total: int, workers: int = 4, timeout: float = 240) -> None:
    procs = [start_worker(settings) for _ in range(workers)]
    try:
        wait_until(
            lambda: status_counts(settings.database_url or "").get("completed") == total,
            timeout=timeout,
            interval=0.5,
            what=f"{total} completed jobs",
        )
    finally:
        logs = [stop_worker(p) for p in procs]
    assert all("Traceback" not in log for log in logs), logs


def test_a_task_limit_of_three_holds_across_four_workers_while_another_task_runs(
    settings: Settings,
) -> None:
    s = limited(settings, sleep={"concurrency": 3})
    sleeps = [NewJob(task="sleep", payload={"seconds": 0.2}) for _ in range(200)]
    echoes = [NewJob(task="echo", payload={"i": i}) for i in range(100)]
    asyncio.run(submit(s, sleeps + echoes))
    drain(s, 300)
    url = s.database_url or ""
    spans = attempt_spans(url, "sleep")
    assert len(spans) == 200
    assert most_at_once(spans) == 3  # the limit is reached, and never passed
    # Nothing held the other task back: every echo finished before the sleeps were half done.
    last_echo = max(r["finished_at"] for r in attempt_spans(url, "echo"))
    assert last_echo < sorted(r["finished_at"] for r in spans)[100]
    # No attempt was used up by waiting: one attempt per job.
    assert rows(url, "SELECT max(attempts) AS n FROM jobs")[0]["n"] == 1


def test_a_key_limit_of_two_holds_per_key_and_every_key_progresses(settings: Settings) -> None:
    s = limited(settings)
    news = [
        NewJob(task="keyed_sleep", payload={"seconds": 0.1}, concurrency_key=key)
        for _ in range(20)
        for key in ("A", "B")
    ]
    asyncio.run(submit(s, news))
    drain(s, 40)
    url = s.database_url or ""
    a, b = attempt_spans(url, "keyed_sleep", "A"), attempt_spans(url, "keyed_sleep", "B")
    assert len(a) == len(b) == 20
    assert most_at_once(a) == 2 and most_at_once(b) == 2
    # Both progressed side by side: each key started before the other's last start.
    assert a[0]["started_at"] < b[-1]["started_at"] and b[0]["started_at"] < a[-1]["started_at"]


def test_a_rate_of_ten_a_second_across_four_workers_holds_in_every_window(
    settings: Settings,
) -> None:
    s = limited(settings)
    asyncio.run(submit(s, [NewJob(task="rated_noop", payload={}) for _ in range(45)]))
    drain(s, 45)
    starts = [r["started_at"] for r in attempt_spans(s.database_url or "", "rated_noop")]
    assert len(starts) == 45
    assert most_starts_in(starts, timedelta(seconds=1)) <= 10
    assert most_starts_in(starts, timedelta(seconds=1)) >= 5  # the rate, not a trickle


def ten_are_not_starved_by_a_thousand(s: Settings, task: str, payload: dict[str, Any]) -> None:
    """Key A's 1,000 jobs and key B's 10 of one task, four workers: all of B's start before
    A's 100th does."""
    news = [NewJob(task=task, payload=payload, concurrency_key="A") for _ in range(1000)]
    news += [NewJob(task=task, payload=payload, concurrency_key="B") for _ in range(10)]
    asyncio.run(submit(s, news))
    url = s.database_url or ""

    def starts(key: str) -> list[Any]:
        return [r["started_at"] for r in attempt_spans(url, task, key)]

    procs = [start_worker(s) for _ in range(4)]
    try:  # until A's 100th has started and all of B's have
        wait_until(lambda: len(starts("A")) >= 100 and len(starts("B")) == 10, timeout=180)
    finally:
        for p in procs:
            stop_worker(p)
    assert max(starts("B")) < sorted(starts("A"))[99]


def test_one_keys_thousand_jobs_do_not_starve_another_keys_ten(settings: Settings) -> None:
    ten_are_not_starved_by_a_thousand(limited(settings), "fair_sleep", {})


def test_without_a_limit_one_keys_thousand_jobs_do_not_starve_another_keys_ten(
    settings: Settings,
) -> None:
    ten_are_not_starved_by_a_thousand(limited(settings), "sleep", {"seconds": 0.005})


def test_a_sync_task_past_its_timeout_keeps_its_slot_until_its_thread_returns(
    settings: Settings, tmp_path: Path
) -> None:
    # Its thread runs on for 6 s after the 1 s timeout, past two leases (3 s): only the
    # heartbeats can keep the slot that long. The calls' own lines say what overlapped.
    s = limited(settings)
    log = str(tmp_path / "calls.log")

    def call(name: str, seconds: float) -> NewJob:
        return NewJob(task="overrunning_call", payload={"log": log, "name": name,
                                                        "seconds": seconds})  # fmt: skip

    def lines() -> list[str]:
        return Path(log).read_text().splitlines() if Path(log).exists() else []

    asyncio.run(submit(s, [call("first", 7.0)]))
    worker = start_worker(s, concurrency=4)
    try:
        wait_until(lambda: lines() == ["start first"], timeout=30, what="the first call")
        asyncio.run(submit(s, [call("second", 0.0)]))
        url = s.database_url or ""
        wait_until(lambda: status_counts(url) == {"dead": 1, "completed": 1}, timeout=60,
                   interval=0.2, what="the first timed out, the second done")  # fmt: skip
    finally:
        output = stop_worker(worker)
    assert "Traceback" not in output, output
    assert lines() == ["start first", "end first", "start second", "end second"]


def test_a_held_back_job_says_why_and_runs_when_the_slot_frees(settings: Settings) -> None:
    s = limited(settings, sleep={"concurrency": 1})

    async def scenario() -> None:
        async with open_service(s) as svc:
            first = await svc.submit(NewJob(task="sleep", payload={"seconds": 0}))
            second = await svc.submit(
                NewJob(task="sleep", payload={"seconds": 0}, concurrency_key="tenant:42")
            )
            [lease] = await svc.claim_next("w1", ["default"], 10, 1.0, 600)
            assert lease.job_id == first.job_id
            assert await svc.claim_next("w1", ["default"], 10, 0.2, 600) == []
            held = await svc.get(second.job_id)
            assert held.status is JobStatus.QUEUED and held.attempts == 0
            assert "concurrency slot of task sleep" in (await svc.held_reason(held) or "")
            assert (await svc.broker.backlog(["default"]))["default"] == (0, 0)  # no scale-out
            assert await svc.complete(lease, None)
            [lease] = await svc.claim_next("w1", ["default"], 10, 1.0, 600)
            assert lease.job_id == second.job_id and lease.concurrency_key == "tenant:42"
            assert await svc.held_reason(await svc.get(second.job_id)) is None

    asyncio.run(scenario())


async def _hold_one(svc: object) -> tuple[object, str]:
    """Two sleep jobs under a limit of one: the first claimed, the second held back."""
    first = await svc.submit(NewJob(task="sleep", payload={"seconds": 0}))  # type: ignore[attr-defined]
    second = await svc.submit(NewJob(task="sleep", payload={"seconds": 0}))  # type: ignore[attr-defined]
    [lease] = await svc.claim_next("w1", ["default"], 10, 1.0, 600)  # type: ignore[attr-defined]
    assert lease.job_id == first.job_id
    assert await svc.claim_next("w1", ["default"], 10, 0.2, 600) == []  # type: ignore[attr-defined]
    return lease, second.job_id


@pytest.mark.parametrize("outcome", [AttemptOutcome.FAILED, AttemptOutcome.TIMED_OUT,
                                     AttemptOutcome.CANCELLED])  # fmt: skip
def test_a_failed_timed_out_or_cancelled_attempt_frees_its_slot(
    settings: Settings, outcome: AttemptOutcome
) -> None:
    s = limited(settings, sleep={"concurrency": 1})

    async def scenario() -> None:
        async with open_service(s) as svc:
            lease, held = await _hold_one(svc)
            assert await svc.fail(lease, "it ended", outcome) is not None
            [lease] = await svc.claim_next("w1", ["default"], 10, 1.0, 600)
            assert lease.job_id == held

    asyncio.run(scenario())


def test_a_lease_taken_away_frees_the_slot_at_the_next_heartbeat(settings: Settings) -> None:
    s = limited(settings, sleep={"concurrency": 1})

    async def scenario() -> None:
        async with open_service(s) as svc:
            lease, held = await _hold_one(svc)
            rows(s.database_url or "", "UPDATE jobs SET lease_token = gen_random_uuid() "
                 "WHERE id = %s", (lease.job_id,))  # fmt: skip
            outcome = await svc.heartbeat([lease])
            assert outcome.lost == {lease.job_id}
            [lease] = await svc.claim_next("w1", ["default"], 10, 1.0, 600)
            assert lease.job_id == held

    asyncio.run(scenario())


def test_a_silent_workers_slot_expires_with_its_lease(settings: Settings) -> None:
    s = limited(settings, sleep={"concurrency": 1})  # lease_timeout_seconds is 3 here

    async def scenario() -> None:
        async with open_service(s) as svc:
            _, held = await _hold_one(svc)
            svc.limits.slots.clear()  # as if the worker died: nobody releases or renews
            leases: list[object] = []
            while not leases:  # recovery's re-enqueue scan puts the held id back meanwhile
                await svc.recover()
                leases = await svc.claim_next("w2", ["default"], 10, 0.5, 600)
            assert [lease.job_id for lease in leases] == [held]  # type: ignore[attr-defined]

    asyncio.run(scenario())


def test_recovery_rescues_held_back_ids_that_redis_lost(settings: Settings) -> None:
    s = limited(settings, sleep={"concurrency": 1})

    async def scenario() -> None:
        async with open_service(s) as svc:
            lease, held = await _hold_one(svc)
            await svc.broker._r.flushdb()  # type: ignore[attr-defined]
            await svc.recover()
            assert (await svc.broker.backlog(["default"]))["default"][0] == 1
            assert await svc.complete(lease, None)
            [again] = await svc.claim_next("w1", ["default"], 10, 1.0, 600)
            assert again.job_id == held

    asyncio.run(scenario())


def test_the_fleet_backlog_leaves_out_paused_queues_even_after_redis_is_flushed(
    settings: Settings,
) -> None:
    s = settings.model_copy(update={"queues": "default,other"})

    async def scenario() -> None:
        async with open_service(s) as svc:
            await svc.pause_queue("default")
            for queue in ("default", "default", "other"):
                await svc.submit(NewJob(task="echo", payload={}, queue=queue))
            assert await ready_backlog(svc.broker, s.queue_list) == 1
            await svc.broker._r.flushdb()  # type: ignore[attr-defined]
            await svc.recover()  # re-enqueues the rows, and mirrors the pause again
            assert await ready_backlog(svc.broker, s.queue_list) == 1
            await svc.resume_queue("default")
            assert await ready_backlog(svc.broker, s.queue_list) == 3

    asyncio.run(scenario())
