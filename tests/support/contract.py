"""The store and broker contract: one suite, run against the in-memory adapters (unit tier,
tests/unit/test_contract_memory.py) and PostgreSQL + Redis (integration tier,
tests/integration/test_contract_real.py). A module imports these tests and defines the
``ports`` fixture: a function returning an async context manager of (store, broker)."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asyncz.errors import InvalidInputError
from asyncz.jobs import AttemptOutcome, JobStatus, NewJob
from asyncz.port_types import Dispatch, epoch_ms

Ports = Callable[[], Any]


def new(**kw: Any) -> NewJob:
    values: dict[str, Any] = {"task": "echo", "payload": {"x": 1}, "max_retries": 2}
    values.update(kw)
    values.setdefault("timeout_seconds", 30)
    return NewJob(**values)


def scenario(ports: Ports, body: Callable[[Any, Any], Any]) -> Any:
    async def go() -> Any:
        async with ports() as (store, broker):
            return await body(store, broker)

    return asyncio.run(go())


async def insert(store: Any, **kw: Any) -> str:
    job_id = str(uuid.uuid4())
    assert await store.insert_job(job_id, new(**kw)) is not None
    return job_id


def test_insert_then_read_back(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        now_row = await store.insert_job(job_id := str(uuid.uuid4()), new(priority=5))
        assert now_row["due"] is True and abs(now_row["run_at_ms"] - epoch_ms()) < 60_000
        later = await store.insert_job(str(uuid.uuid4()), new(delay_seconds=600))
        assert later["due"] is False
        job = await store.get_job(job_id)
        assert (job.status, job.priority, job.attempts, job.payload) == ("queued", 5, 0, {"x": 1})
        assert await store.get_job(str(uuid.uuid4())) is None

    scenario(ports, body)


def test_a_repeated_idempotency_key_inserts_nothing(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        first = await insert(store, idempotency_key="k-1")
        assert await store.insert_job(str(uuid.uuid4()), new(idempotency_key="k-1")) is None
        assert str((await store.get_by_idempotency_key("k-1"))["id"]) == first

    scenario(ports, body)


def test_find_jobs_and_key_holders_say_where_each_belongs(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        due = await insert(store, idempotency_key="f-1", priority=3)
        later = await insert(store, delay_seconds=600, idempotency_key="f-2")
        found = await store.find_jobs([due, later, str(uuid.uuid4())])
        assert set(found) == {due, later}
        assert (found[due]["status"], found[due]["queue"], found[due]["priority"]) == (
            "queued", "default", 3)  # fmt: skip
        assert found[due]["due"] is True and found[later]["due"] is False
        assert found[later]["run_at"] > datetime.now(UTC)
        holder = await store.get_by_idempotency_key("f-2")
        assert str(holder["id"]) == later and holder["due"] is False
        holders = await store.get_by_idempotency_keys(["f-1"])
        assert holders["f-1"]["status"] == "queued" and holders["f-1"]["due"] is True

    scenario(ports, body)


def test_claim_is_fenced(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        due, later = await insert(store), await insert(store, delay_seconds=600)
        long = await insert(store, timeout_seconds=900)
        [lease] = await store.claim([due, later], "w1", 600)
        assert lease.job_id == due and lease.attempt == 1
        assert await store.claim([due], "w2", 600) == []  # a duplicate delivery
        assert await store.claim([long], "w2", 600) == []  # does not fit the worker's time
        back = {str(r["id"]): r["due"] for r in await store.unclaimed([due, later, long])}
        assert back == {later: False, long: True}  # put back where each belongs

    scenario(ports, body)


def test_a_lost_lease_can_write_nothing(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w1", 600)
        stale = replace(lease, token=str(uuid.uuid4()))  # another worker's attempt now
        assert await store.heartbeat([stale]) == {}
        assert await store.complete(stale, {"r": 1}) is False
        assert (
            await store.finish_failed(
                stale, status=JobStatus.DEAD, outcome=AttemptOutcome.FAILED, error="x"
            )
            is None
        )
        assert await store.heartbeat([lease]) == {job_id: False}
        assert await store.complete(lease, {"r": 1}) is True
        job = await store.get_job(job_id)
        assert (job.status, job.result) == ("completed", {"r": 1})
        [attempt] = await store.list_attempts(job_id)
        assert attempt.outcome == "completed"

    scenario(ports, body)


def test_a_failed_attempt_is_retried_later_unless_cancelled(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        retried, cancelled = await insert(store), await insert(store)
        leases = await store.claim([retried, cancelled], "w1", 600)
        by_id = {lease.job_id: lease for lease in leases}
        row = await store.finish_failed(
            by_id[retried], status=JobStatus.QUEUED, outcome=AttemptOutcome.FAILED,
            error="boom", delay_seconds=300,
        )  # fmt: skip
        assert row["status"] == "queued" and epoch_ms(row["run_at"]) > epoch_ms() + 200_000
        await store.cancel(cancelled)
        row = await store.finish_failed(
            by_id[cancelled], status=JobStatus.QUEUED, outcome=AttemptOutcome.TIMED_OUT,
            error="slow", delay_seconds=1,
        )  # fmt: skip
        assert row["status"] == "cancelled"
        assert (await store.get_job(retried)).last_error == "boom"

    scenario(ports, body)


def test_stale_leases_are_recovered_with_a_lost_attempt(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        again, out = await insert(store), await insert(store, max_retries=0)
        await store.claim([again, out], "w1", 600)
        await asyncio.sleep(0.05)
        moved = {
            str(r["id"]): r["status"]
            for r in await store.maintenance.recover_stale_leases(0.01, 10)
        }
        assert moved == {again: "queued", out: "dead"}
        [attempt] = await store.list_attempts(again)
        assert attempt.outcome == "lost" and "stopped heartbeating" in attempt.error

    scenario(ports, body)


def test_lists_page_newest_first_by_keyset(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        ids = [await insert(store, task=f"t{i % 2}") for i in range(5)]
        seen, after = [], None
        while True:
            page = await store.list_jobs(status=None, queue=None, task=None, limit=2, after=after)
            seen += [j.id for j in page]
            if len(page) < 2:
                break
            after = (page[-1].created_at, page[-1].id)
        assert seen == list(reversed(ids))
        only = await store.list_jobs(status="queued", queue=None, task="t1", limit=9, after=None)
        assert {j.id for j in only} == {ids[1], ids[3]}

    scenario(ports, body)


def test_the_queued_scan_resumes_after_a_position(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        ids = {await insert(store, delay_seconds=100 + i) for i in range(5)}
        first = await store.maintenance.scan_queued(None, 3)
        rest = await store.maintenance.scan_queued((first[-1]["run_at"], str(first[-1]["id"])), 3)
        assert {str(r["id"]) for r in first + rest} == ids and len(rest) == 2
        assert not any(r["due"] for r in first + rest)

    scenario(ports, body)


def test_an_unstorable_result_completes_nothing_of_its_batch(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        a, b = await insert(store), await insert(store)
        leases = await store.claim([a, b], "w1", 600)
        with pytest.raises(InvalidInputError):
            await store.complete_many([(leases[0], {"ok": 1}), (leases[1], {"x": math.nan})])
        assert {(await store.get_job(i)).status for i in (a, b)} == {"processing"}

    scenario(ports, body)


def test_a_batch_stores_each_job_as_given_and_none_of_it_when_a_payload_is_unstorable(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        at = datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
        given = new(
            payload={"text": 'é ✓ "q" \\ \n', "deep": [{"n": 2.5}]},
            run_at=at,
            priority=-3,
            queue="default",
            concurrency_key="k",
            submitted_by="me",
        )
        ids = [str(uuid.uuid4()), str(uuid.uuid4())]
        rows = await store.insert_jobs([(ids[0], given), (ids[1], new(delay_seconds=600))])
        assert [r["due"] for r in rows] == [False, False]
        job = await store.get_job(ids[0])
        assert (job.payload, job.run_at, job.priority, job.concurrency_key, job.submitted_by) == (
            given.payload,
            at,
            -3,
            "k",
            "me",
        )
        bad = [(str(uuid.uuid4()), new()), (str(uuid.uuid4()), new(payload={"x": math.inf}))]
        with pytest.raises(InvalidInputError):
            await store.insert_jobs(bad)
        assert [await store.get_job(job_id) for job_id, _ in bad] == [None, None]

    scenario(ports, body)


def test_the_broker_dispatches_by_priority_and_time(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        q = f"q{uuid.uuid4().hex[:6]}"
        now = epoch_ms()
        low, high, later = (str(uuid.uuid4()) for _ in range(3))
        items = [
            Dispatch(low, q, 0, now, True),
            Dispatch(high, q, 9, now + 5, True),
            Dispatch(later, q, 0, now + 400, False),
        ]
        assert await broker.enqueue(items) == 3
        assert await broker.enqueue(items[:1]) == 0  # NX: a re-enqueue is harmless
        assert q in await broker.known_queues()
        assert await broker.backlog([q]) == {q: (2, 1)}
        assert await broker.pop([q], 5, 0.1) == [high, low]
        assert await broker.promote_due([q]) == 0
        await asyncio.sleep(0.5)
        assert await broker.promote_due([q]) == 1
        assert await broker.pop([q], 5, 0.1) == [later]
        assert await broker.pop([q], 5, 0.05) == []

    scenario(ports, body)


def test_a_batch_enqueue_counts_only_the_ids_that_were_new(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        qa, qb = (f"q{uuid.uuid4().hex[:6]}" for _ in range(2))
        now = epoch_ms()
        ids = [str(uuid.uuid4()) for _ in range(5)]
        batch = [
            Dispatch(ids[0], qa, 0, now, True),
            Dispatch(ids[1], qa, 5, now, True),
            Dispatch(ids[2], qb, 0, now, True),
            Dispatch(ids[3], qa, 0, now + 60_000, False),
            Dispatch(ids[0], qa, 9, now, True),  # the same id again: counted once
        ]
        assert await broker.enqueue(batch) == 4
        again = [batch[1], batch[3], Dispatch(ids[4], qb, 0, now + 60_000, False)]
        assert await broker.enqueue(again) == 1  # only the last one is new
        assert await broker.backlog([qa, qb]) == {qa: (2, 1), qb: (1, 1)}
        # the id given twice kept its first place (priority 0): behind the priority-5 one
        assert await broker.pop([qa], 5, 0.1) == [ids[1], ids[0]]

    scenario(ports, body)


def test_broker_presence_locks_and_scan_position(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        name = f"lock-{uuid.uuid4().hex[:6]}"
        assert await broker.lock_held(name) is False
        assert await broker.try_lock(name, 5) is True
        assert await broker.try_lock(name, 5) is False
        assert await broker.lock_held(name) is True
        await broker.unlock(name)
        assert await broker.lock_held(name) is False
        assert await broker.try_lock(name, 5) is True
        before = await broker.live_workers()
        await broker.register_worker(w := f"w-{uuid.uuid4().hex[:6]}", 30)
        assert await broker.live_workers() == before + 1
        await broker.unregister_worker(w)
        assert await broker.live_workers() == before
        await broker.save_scan_position("abc")
        assert await broker.scan_position() == "abc"
        await broker.save_scan_position(None)
        assert await broker.scan_position() is None

    scenario(ports, body)


def test_retention_deletes_only_old_finished_jobs_with_their_attempts(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        done, cancelled, dead, queued, running = [await insert(store) for _ in range(5)]
        leases = {le.job_id: le for le in await store.claim([done, dead, running], "w1", 600)}
        assert await store.complete(leases[done], {"ok": 1})
        await store.finish_failed(
            leases[dead], status=JobStatus.DEAD, outcome=AttemptOutcome.FAILED, error="x"
        )
        await store.cancel(cancelled)
        await asyncio.sleep(0.05)
        assert await store.maintenance.prune_finished(60, 10) == 0  # too young
        assert await store.maintenance.prune_finished(0.01, 1) == 1  # bounded: one per call
        assert await store.maintenance.prune_finished(0.01, 10) == 1
        assert await store.get_job(done) is None and await store.get_job(cancelled) is None
        assert await store.list_attempts(done) == []
        assert (await store.get_job(dead)).status == "dead"
        assert await store.maintenance.prune_dead(0.01, 10) == 1
        assert await store.get_job(dead) is None
        assert {(await store.get_job(i)).status for i in (queued, running)} == {
            "queued",
            "processing",
        }

    scenario(ports, body)


def test_a_batch_is_one_insert_with_per_item_idempotency(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        old = await insert(store, idempotency_key="b-old")
        ids = [str(uuid.uuid4()) for _ in range(5)]
        keys = [None, "b-old", "b-new", "b-new", None]
        rows = await store.insert_jobs(
            [(i, new(idempotency_key=k, delay_seconds=600 if n == 4 else 0))
             for n, (i, k) in enumerate(zip(ids, keys, strict=True))]
        )  # fmt: skip
        assert [r is not None for r in rows] == [True, False, True, False, True]
        assert rows[0]["due"] is True and rows[4]["due"] is False
        assert {(await store.get_job(ids[n])).status for n in (0, 2, 4)} == {"queued"}
        assert await store.get_job(ids[1]) is None and await store.get_job(ids[3]) is None
        found = await store.get_by_idempotency_keys(["b-old", "b-new", "b-none"])
        assert {k: str(v["id"]) for k, v in found.items()} == {"b-old": old, "b-new": ids[2]}

    scenario(ports, body)


def test_a_new_attempt_starts_without_the_last_ones_progress(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w1", 600)
        await store.save_progress([(lease, 0.9, "almost")])
        await store.finish_failed(
            lease, status=JobStatus.QUEUED, outcome=AttemptOutcome.FAILED, error="x"
        )
        assert (await store.get_job(job_id)).progress == pytest.approx(0.9)  # kept meanwhile
        [again] = await store.claim([job_id], "w2", 600)
        job = await store.get_job(job_id)
        assert again.attempt == 2 and job.progress is None and job.progress_message is None

    scenario(ports, body)


def test_progress_is_fenced_by_the_lease(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w1", 600)
        assert await store.save_progress([(lease, 0.25, "a quarter")]) == {job_id}
        job = await store.get_job(job_id)
        assert (job.progress, job.progress_message) == (0.25, "a quarter")
        assert await store.complete(lease, None)
        assert await store.save_progress([(lease, 0.9, None)]) == set()  # the lease is gone
        assert (await store.get_job(job_id)).progress == 0.25  # kept after the job ended

    scenario(ports, body)


def test_one_job_per_periodic_slot(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        task = f"t-{uuid.uuid4().hex[:6]}"
        base = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
        assert await store.maintenance.last_periodic_runs([task]) == {}
        await store.maintenance.mark_periodic_seen(task, base)
        assert await store.maintenance.last_periodic_runs([task]) == {
            task: {"slot": base, "job_id": None}
        }
        slot = base + timedelta(minutes=1)
        first, second = str(uuid.uuid4()), str(uuid.uuid4())
        row = await store.maintenance.insert_periodic_job(first, slot, new(task=task))
        assert row is not None and row["due"] is True
        assert await store.maintenance.insert_periodic_job(second, slot, new(task=task)) is None
        assert await store.get_job(second) is None
        assert (await store.get_job(first)).task == task
        assert await store.maintenance.last_periodic_runs([task]) == {
            task: {"slot": slot, "job_id": first}
        }
        await store.maintenance.prune_periodic_runs(0)  # the latest slot of a task always stays
        assert (await store.maintenance.last_periodic_runs([task]))[task]["slot"] == slot

    scenario(ports, body)


def test_workers_count_as_starting_until_they_register(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        assert await broker.starting_workers() == 0
        await broker.add_starting(3, 30)
        await broker.add_starting(1, 0.05)  # an invoke that never ran: it expires
        assert await broker.starting_workers() == 4
        await asyncio.sleep(0.1)
        assert await broker.starting_workers() == 3
        await broker.worker_started()
        assert await broker.starting_workers() == 2
        for _ in range(3):
            await broker.worker_started()  # one too many: harmless
        assert await broker.starting_workers() == 0

    scenario(ports, body)


def test_broker_idle_mark_and_activity(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        before = await broker.activity()
        await broker.enqueue([Dispatch(str(uuid.uuid4()), "default", 0, epoch_ms(), True)])
        assert await broker.activity() >= before  # counted where tracking is on
        await broker.set_idle_mark('{"activity": 1}', 5)
        assert await broker.idle_mark() == '{"activity": 1}'
        await broker.set_idle_mark(None, 0)
        assert await broker.idle_mark() is None
        await broker.set_idle_mark("short", 0.05)
        await asyncio.sleep(0.1)
        assert await broker.idle_mark() is None

    scenario(ports, body)


def test_finished_attempts_and_dead_jobs_are_counted_per_minute(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        before = await store.finished_per_minute(60)
        ok, retried, dead, lost = [await insert(store, max_retries=0) for _ in range(4)]
        await insert(store)  # still queued: counted nowhere
        leases = {lease.job_id: lease for lease in await store.claim(
            [ok, retried, dead, lost], "w1", 600)}  # fmt: skip
        assert await store.complete(leases[ok], None)
        await store.finish_failed(leases[retried], status=JobStatus.QUEUED,
                                  outcome=AttemptOutcome.TIMED_OUT, error="slow")  # fmt: skip
        await store.finish_failed(leases[dead], status=JobStatus.DEAD,
                                  outcome=AttemptOutcome.FAILED, error="boom")  # fmt: skip
        await asyncio.sleep(0.05)
        await store.maintenance.recover_stale_leases(
            0.01, 10
        )  # `lost` is out of retries: lost + dead

        def totals(rows: list[Any]) -> tuple[int, int, int]:
            return tuple(sum(int(r[k]) for r in rows) for k in ("completed", "failed", "dead"))

        after = await store.finished_per_minute(60)
        got = tuple(a - b for a, b in zip(totals(after), totals(before), strict=True))
        assert got == (1, 3, 2)
        assert [r["minute"] for r in after] == sorted(r["minute"] for r in after)
        assert all(r["minute"].second == 0 and r["minute"].microsecond == 0 for r in after)

    scenario(ports, body)
