"""The worker loop: promote, pop, claim, run with heartbeats and a hard timeout, finish.

One loop runs up to ``concurrency`` jobs at once on one event loop. Sync tasks run on
reusable daemon threads (a hung one is abandoned at its timeout, never waited on); ``async``
tasks run on the loop. Work moves in claim batches: one pop and one claim statement for the
free slots, and one fenced completion statement for the batch's jobs that finish together.
One heartbeat coroutine renews every lease the worker holds in a single statement; a lease
it no longer holds means another worker owns the job now, so this one abandons the attempt
and writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asyncz.attempt_logs import reset_attempt_fields, set_attempt_fields
from asyncz.durable import attempt as durable
from asyncz.durable.clock import SYSTEM_CLOCK, Clock
from asyncz.errors import DB_TRANSIENT, BrokerUnavailableError, InvalidInputError
from asyncz.jobs import AttemptOutcome, Lease
from asyncz.ports import JobBroker
from asyncz.service import JobService
from asyncz.tasks.registry import ParentResult, TaskContext
from asyncz.tracing import start_attempt
from asyncz.worker.batching import CompletionBatcher
from asyncz.worker.execution import TaskThreads, call_task, check_storable
from asyncz.worker.finishing import ids, retrying, suspend
from asyncz.worker.outcomes import log_outcome
from asyncz.worker.slots import free_slots
from asyncz.worker.stats import Running, WorkerStats, new_worker_id
from asyncz.worker.task_metrics import Publish, TaskMetrics
from asyncz.worker.upkeep import Upkeep
from asyncz.worker.wakes import NextWake

log = logging.getLogger("asyncz.worker")

MIN_CLAIM_SECONDS = 1.0  # a worker with less time than this left claims nothing


class WorkerLoop:
    def __init__(
        self,
        service: JobService,
        *,
        remaining_seconds: Callable[[], float],
        worker_id: str | None = None,
        queues: list[str] | None = None,
        concurrency: int | None = None,
        idle_exit_seconds: float | None = None,
        stop: asyncio.Event | None = None,
        scale_out: Callable[[JobBroker], Awaitable[int]] | None = None,
        publish_task_metrics: Publish | None = None,  # per-task EMF (worker.task_metrics)
        start_worker: Callable[[JobBroker], Awaitable[int]] | None = None,  # one now (fleet)
    ) -> None:
        s = service.settings
        self.scale_out = scale_out  # busy workers ask for more workers too (asyncz.fleet.scale_out)
        self.service = service
        self.settings = s
        self.remaining_seconds = remaining_seconds
        self.worker_id = worker_id or new_worker_id()
        self.queues = queues or s.queue_list
        self.concurrency = concurrency or s.worker_concurrency
        self.idle_exit_seconds = (
            s.worker_idle_exit_seconds if idle_exit_seconds is None else idle_exit_seconds
        )
        self.stop = stop or asyncio.Event()
        self.longest_timeout = service.registry.longest_timeout(s.default_timeout_seconds)
        shortest = service.registry.shortest_timeout(s.default_timeout_seconds)
        self.shortest_timeout = max(float(shortest), MIN_CLAIM_SECONDS)  # it claims while it fits
        self.start_worker = start_worker  # a continuation, or a job too long for this worker
        self._misses, self._asked = 0, False  # empty claims in a row; asked for time
        self.running: dict[str, Running] = {}
        self.upkeep = Upkeep(service, s, self.worker_id, self.running, self._quietly)
        self.stats = WorkerStats()
        self.task_metrics = TaskMetrics(publish_task_metrics)
        self._completions = CompletionBatcher(service)
        self._threads = TaskThreads(max_idle=self.concurrency)
        self._freed = asyncio.Event()  # a running task returned (or ended)
        self.step_clock: Clock = SYSTEM_CLOCK  # what durable steps see (a test sets its own)
        # the next delayed id's due time, looked up while no job comes
        self.wake = NextWake(service.broker, self.queues, lambda: service.promote(self.queues))

    # --- budget ---------------------------------------------------------------------------

    def budget(self) -> float:
        """Seconds a job claimed now may run and still finish before the deadline."""
        return self.remaining_seconds() - self.settings.worker_safety_margin_seconds

    def _should_stop(self) -> str:
        if self.stop.is_set():
            return "stopped"
        if self.budget() < self.shortest_timeout:
            return "deadline"
        if self._threads.hung() >= max(1, self.concurrency // 2):
            return "too many hung tasks: recycle the sandbox"
        return ""

    # --- main loop ------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        """Work until the deadline, a stop request, or ``idle_exit_seconds`` with no job."""
        heartbeats = asyncio.create_task(self.upkeep.heartbeat_loop(), name="heartbeat")
        progress = asyncio.create_task(self.upkeep.progress_loop(), name="progress")
        idle_since, last_promote = time.monotonic(), 0.0
        worked, starved = False, True  # claimed a job since the last promote; got none
        try:
            await self._announce()
            while not (reason := self._should_stop()):
                free = await free_slots(self.concurrency, self.running, self._freed)
                if free <= 0:
                    continue
                now = time.monotonic()
                if self.wake.take_due() or now - last_promote >= 1.0:
                    last_promote = now
                    await self._quietly(self.service.promote(self.queues))
                    if self.scale_out is not None and (worked or self.running):
                        await self._quietly(self.scale_out(self.service.broker))
                    worked = False
                wait = min(self.settings.worker_poll_seconds, self.budget() - self.shortest_timeout)
                if self.idle_exit_seconds and not self.running:
                    wait = min(wait, max(0.05, self.idle_exit_seconds - (now - idle_since)))
                # end the poll when the next wake falls due (busy: the ones it knows of)
                wait = await self._quietly(self.wake.poll_until(wait, look=starved)) or wait
                asked = time.monotonic()
                leases = await self._quietly(
                    self.service.claim_next(
                        self.worker_id, self.queues, free, max(wait, 0.05), int(self.budget())
                    )
                )
                if not leases and time.monotonic() - asked < wait / 2:
                    # ids came back but none was claimable (duplicates, or put back because
                    # they do not fit this worker's budget): do not spin on them.
                    await self._missed()
                self._misses = 0 if leases else self._misses
                starved = not leases
                if leases:
                    idle_since = time.monotonic()
                    worked = True
                    mates: list[Running] = []
                    for lease in leases:
                        mates.append(self._start(lease, mates))
                elif self.running:
                    idle_since = time.monotonic()
                elif (
                    self.idle_exit_seconds
                    and time.monotonic() - idle_since >= self.idle_exit_seconds
                ):
                    if not self.wake.within(self.idle_exit_seconds):
                        reason = "idle"
                        break
                    idle_since = time.monotonic()  # a wake is near: stay for it
            self.stats.stopped_because = reason
            await self._drain()
            self.task_metrics.flush()
        finally:
            for side in (heartbeats, progress):
                side.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await side
            await self._quietly(self.service.broker.unregister_worker(self.worker_id))
        self.stats.hung_threads = self._threads.hung()
        return {"worker_id": self.worker_id, **self.stats.as_dict()}

    async def _missed(self) -> None:
        """Back off (0.1 s, doubling to 1 s); a worker short of the longest timeout asks,
        once, for a worker with time (a job it put back may need one)."""
        self._misses += 1
        if not self._asked and self.budget() < self.longest_timeout:
            self._asked = True
            await self._start_worker()
        await asyncio.sleep(min(1.0, 0.1 * 2 ** (self._misses - 1)))

    async def _start_worker(self) -> None:
        if self.start_worker is not None:
            await self._quietly(self.start_worker(self.service.broker))

    async def _drain(self) -> None:
        """Let running attempts finish (each is bounded by its own timeout)."""
        tasks = [r.task for r in self.running.values() if r.task]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _quietly(self, coro: Any) -> Any:
        """Ride out a Postgres or Redis outage, or a statement the database cancelled at its
        timeout (slow, or just thawed: nothing changed): log, back off briefly, carry on."""
        try:
            return await coro
        except (*DB_TRANSIENT, BrokerUnavailableError) as exc:
            log.warning("dependency unavailable, retrying: %s", exc)
            await asyncio.sleep(min(1.0, max(self.budget(), 0) / 10))
            return None

    async def _announce(self) -> None:
        broker = self.service.broker
        await self._quietly(
            broker.register_worker(self.worker_id, self.settings.worker_presence_ttl_seconds)
        )
        await self._quietly(broker.worker_started())  # live now, no longer "starting"

    # --- one attempt ----------------------------------------------------------------------

    def _start(self, lease: Lease, mates: list[Running]) -> Running:
        self.stats.claimed += 1
        ctx = TaskContext(
            job_id=lease.job_id,
            attempt=lease.attempt,
            queue=lease.queue,
            worker_id=self.worker_id,
            artifact_dir=self.settings.artifact_dir,
            public_url=self.settings.public_url,
        )
        running = Running(lease=lease, ctx=ctx, mates=mates)
        self.running[lease.job_id] = running
        running.task = asyncio.create_task(self._attempt(running), name=f"job-{lease.job_id}")
        return running

    async def _attempt(self, running: Running) -> None:
        lease = running.lease
        started = time.monotonic()
        # its span (tracing on) and log fields: current in this asyncio task only
        trace = start_attempt(lease.job_id, lease.task, lease.queue, lease.attempt,
                              lease.traceparent, lease.tracestate)  # fmt: skip
        fields = set_attempt_fields(
            lease.job_id, lease.attempt, lease.task, lease.queue, trace.trace_id
        )
        try:
            try:
                spec = self.service.registry.get(lease.task)
                if lease.has_parents:  # their statuses and results, read as the attempt starts
                    rows = await self.service.parents_of(lease.job_id)
                    running.ctx.parents = ParentResult.by_key(rows)
                async with asyncio.timeout(durable.attempt_seconds(spec, lease, self.budget)) as t:
                    ctx, hold = running.ctx, self.service.limits.hold_while_thread_runs
                    await durable.open_steps(self.service.store.steps, spec, lease, ctx,
                                             self.settings, self.step_clock, t,
                                             self.budget, self.service.spawns)  # fmt: skip
                    result = await call_task(spec, lease, ctx, self._threads, hold)
                # a result Postgres cannot store, or too large to read back, fails the attempt
                check_storable(result, self.settings.max_result_bytes)
            except TimeoutError:
                self._finishing(running)
                running.ctx.cancelled.set()
                self.stats.timed_out += 1
                why = durable.timeout_error(running.ctx, lease)
                await self._finish_failed(lease, why, AttemptOutcome.TIMED_OUT)
            except asyncio.CancelledError:
                if running.stop_reason is None:
                    raise  # the worker itself is shutting down
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()  # our own cancel, handled here: later awaits run normally
                running.ctx.cancelled.set()
                if running.stop_reason == "cancel":
                    self.stats.cancelled += 1
                    await self._finish_failed(
                        lease, "cancelled on request", AttemptOutcome.CANCELLED
                    )
                else:
                    self.stats.lost_leases += 1
                    log.warning("lease lost; abandoning the attempt", extra=ids(lease))
            except Exception as exc:  # noqa: BLE001 - any task error is a failed attempt
                self._finishing(running)
                await self._failed(running, exc)
            else:
                self._finishing(running)
                if (decided := durable.verdict(running.ctx)) is not None:  # a step's, caught
                    await self._failed(running, decided)
                else:
                    mates_running = any(not m.finishing for m in running.mates)
                    await self._finish_completed(lease, result, mates_running)
        finally:
            durable.close_steps(running.ctx)
            running.mates = []  # the batch's list held this attempt: a cycle, freed at once
            self.running.pop(lease.job_id, None)
            self._freed.set()
            # 0.1 ms, as the outcome line: a full float is ~13 more bytes a job in the EMF line
            duration_ms = round((time.monotonic() - started) * 1000, 1)
            self.service.metrics.add_metric("JobDuration", "Milliseconds", duration_ms)
            status, error = running.outcome or ("lost", None)
            self.task_metrics.record(lease.task, status, duration_ms)
            if running.outcome is not None:
                log_outcome(lease, status, duration_ms, error, trace_id=trace.trace_id,
                            steps=durable.step_summary(running.ctx))  # fmt: skip
            trace.end(status, error)
            reset_attempt_fields(fields)

    def _finishing(self, running: Running) -> None:
        running.finishing = True
        self._freed.set()

    async def _finish_completed(self, lease: Lease, result: Any, mates_running: bool) -> None:
        await self.upkeep.write_progress([lease.job_id])  # the last report, while the lease holds
        try:
            ok = await retrying(
                lambda: self._completions.complete(lease, result, mates_running=mates_running)
            )
        except InvalidInputError as exc:  # the database refused this result alone
            self.stats.failed += 1
            await self._finish_failed(
                lease, f"result is not storable: {exc}", AttemptOutcome.FAILED
            )
            return
        if ok:
            self.stats.completed += 1
            self._record(lease, "completed", None)
        elif ok is False:
            self.stats.lost_leases += 1
            log.warning("lease lost before completion; result discarded", extra=ids(lease))

    async def _failed(self, running: Running, exc: BaseException) -> None:
        """The attempt ends suspended (a durable task waits), fails (dead at once when
        final), or is abandoned (a step lost the lease)."""
        if (suspension := durable.suspension_of(running.ctx)) is not None:
            now = self.step_clock.now()
            status = await suspend(self.service, running.lease, suspension, now, self.wake)
            if status == "suspended" and suspension.continuation:
                await self._start_worker()  # its continuation starts now, not at a tick
            return self._record(running.lease, status, None) if status else None
        if (overrun := durable.overrun_of(running.ctx)) is not None:
            self.stats.timed_out += 1
            return await self._finish_failed(running.lease, overrun, AttemptOutcome.TIMED_OUT)
        woken = running.lease.suspensions > 0
        if (ended := durable.failure_of(running.ctx, exc, woken=woken)) is None:
            self.stats.lost_leases += 1
            log.warning("lease lost at a step; abandoning the attempt", extra=ids(running.lease))
            return
        self.stats.failed += 1
        await self._finish_failed(running.lease, ended[0], AttemptOutcome.FAILED, ended[1])

    async def _finish_failed(
        self, lease: Lease, error: str, outcome: AttemptOutcome, final: bool = False
    ) -> None:
        await self.upkeep.write_progress([lease.job_id])
        done = await retrying(lambda: self.service.fail(lease, error, outcome, final=final))
        if done is None:
            log.warning("could not record the failed attempt (lease lost)", extra=ids(lease))
        else:
            status = "retrying" if done.status.value == "queued" else done.status.value
            self._record(lease, status, error)

    def _record(self, lease: Lease, status: str, error: str | None) -> None:
        """The attempt's outcome, logged in one line when the attempt is over."""
        running = self.running.get(lease.job_id)
        if running is not None:
            running.outcome = (status, error)
