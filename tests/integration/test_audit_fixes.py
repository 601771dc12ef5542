"""Issue 14: the audit's holes in the engine, each reproduced against real servers."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
import redis

from asyncz.errors import InvalidInputError, UnknownQueueError
from asyncz.jobs import AttemptOutcome, JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.tasks import task
from asyncz.worker.loop import WorkerLoop
from tests.support.ledger import rows
from tests.support.settings import make_settings, open_service

pytestmark = pytest.mark.integration


async def _claim_one(svc: Any, settings: Settings) -> Any:
    [lease] = await svc.claim_next("w-1", settings.queue_list, 1, 2.0, 3600)
    return lease


@pytest.mark.parametrize(
    ("outcome", "retries"),
    [(AttemptOutcome.FAILED, 3), (AttemptOutcome.TIMED_OUT, 3), (AttemptOutcome.FAILED, 0)],
)
def test_cancel_requested_during_a_failing_attempt_ends_cancelled(
    settings: Settings, outcome: AttemptOutcome, retries: int
) -> None:
    async def scenario() -> tuple[Any, Any]:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="fail", payload={}, max_retries=retries))
            lease = await _claim_one(svc, settings)
            assert await svc.cancel(sub.job_id) is JobStatus.PROCESSING  # flagged only
            done = await svc.fail(lease, "boom", outcome)
            return done, await svc.get(sub.job_id)

    done, job = asyncio.run(scenario())
    assert done is not None and done.status is JobStatus.CANCELLED
    assert job.status is JobStatus.CANCELLED and job.finished_at is not None
    [attempt] = rows(
        settings.database_url or "", "SELECT outcome FROM job_attempts WHERE job_id=%s", (job.id,)
    )
    assert attempt["outcome"] == outcome.value  # the attempt log keeps what really happened


def test_cancel_during_an_attempt_that_then_times_out_ends_cancelled(
    clean: None, pg_url: str, redis_server_url: str, tmp_path: Any
) -> None:
    # the heartbeat is slower than the timeout: the cancel request never reaches the worker
    settings = make_settings(
        pg_url, redis_server_url, heartbeat_seconds=30.0, artifact_dir=str(tmp_path)
    )

    async def scenario() -> Any:
        async with open_service(settings) as svc:
            sub = await svc.submit(
                NewJob(task="sleep", payload={"seconds": 4}, timeout_seconds=2, max_retries=3)
            )
            stop = asyncio.Event()
            loop = WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=stop, concurrency=1)
            runner = asyncio.create_task(loop.run())
            while (await svc.get(sub.job_id)).status is not JobStatus.PROCESSING:
                await asyncio.sleep(0.05)
            await svc.cancel(sub.job_id)
            for _ in range(200):
                job = await svc.get(sub.job_id)
                if job.status is not JobStatus.PROCESSING:
                    break
                await asyncio.sleep(0.05)
            stop.set()
            await runner
            return job

    job = asyncio.run(scenario())
    assert job.status is JobStatus.CANCELLED, f"ended {job.status} (cancel flag lost)"
    stranded = rows(
        settings.database_url or "",
        "SELECT id FROM jobs WHERE status = 'queued' AND cancel_requested",
    )
    assert stranded == []


def test_a_queue_no_worker_polls_is_refused_at_submit(settings: Settings) -> None:
    async def scenario() -> None:
        async with open_service(settings) as svc:
            with pytest.raises(UnknownQueueError, match="emails"):
                await svc.submit(NewJob(task="echo", payload={}, queue="emails"))
            declared = settings.model_copy(update={"queues": "default,emails"})
            async with open_service(declared) as other:
                await other.submit(NewJob(task="echo", payload={}, queue="emails"))

    asyncio.run(scenario())
    assert [r["queue"] for r in rows(settings.database_url or "", "SELECT queue FROM jobs")] == [
        "emails"
    ]


def test_after_a_redis_flush_every_queued_row_is_restored_beyond_one_runs_cap(
    clean: None, pg_url: str, redis_server_url: str, tmp_path: Any
) -> None:
    # one recovery run re-enqueues at most 2 x 50 = 100 rows
    settings = make_settings(
        pg_url,
        redis_server_url,
        recovery_batch_size=50,
        recovery_max_batches=2,
        artifact_dir=str(tmp_path),
    )

    async def scenario() -> list[int]:
        async with open_service(settings) as svc:
            for i in range(300):
                await svc.submit(NewJob(task="echo", payload={"i": i}, delay_seconds=3600))
            r = redis.Redis.from_url(redis_server_url)
            r.flushdb()
            restored = []
            for _ in range(4):
                await svc.recover()
                restored.append(
                    sum(r.zcard(k) for k in r.keys(f"{settings.redis_prefix}:*:delayed"))
                )
            return restored

    restored = asyncio.run(scenario())
    assert restored[-1] == 300, f"restored after each run: {restored}"
    assert restored[0] == 100  # each run stays within its cap


def test_an_unexpected_error_in_one_heartbeat_does_not_end_the_heartbeats(
    settings: Settings,
) -> None:
    async def scenario() -> tuple[int, Any]:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="sleep", payload={"seconds": 3}))
            real = svc.heartbeat
            calls = 0

            async def flaky_heartbeat(leases: Any) -> Any:
                nonlocal calls
                calls += 1
                if calls == 1:
                    raise RuntimeError("an error no guard expected")
                return await real(leases)

            svc.heartbeat = flaky_heartbeat  # type: ignore[method-assign]
            stop = asyncio.Event()
            loop = WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=stop, concurrency=1)
            runner = asyncio.create_task(loop.run())
            while (await svc.get(sub.job_id)).status in (JobStatus.QUEUED, JobStatus.PROCESSING):
                await asyncio.sleep(0.1)
            stop.set()
            await runner
            return calls, await svc.get(sub.job_id)

    calls, job = asyncio.run(scenario())
    assert job.status is JobStatus.COMPLETED, job
    assert calls >= 3, f"the heartbeat stopped after {calls} call(s)"


def test_one_unstorable_result_fails_only_its_own_attempt_in_a_batch(settings: Settings) -> None:
    from asyncz.worker.batching import CompletionBatcher

    async def scenario() -> list[Any]:
        async with open_service(settings) as svc:
            for i in range(3):
                await svc.submit(NewJob(task="echo", payload={"i": i}, max_retries=0))
            leases = await svc.claim_next("w-1", settings.queue_list, 3, 2.0, 3600)
            assert len(leases) == 3
            batcher = CompletionBatcher(svc)
            results = [{"ok": 1}, {"bad": float("nan")}, {"ok": 3}]
            return await asyncio.gather(
                *(batcher.complete(lease, r) for lease, r in zip(leases, results, strict=True)),
                return_exceptions=True,
            )

    outcomes = asyncio.run(scenario())
    assert outcomes[0] is True and outcomes[2] is True, outcomes
    assert isinstance(outcomes[1], InvalidInputError), outcomes
    counts = rows(
        settings.database_url or "", "SELECT status, count(*) AS n FROM jobs GROUP BY status"
    )
    assert {r["status"]: r["n"] for r in counts} == {"completed": 2, "processing": 1}


@task("audit_unstorable_result")
def _unstorable_result(payload: dict[str, Any]) -> Any:
    kind = payload["kind"]
    if kind == "nan":
        return {"x": [1.0, math.nan]}
    if kind == "nul":
        return {"text": "a\u0000b"}
    return {"fine": True}


def test_a_task_returning_nan_or_nul_fails_with_a_clear_error_others_complete(
    settings: Settings,
) -> None:
    async def scenario() -> dict[str, Any]:
        async with open_service(settings) as svc:
            ids = {}
            for kind in ("nan", "nul", "fine", "fine2"):
                sub = await svc.submit(
                    NewJob(task="audit_unstorable_result", payload={"kind": kind}, max_retries=0)
                )
                ids[kind] = sub.job_id
            stop = asyncio.Event()
            loop = WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=stop, concurrency=4)
            runner = asyncio.create_task(loop.run())
            for _ in range(200):
                jobs = {k: await svc.get(i) for k, i in ids.items()}
                if all(j.status in (JobStatus.COMPLETED, JobStatus.DEAD) for j in jobs.values()):
                    break
                await asyncio.sleep(0.1)
            stop.set()
            await runner
            return jobs

    jobs = asyncio.run(scenario())
    assert (
        jobs["fine"].status is JobStatus.COMPLETED and jobs["fine2"].status is JobStatus.COMPLETED
    )
    for kind in ("nan", "nul"):
        assert jobs[kind].status is JobStatus.DEAD, jobs[kind]
        assert "result is not storable as JSON" in (jobs[kind].last_error or ""), jobs[kind]


def test_health_is_a_cached_ping_without_error_text(settings: Settings) -> None:
    from asyncz import runtime
    from asyncz.api.app import HEALTH_CACHE_SECONDS, ApiState

    broken = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    state = ApiState(broken, None, None)

    async def scenario() -> list[dict[str, Any]]:
        svc = await state.service()
        pings = []
        real_ping = svc.store.ping

        async def counted_ping() -> None:
            pings.append(1)
            await real_ping()

        svc.store.ping = counted_ping  # type: ignore[method-assign]
        try:
            reports = [await state.health() for _ in range(5)]
            assert len(pings) == 1, "each /health call reached the database"
            state._health = (state._health[0] - HEALTH_CACHE_SECONDS, state._health[1])  # type: ignore[index]
            reports.append(await state.health())
            assert len(pings) == 2
            return reports
        finally:
            # Closed here, not left to asyncio.run's teardown: psycopg_pool swallows the
            # CancelledError of a connection attempt still under way (its pool workers catch
            # it to keep their count), and that worker then waits on its queue for ever.
            await runtime.close_service(svc)

    reports = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert reports[-1] == {
        "status": "degraded",
        "dependencies": {"postgres": "ok", "redis": "down"},
    }


def test_error_bodies_carry_no_driver_text(settings: Settings) -> None:
    from asyncz.errors import StoreUnavailableError

    async def scenario() -> None:
        async with open_service(settings) as svc:
            with pytest.raises(InvalidInputError) as bad:
                await svc.list_jobs(queue="a\u0000b")
            assert "syntax" not in str(bad.value) and "0x00" not in str(bad.value)
        down = settings.model_copy(
            update={"database_url": "postgresql://postgres@127.0.0.1:1/none"}
        )
        async with open_service(down) as svc:
            with pytest.raises(StoreUnavailableError) as gone:
                await svc.get("00000000-0000-0000-0000-000000000000")
            assert str(gone.value) == "database unavailable: try again shortly"

    asyncio.run(scenario())


@task("audit_big_result")
def _big_result(payload: dict[str, Any]) -> Any:
    return {"blob": "x" * int(payload["bytes"])}


def test_pages_stay_under_a_lambda_response_and_big_results_fail_clearly(
    settings: Settings,
) -> None:
    from asyncz.pagination import PAGE_BUDGET_BYTES

    small = settings.model_copy(update={"max_result_bytes": 1000})

    async def scenario() -> tuple[Any, list[Any], Any]:
        async with open_service(settings) as svc:
            for _ in range(40):  # 40 x 200 KB of payload: 8 MB, more than a response holds
                await svc.submit(NewJob(task="echo", payload={"blob": "y" * 200_000}))
            pages = []
            cursor = None
            while True:
                page = await svc.list_jobs(limit=500, cursor=cursor)
                pages.append(page.items)
                cursor = page.next_cursor
                if not cursor:
                    break
        async with open_service(small) as svc:
            sub = await svc.submit(NewJob(task="audit_big_result", payload={"bytes": 5000}))
            stop = asyncio.Event()
            loop = WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=stop, concurrency=1)
            runner = asyncio.create_task(loop.run())
            while (await svc.get(sub.job_id)).attempts == 0 or (
                await svc.get(sub.job_id)
            ).status is JobStatus.PROCESSING:
                await asyncio.sleep(0.05)
            stop.set()
            await runner
            return len(pages), pages, await svc.get(sub.job_id)

    n, pages, big = asyncio.run(scenario())
    assert n >= 2 and sum(len(p) for p in pages) == 40
    for items in pages:
        assert sum(len(j.payload["blob"]) for j in items) <= PAGE_BUDGET_BYTES
    assert "ASYNCZ_MAX_RESULT_BYTES" in (big.last_error or ""), big
