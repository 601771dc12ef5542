"""The engine's promises against real PostgreSQL and Redis: each job completed exactly once
by competing workers, nothing lost to a killed worker or a flushed Redis (however many
recovery runs it takes), fenced leases, retries with backoff, the dead-letter queue,
idempotency keys, declared queues only, heartbeats that outlive an error."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import redis

from asyncz.errors import DuplicateJobError, UnknownQueueError
from asyncz.jobs import JobStatus, NewJob
from asyncz.settings import Settings
from asyncz.worker.loop import WorkerLoop
from tests.support.ledger import rows, status_counts
from tests.support.settings import make_settings, open_service
from tests.support.waiting import wait_until
from tests.support.workers import running_worker, start_worker, stop_worker

pytestmark = pytest.mark.integration


def redis_ids(settings: Settings) -> int:
    r = redis.Redis.from_url(settings.redis_url or "")
    return sum(r.zcard(k) for k in r.keys(f"{settings.redis_prefix}:*:ready")) + sum(
        r.zcard(k) for k in r.keys(f"{settings.redis_prefix}:*:delayed")
    )


async def submit_many(settings: Settings, n: int, task: str = "echo", **kw: object) -> list[str]:
    async with open_service(settings) as svc:
        out = []
        for i in range(n):
            sub = await svc.submit(NewJob(task=task, payload={"i": i, **kw}))  # type: ignore[arg-type]
            out.append(sub.job_id)
        return out


async def work_until(
    settings: Settings,
    done: object,
    *,
    timeout: float = 60,
    concurrency: int = 10,
    rand: object = None,
) -> dict[str, object]:
    """Run one in-process worker loop until ``done()`` is true."""
    async with open_service(settings) as svc:
        if rand is not None:
            svc.leases.rand = rand  # type: ignore[assignment]
        stop = asyncio.Event()
        loop = WorkerLoop(svc, remaining_seconds=lambda: 3600, stop=stop, concurrency=concurrency)
        runner = asyncio.create_task(loop.run())
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:  # type: ignore[operator]
            await asyncio.sleep(0.1)
        stop.set()
        return await runner


def test_thousand_jobs_four_worker_processes_each_completed_exactly_once(
    settings: Settings,
) -> None:
    ids = asyncio.run(submit_many(settings, 1000))
    workers = [start_worker(settings, idle_exit=3) for _ in range(4)]
    outputs: list[str] = []
    try:
        wait_until(
            lambda: status_counts(settings.database_url or "").get("completed") == 1000,
            timeout=180,
            interval=0.5,
            what="1,000 completed jobs",
        )
    except AssertionError as exc:  # say where the rest are (before the workers stop), and
        # what the workers logged
        where = rows(settings.database_url, "SELECT status, worker_id, count(*) AS n, "
                     "max(heartbeat_at) AS heartbeat FROM jobs WHERE status <> 'completed' "
                     "GROUP BY 1, 2")  # fmt: skip
        outputs = [stop_worker(w) for w in workers]
        logged = [line for out in outputs for line in out.splitlines()
                  if line and '"status":"completed"' not in line]  # fmt: skip
        raise AssertionError(f"{exc}: {where}\n" + "\n".join(logged[-60:])) from None
    finally:
        outputs = outputs or [stop_worker(w) for w in workers]
    per_job = rows(
        settings.database_url,
        """
        SELECT j.id, j.status, j.attempts,
               count(a.*) FILTER (WHERE a.outcome = 'completed') AS completed_rows,
               count(a.*) AS attempt_rows
          FROM jobs j LEFT JOIN job_attempt_history a ON a.job_id = j.id GROUP BY j.id""",
    )
    assert len(per_job) == len(ids) == 1000
    assert all(r["status"] == "completed" for r in per_job)
    assert all(r["completed_rows"] == 1 and r["attempt_rows"] == 1 for r in per_job)
    assert redis_ids(settings) == 0
    # every worker took part (the queue was shared, not drained by one)
    workers_seen = rows(settings.database_url, "SELECT DISTINCT worker_id FROM jobs")
    assert len(workers_seen) >= 2, outputs


def test_same_id_pushed_five_times_runs_once(settings: Settings) -> None:
    [job_id] = asyncio.run(submit_many(settings, 1, task="sleep", seconds=1.0))
    r = redis.Redis.from_url(settings.redis_url or "")
    ready = f"{settings.redis_prefix}:{{default}}:ready"
    delayed = f"{settings.redis_prefix}:{{default}}:delayed"

    def redeliver() -> None:
        r.zadd(ready, {job_id: 1})
        r.zadd(delayed, {f"0|{job_id}": 1})  # due at once: promoted as a second copy

    def done() -> bool:
        status = rows(settings.database_url, "SELECT status FROM jobs WHERE id = %s", (job_id,))
        if status[0]["status"] == "processing" and not getattr(done, "pushed", False):
            redeliver()  # pushes 2 and 3 while the first delivery runs
            redeliver()
            done.pushed = True  # type: ignore[attr-defined]
        if status[0]["status"] == "completed" and not getattr(done, "after", False):
            r.zadd(ready, {job_id: 1})  # push 4 and 5 after completion
            r.zadd(delayed, {f"0|{job_id}": 1})
            done.after = time.monotonic()  # type: ignore[attr-defined]
        after = getattr(done, "after", None)
        return after is not None and time.monotonic() - after > 2.0

    summary = asyncio.run(work_until(settings, done))
    attempts = rows(
        settings.database_url, "SELECT * FROM job_attempt_history WHERE job_id = %s", (job_id,)
    )
    job = rows(settings.database_url, "SELECT * FROM jobs WHERE id = %s", (job_id,))[0]
    assert job["status"] == "completed" and job["attempts"] == 1
    assert [a["outcome"] for a in attempts] == ["completed"]
    assert summary["claimed"] == 1
    assert redis_ids(settings) == 0


def test_ids_that_are_not_job_ids_in_the_ready_set_are_skipped(settings: Settings) -> None:
    """A member that is no job id (another program's, or a UUID in a form PostgreSQL refuses)
    must not sink the claim of the real ids popped with it."""
    [job_id] = asyncio.run(submit_many(settings, 1))
    r = redis.Redis.from_url(settings.redis_url or "")
    ready = f"{settings.redis_prefix}:{{default}}:ready"
    foreign = ["not-a-job", f"urn:uuid:{job_id}", job_id.replace("-", "") + "0", ""]
    r.zadd(ready, {member: 0 for member in foreign})  # ahead of the real id

    async def claim() -> list[str]:
        async with open_service(settings) as svc:
            leases = await svc.claim_next("w", ["default"], 10, 0.5, 3600)
            return [lease.job_id for lease in leases]

    assert asyncio.run(claim()) == [job_id]
    assert r.zcard(ready) == 0


def test_sigkilled_worker_job_is_recovered_and_completed(settings: Settings) -> None:
    [job_id] = asyncio.run(submit_many(settings, 1, task="sleep", seconds=30))
    victim = start_worker(settings)
    try:
        wait_until(
            lambda: rows(
                settings.database_url,
                "SELECT 1 FROM jobs WHERE id=%s AND status='processing'",
                (job_id,),
            ),
            timeout=30,
            what="the job to start",
        )
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    finally:
        stop_worker(victim)
    # Nobody heartbeats now. Make the job short so the second worker finishes quickly.
    rows(
        settings.database_url,
        "UPDATE jobs SET payload = '{\"seconds\": 0.2}' WHERE id=%s",
        (job_id,),
    )

    async def recover_after_lease_timeout() -> object:
        async with open_service(settings) as svc:
            first = await svc.recover()
            assert first.requeued == []  # the lease has not expired yet
            await asyncio.sleep(settings.lease_timeout_seconds + 1)
            return await svc.recover()

    report = asyncio.run(recover_after_lease_timeout())
    assert report.requeued == [job_id]
    asyncio.run(
        work_until(settings, lambda: status_counts(settings.database_url or "").get("completed"))
    )
    outcomes = rows(
        settings.database_url,
        "SELECT outcome, worker_id FROM job_attempt_history WHERE job_id=%s ORDER BY attempt",
        (job_id,),
    )
    assert [o["outcome"] for o in outcomes] == ["lost", "completed"]
    assert outcomes[0]["worker_id"] != outcomes[1]["worker_id"]


def test_a_worker_whose_lease_was_taken_cannot_heartbeat_complete_or_fail(
    settings: Settings,
) -> None:
    async def scenario() -> None:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="echo", payload={}))
            [old] = await svc.claim_next("w-old", ["default"], 1, 1, 3600)
            rows(
                settings.database_url,
                "UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id=%s",
                (sub.job_id,),
            )
            assert (await svc.recover()).requeued == [sub.job_id]
            [new] = await svc.claim_next("w-new", ["default"], 1, 1, 3600)
            assert new.token != old.token and new.attempt == 2
            assert (await svc.heartbeat([old])).lost == {old.job_id}
            assert await svc.complete(old, {"late": True}) is False
            assert await svc.fail(old, "late failure") is None
            assert (await svc.heartbeat([new])).lost == set()
            assert await svc.complete(new, {"ok": True}) is True
            job = await svc.get(sub.job_id)
            assert job.status is JobStatus.COMPLETED and job.result == {"ok": True}
            outcomes = [a.outcome for a in await svc.attempts(sub.job_id)]
            assert [str(o) for o in outcomes] == ["lost", "completed"]

    asyncio.run(scenario())


def test_flushall_with_500_queued_and_delayed_jobs_loses_nothing(settings: Settings) -> None:
    async def submit() -> None:
        async with open_service(settings) as svc:
            for i in range(500):
                delay = 1.5 if i % 2 else 0.0
                await svc.submit(NewJob(task="echo", payload={"i": i}, delay_seconds=delay))

    asyncio.run(submit())
    assert redis_ids(settings) == 500
    redis.Redis.from_url(settings.redis_url or "").flushdb()  # FLUSHALL, scoped to our test db
    assert redis_ids(settings) == 0

    async def recover() -> object:
        async with open_service(settings) as svc:
            return await svc.recover()

    report = asyncio.run(recover())
    assert report.reenqueued + report.restored_delayed == 500
    asyncio.run(
        work_until(
            settings, lambda: status_counts(settings.database_url or "").get("completed") == 500
        )
    )
    assert status_counts(settings.database_url or "") == {"completed": 500}


def test_redis_down_during_submit_the_job_is_accepted_and_later_completes(
    settings: Settings, pg_url: str
) -> None:
    down = make_settings(
        pg_url,
        "redis://127.0.0.1:1/0",
        redis_socket_timeout_seconds=0.5,
        artifact_dir=settings.artifact_dir,
    )

    async def submit() -> object:
        async with open_service(down) as svc:
            return await svc.submit(NewJob(task="echo", payload={"durable": True}))

    sub = asyncio.run(submit())
    assert sub.status is JobStatus.QUEUED and sub.enqueued is False
    assert redis_ids(settings) == 0

    async def recover() -> object:
        async with open_service(settings) as svc:
            return await svc.recover()

    assert asyncio.run(recover()).reenqueued == 1
    asyncio.run(
        work_until(settings, lambda: status_counts(settings.database_url or "").get("completed"))
    )
    job = rows(settings.database_url, "SELECT status, result FROM jobs WHERE id=%s", (sub.job_id,))
    assert job == [{"status": "completed", "result": {"durable": True}}]


def test_flaky_completes_on_attempt_three_after_growing_scheduled_delays(
    settings: Settings,
) -> None:
    # delays of 1 s and 2 s: long enough to watch the job wait, scheduled, held by nobody
    settings = settings.model_copy(update={"backoff_base_seconds": 1.0})

    async def scenario() -> list[dict[str, object]]:
        async with open_service(settings) as svc:
            sub = await svc.submit(NewJob(task="flaky", payload={"failures": 2}, max_retries=3))
            return [{"id": sub.job_id}]

    [job] = asyncio.run(scenario())
    job_id = job["id"]
    seen: list[dict[str, object]] = []

    def done() -> bool:
        r = rows(
            settings.database_url,
            "SELECT status, run_at, now() AS now, attempts FROM jobs WHERE id=%s",
            (job_id,),
        )[0]
        if r["status"] == "queued" and r["run_at"] > r["now"]:
            seen.append(r)  # scheduled in the future: nobody holds it while it waits
        return r["status"] == "completed"

    # rand() = 1 makes the full-jitter delay its ceiling: base, 2 x base.
    asyncio.run(work_until(settings, done, rand=lambda: 1.0))
    attempts = rows(
        settings.database_url,
        "SELECT * FROM job_attempt_history WHERE job_id=%s ORDER BY attempt",
        (job_id,),
    )
    assert [a["outcome"] for a in attempts] == ["failed", "failed", "completed"]
    gaps = [
        (attempts[i + 1]["started_at"] - attempts[i]["finished_at"]).total_seconds()
        for i in range(2)
    ]
    base = settings.backoff_base_seconds
    assert gaps[0] >= base * 0.95 and gaps[1] >= 2 * base * 0.95
    assert gaps[1] > gaps[0]
    assert seen, "the retry was never visible as a scheduled (not slept) job"
    job_row = rows(
        settings.database_url, "SELECT attempts, result FROM jobs WHERE id=%s", (job_id,)
    )[0]
    assert job_row == {"attempts": 3, "result": {"succeeded_on_attempt": 3}}
    # the completed attempt is the job's own row: job_attempts holds the two that failed,
    # and the job's history (GET /jobs/{id}/attempts) all three
    stored = rows(settings.database_url, "SELECT outcome FROM job_attempts WHERE job_id=%s",
                  (job_id,))  # fmt: skip
    assert [r["outcome"] for r in stored] == ["failed", "failed"]

    async def history() -> list[Any]:
        async with open_service(settings) as svc:
            return await svc.attempts(job_id)

    shown = asyncio.run(history())
    assert [(a.attempt, a.outcome) for a in shown] == [(1, "failed"), (2, "failed"),
                                                      (3, "completed")]  # fmt: skip
    last = shown[-1]
    assert last.worker_id and last.started_at == attempts[2]["started_at"]
    assert last.finished_at is not None and last.finished_at >= last.started_at
    assert last.duration_ms == attempts[2]["duration_ms"] >= 0


def test_fail_ends_dead_after_three_attempts_and_replay_sends_it_back(settings: Settings) -> None:
    async def submit() -> str:
        async with open_service(settings) as svc:
            return (
                await svc.submit(NewJob(task="fail", payload={"message": "boom"}, max_retries=2))
            ).job_id

    job_id = asyncio.run(submit())
    asyncio.run(
        work_until(settings, lambda: status_counts(settings.database_url or "").get("dead"))
    )
    job = rows(settings.database_url, "SELECT * FROM jobs WHERE id=%s", (job_id,))[0]
    assert job["status"] == "dead" and job["attempts"] == 3
    assert job["last_error"] == "TaskFailedError: boom"
    outcomes = rows(
        settings.database_url,
        "SELECT outcome, error FROM job_attempt_history WHERE job_id=%s ORDER BY attempt",
        (job_id,),
    )
    assert [o["outcome"] for o in outcomes] == ["failed"] * 3

    async def replay() -> object:
        async with open_service(settings) as svc:
            return await svc.replay(job_id)

    replayed = asyncio.run(replay())
    assert replayed.status is JobStatus.QUEUED
    assert redis_ids(settings) == 1
    # it runs again with a fresh retry budget: three more attempts, then dead again
    asyncio.run(
        work_until(
            settings,
            lambda: rows(
                settings.database_url,
                "SELECT 1 FROM jobs WHERE id=%s AND status='dead' AND attempts=6",
                (job_id,),
            ),
        )
    )
    assert (
        len(
            rows(
                settings.database_url,
                "SELECT 1 FROM job_attempt_history WHERE job_id=%s",
                (job_id,),
            )
        )
        == 6
    )


def test_two_concurrent_submits_with_one_idempotency_key_create_one_row(settings: Settings) -> None:
    async def scenario() -> list[object]:
        async with open_service(settings) as a, open_service(settings) as b:
            new = NewJob(task="echo", payload={}, idempotency_key="order-42")
            return await asyncio.gather(a.submit(new), b.submit(new), return_exceptions=True)

    results = asyncio.run(scenario())
    ok = [r for r in results if not isinstance(r, BaseException)]
    dup = [r for r in results if isinstance(r, DuplicateJobError)]
    assert len(ok) == 1 and len(dup) == 1
    assert dup[0].job_id == ok[0].job_id and dup[0].status == "queued"
    assert rows(settings.database_url, "SELECT count(*) AS n FROM jobs") == [{"n": 1}]


def test_all_timestamps_are_timezone_aware_utc_from_postgres(settings: Settings) -> None:
    # Even a session in another time zone yields UTC datetimes.
    tokyo = psycopg.conninfo.make_conninfo(
        settings.database_url or "", options="-c timezone=Asia/Tokyo"
    )
    local = settings.model_copy(update={"database_url": tokyo})

    async def scenario() -> object:
        async with open_service(local) as svc:
            sub = await svc.submit(NewJob(task="echo", payload={}))
            [lease] = await svc.claim_next("w", ["default"], 1, 1, 3600)
            await svc.complete(lease, {})
            return await svc.get(sub.job_id), await svc.attempts(sub.job_id)

    job, attempts = asyncio.run(scenario())
    stamps = [
        job.created_at,
        job.run_at,
        job.started_at,
        job.finished_at,
        job.updated_at,
        attempts[0].started_at,
        attempts[0].finished_at,
    ]
    for stamp in stamps:
        assert isinstance(stamp, datetime) and stamp.tzinfo is not None
        assert stamp.utcoffset() == timedelta(0) and stamp.tzinfo is UTC
    assert abs(datetime.now(UTC) - job.created_at) < timedelta(minutes=5)


def test_batched_completion_is_fenced_per_attempt(settings: Settings) -> None:
    async def scenario() -> None:
        async with open_service(settings) as svc:
            for i in range(3):
                await svc.submit(NewJob(task="echo", payload={"i": i}))
            leases = await svc.claim_next("w", ["default"], 3, 1, 3600)
            assert len(leases) == 3
            stolen = leases[0]
            rows(
                settings.database_url,
                "UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id=%s",
                (stolen.job_id,),
            )
            assert (await svc.recover()).requeued == [stolen.job_id]
            held = await svc.complete_many([(lease, {"n": n}) for n, lease in enumerate(leases)])
            assert held == {leases[1].job_id, leases[2].job_id}
            for n, lease in enumerate(leases[1:], start=1):
                job = await svc.get(lease.job_id)
                assert job.status is JobStatus.COMPLETED and job.result == {"n": n}
            assert (await svc.get(stolen.job_id)).status is JobStatus.QUEUED
            outcomes = [str(a.outcome) for a in await svc.attempts(leases[1].job_id)]
            assert outcomes == ["completed"]

    asyncio.run(scenario())


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
            async with running_worker(svc, concurrency=1):
                while (await svc.get(sub.job_id)).status in (
                    JobStatus.QUEUED,
                    JobStatus.PROCESSING,
                ):
                    await asyncio.sleep(0.1)
            return calls, await svc.get(sub.job_id)

    calls, job = asyncio.run(scenario())
    assert job.status is JobStatus.COMPLETED, job
    assert calls >= 3, f"the heartbeat stopped after {calls} call(s)"
