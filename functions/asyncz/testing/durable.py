"""Unit-test a durable task without a cloud or a server: :func:`run_durable` runs it the
way a worker does (the same worker loop, journal and lease fence) against the in-memory
store and broker, with a clock the test controls (docs/durable.md, "Testing")."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.jobs import Attempt, Job, JobStatus, NewJob
from asyncz.port_types import Row
from asyncz.service import JobService
from asyncz.service.enqueue import dispatch_of
from asyncz.settings import Settings
from asyncz.tasks.registry import REGISTRY, TASK_NAME_ATTRIBUTE, TaskRegistry
from asyncz.testing.broker import MemoryBroker
from asyncz.testing.maintenance import now_utc
from asyncz.testing.store import MemoryStore
from asyncz.worker.loop import WorkerLoop


class ManualClock:
    """A clock that moves only when told to (``advance``) or when a step's retry waits on
    it (the wait passes at once; ``slept`` lists each)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)
        await asyncio.sleep(0)


@dataclass
class DurableRun:
    """A durable job run to its end: the job, its attempts and its steps (each a dict with
    ``name``, ``kind``, ``status``, ``attempts``, ``result_bytes``...)."""

    service: JobService
    job_id: str
    clock: ManualClock
    job: Job | None = None
    attempts: list[Attempt] = field(default_factory=list)
    steps: list[Row] = field(default_factory=list)
    invocation_seconds: float | None = None  # each invocation's time, on the test's clock
    invocations: int = 0  # worker invocations that ran (a new one after each deadline)
    workers_asked: int = 0  # workers the job asked for at once (its continuations)

    @property
    def status(self) -> str:
        assert self.job is not None
        return self.job.status.value

    @property
    def result(self) -> Any:
        assert self.job is not None
        return self.job.result

    @property
    def error(self) -> str | None:
        assert self.job is not None
        return self.job.last_error

    def advance(self, seconds: float) -> DurableRun:
        """Move the clock ``seconds`` on: a suspended job whose wake has come wakes and runs
        to its end (or its next suspension); one whose wake is still ahead stays asleep."""
        self.clock.advance(seconds)

        async def go() -> None:
            store: Any = self.service.store  # the memory store: its rows' times move too
            j = store.jobs[self.job_id]
            if j["status"] == "suspended":
                j["run_at"] -= timedelta(seconds=seconds)
                row = {**j, "due": j["run_at"] <= now_utc()}
                await self.service.broker.reschedule([dispatch_of(row)])
            await _drive(self)

        asyncio.run(go())
        return self

    def send_event(self, name: str, key: str, payload: Any = None, *,
                   sender: str | None = None) -> int:  # fmt: skip
        """Send an event (as ``POST /events`` does, from the API key named ``sender``; no
        payload: ``{}``, as the client sends it) and run the job it wakes to its end or its
        next suspension; how many waits it woke."""

        async def go() -> int:
            body = {} if payload is None else payload
            sent = await self.service.events.send(name, key, body, sender=sender)
            await _drive(self)
            return sent.woken

        return asyncio.run(go())

    def replay(self, *, reset_steps: bool = False) -> DurableRun:
        """Replay the dead job (``reset_steps``: its stored steps go first) and run it to
        its end again."""

        async def go() -> None:
            await self.service.replay(self.job_id, reset_steps=reset_steps)
            await _drive(self)

        asyncio.run(go())
        return self


def run_durable(
    task: str | Callable[..., Any],
    payload: dict[str, Any] | None = None,
    *,
    max_retries: int = 0,
    timeout_seconds: int | None = None,
    clock: ManualClock | None = None,
    registry: TaskRegistry = REGISTRY,
    invocation_seconds: float | None = None,
    **settings: Any,
) -> DurableRun:
    """Submit one job of ``task`` (its name, or the function ``@task`` registered) and run it
    with an in-process worker until it ends: ``completed``, ``dead`` (its retries spent, or
    a final error such as ``nondeterministic``) or ``cancelled``; or until it is
    ``suspended`` (a sleep or a wait: :meth:`DurableRun.advance` moves the clock and wakes
    it, :meth:`DurableRun.send_event` sends an event).
    ``timeout_seconds``: the job's (unset: the task's own). Retries follow at once;
    ``settings`` override any other setting (``max_steps_per_job=10``).
    ``invocation_seconds``: each worker invocation's remaining
    time at its start, as a Lambda's, passing on ``clock`` (a step that takes time advances
    it); a worker past its deadline ends and a fresh invocation takes the job on (a long
    job's continuations). Unset: one invocation with time to spare."""
    name = task if isinstance(task, str) else getattr(task, TASK_NAME_ATTRIBUTE)
    values: dict[str, Any] = {"backoff_base_seconds": 0.001, "backoff_max_seconds": 0.001,
                              "worker_poll_seconds": 0.02}  # fmt: skip
    config = Settings(database_url="postgresql://unused", redis_url="redis://unused",
                      **(values | settings))  # fmt: skip
    store: Any = MemoryStore()  # the store port, on dicts
    service = JobService(store, MemoryBroker(), registry, config, rand=lambda: 0.0)
    run = DurableRun(service, "", clock or ManualClock(), invocation_seconds=invocation_seconds)

    async def go() -> None:
        new = NewJob(task=name, payload=payload or {}, max_retries=max_retries,
                     timeout_seconds=timeout_seconds)  # fmt: skip
        run.job_id = (await service.submit(new)).job_id
        await _drive(run)

    asyncio.run(go())
    return run


async def _drive(run: DurableRun) -> None:
    """Run workers until the job ends (or sleeps until a time still ahead), then read what
    it left: a worker that asks for one starts another invocation at once, as in Lambda,
    and when none is left running with the job unfinished, a fresh one starts."""
    stop = asyncio.Event()
    started: list[asyncio.Task[dict[str, Any]]] = []

    async def ask(broker: object) -> int:
        run.workers_asked += 1
        started.append(invocation())
        return 1

    def invocation() -> asyncio.Task[dict[str, Any]]:
        run.invocations += 1
        if run.invocations > 1000:
            raise RuntimeError("the job was not done after 1000 worker invocations")
        remaining: Callable[[], float] = lambda: 3600.0  # noqa: E731
        if (seconds := run.invocation_seconds) is not None:
            start = run.clock.now()
            remaining = lambda: seconds - (run.clock.now() - start).total_seconds()  # noqa: E731
        worker = WorkerLoop(run.service, remaining_seconds=remaining, stop=stop, concurrency=1,
                            start_worker=ask)  # fmt: skip
        worker.step_clock = run.clock
        return asyncio.create_task(worker.run())

    started.append(invocation())
    try:
        while not _resting(await run.service.get(run.job_id), run.service.store):
            for done in [w for w in started if w.done()]:
                await done  # a worker that failed says why
            if all(w.done() for w in started):
                started.append(invocation())
            await asyncio.sleep(0.005)
    finally:
        stop.set()
        await asyncio.gather(*started)
    run.job = await run.service.get(run.job_id)
    run.attempts = await run.service.attempts(run.job_id)
    run.steps = await run.service.steps(run.job_id, limit=100_000)


def _resting(job: Job, store: Any) -> bool:
    """Ended, or asleep until a time still ahead (the clock must move first) with no other
    job left to run now (the jobs it spawned run in-process, and may wake it)."""
    if job.status.terminal:
        return True
    now = now_utc()
    others = any(j["status"] == "processing" or (j["status"] == "queued" and j["run_at"] <= now)
                 for j in store.jobs.values())  # fmt: skip
    return job.status is JobStatus.SUSPENDED and job.run_at > now and not others
