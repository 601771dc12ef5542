"""Flow control on the claim path: which popped ids may start under their task's limits
(fleet-wide, in Redis), the slots this process holds for its running attempts, and giving
them back however an attempt ends (a sync task's slot once its thread has returned too).
A part of :class:`asyncz.service.JobService`.

Only tasks with a limit pay anything: with none declared, the claim path is unchanged.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence

from asyncz.errors import BrokerUnavailableError, UnknownQueueError
from asyncz.port_types import Row, Slot, epoch_ms
from asyncz.ports import JobBroker, JobStore
from asyncz.settings import Settings
from asyncz.tasks.limits import TaskLimits, counted, parse_overrides, rate_windows
from asyncz.tasks.registry import TaskRegistry

log = logging.getLogger("asyncz.service")

PAUSE_READ_SECONDS = 1.0  # how stale a worker's view of paused queues may be
REBUILD_ROWS = 10_000  # running attempts, and starts per task, read to rebuild the limits

REASONS = {
    "concurrency": "waiting for a concurrency slot of task {task}",
    "key_concurrency": "waiting for concurrency slot on {key}",
    "rate": "waiting for the rate limit of task {task} (or of key {key})",
}


def effective_limits(registry: TaskRegistry, settings: Settings) -> dict[str, TaskLimits]:
    """Each registered task's limits with the deployment's overrides; only limited ones."""
    overrides = parse_overrides(settings.task_limits)
    out = {}
    for name in registry.names():
        limits = registry.get(name).limits.overridden(overrides.get(name, {}))
        if limits.any:
            out[name] = limits
    return out


class Limits:
    def __init__(
        self, store: JobStore, broker: JobBroker, registry: TaskRegistry, settings: Settings
    ) -> None:
        self.store = store
        self.broker = broker
        self.settings = settings
        self.limited = effective_limits(registry, settings)
        self.slots: dict[str, Slot] = {}  # job id -> the slot its running attempt holds
        self._threads: set[str] = set()  # tokens of slots whose attempt runs on a thread
        # token -> the slot of an attempt that ended while its thread runs on
        self.abandoned: dict[str, Slot] = {}
        self._giving_back: set[asyncio.Task[None]] = set()
        self._paused: tuple[float, frozenset[str]] = (-PAUSE_READ_SECONDS, frozenset())

    async def paused(self) -> frozenset[str]:
        """The paused queues, read from Postgres at most once a second."""
        read_at, queues = self._paused
        if time.monotonic() - read_at >= PAUSE_READ_SECONDS:
            queues = frozenset(await self.store.limits.paused_queues())
            self._paused = (time.monotonic(), queues)
        return queues

    async def runnable(self, queues: Sequence[str]) -> list[str]:
        """The queues a worker may take from now (a paused one starts nothing)."""
        paused = await self.paused()
        return [q for q in queues if q not in paused] if paused else list(queues)

    async def admit(self, ids: Sequence[str]) -> list[str]:
        """The popped ids that may be claimed now: those of unlimited tasks, and those whose
        slots (and rate) were granted. The rest stay held in Redis until a slot frees or
        the window opens; they use no attempt and do not fail."""
        if not self.limited or not ids:
            return list(ids)
        rows = await self.store.unclaimed(ids)
        wanted: list[Slot] = []
        free: list[str] = []
        for r in rows:
            limits = self.limited.get(r["task"])
            if limits is None or not r["due"]:
                free.append(str(r["id"]))  # the claim puts a not-due one back in place
            else:
                wanted.append(self._slot(r, limits))
        lease = self.settings.lease_timeout_seconds
        verdicts = await self.broker.limits.acquire(wanted, lease)
        if "lost" in verdicts:  # Redis lost what the limits counted: rebuild, then ask again
            await self.rebuild()
            verdicts = await self.broker.limits.acquire(wanted, lease)
        for slot, verdict in zip(wanted, verdicts, strict=True):
            if verdict == "ok":
                self.slots[slot.job_id] = slot
                free.append(slot.job_id)
        return free

    async def rebuild(self) -> None:
        """Put back in Redis what the limits count, from Postgres: a slot for every running
        attempt of a limited task (until its lease's end; its worker's next heartbeat takes
        it over) and every start inside a rate's window. Until then nothing is admitted
        (an id lost that way is re-enqueued by recovery's scan)."""
        tasks = sorted(self.limited)
        running = await self.store.limits.running_limited(
            tasks, self.settings.lease_timeout_seconds, REBUILD_ROWS
        )
        windows = rate_windows(self.limited)
        starts = await self.store.limits.recent_starts(windows, REBUILD_ROWS) if windows else []
        await self.broker.limits.restore(counted(running, starts, self.limited))
        log.warning("limits rebuilt from the database after Redis lost them: %d running, "
                    "%d recent starts", len(running), len(starts))  # fmt: skip

    async def rebuild_if_lost(self) -> bool:
        """Recovery's look: rebuild the limits if Redis lost them (whether it did)."""
        if not self.limited or not await self.broker.limits.needs_rebuild():
            return False
        await self.rebuild()
        return True

    def _slot(self, row: Row, limits: TaskLimits) -> Slot:
        return Slot(
            job_id=str(row["id"]),
            token=uuid.uuid4().hex,
            task=row["task"],
            key=row["concurrency_key"],
            queue=row["queue"],
            priority=row["priority"],
            limits=limits,
            wake=bool(row.get("wake")),
            due_ms=epoch_ms(row["run_at"]) if row.get("run_at") else 0,
        )

    async def release(self, job_ids: Iterable[str], *, ran: bool = True) -> None:
        """The attempts of these jobs ended (``ran``), or never started: give their slots
        back, or keep those whose thread runs on until it returns. Quietly: a slot Redis did
        not hear about frees itself at its lease deadline."""
        slots = []
        for job_id in job_ids:
            slot = self.slots.pop(job_id, None)
            if slot is not None and slot.token in self._threads:
                self.abandoned[slot.token] = slot
            elif slot is not None:
                slots.append(slot)
        await self._give_back(slots, ran=ran)

    async def _give_back(self, slots: Sequence[Slot], *, ran: bool) -> None:
        if not slots:
            return
        try:
            await self.broker.limits.release(slots, ran=ran)
        except BrokerUnavailableError as exc:
            log.warning("slots free at their lease deadline instead: %s", exc)

    def hold_while_thread_runs(self, job_id: str) -> Callable[[], None] | None:
        """The attempt of ``job_id`` runs on a thread, which may outlive it (a timeout, a lost
        lease and a cancel abandon a thread, never kill it) and still call what the limit
        guards: its slot stays held, renewed by heartbeats, until the thread returns. This
        process's end ends the renewals, so the slot frees within a lease. Returns what to
        call on the event loop when the thread returns (``None``: no slot to hold)."""
        slot = self.slots.get(job_id)
        if slot is None:
            return None
        self._threads.add(slot.token)
        return functools.partial(self._thread_returned, slot.token)

    def _thread_returned(self, token: str) -> None:
        self._threads.discard(token)
        slot = self.abandoned.pop(token, None)
        if slot is not None:  # a retry may run elsewhere now: its rebuilt slot is not ours
            task = asyncio.get_running_loop().create_task(self._give_back([slot], ran=False))
            self._giving_back.add(task)
            task.add_done_callback(self._giving_back.discard)

    def forget(self, job_ids: Iterable[str]) -> None:
        """Stop holding these slots here; they expire with their lease deadline."""
        for job_id in job_ids:
            self.slots.pop(job_id, None)

    async def refresh(self, job_ids: Iterable[str]) -> None:
        """Running attempts keep their slots, or get them back when Redis lost them (with
        the heartbeat that just renewed their leases in Postgres); so do the threads that
        outlived their attempts."""
        slots = [s for i in job_ids if (s := self.slots.get(i)) is not None]
        try:
            if slots:
                await self.broker.limits.refresh(slots, self.settings.lease_timeout_seconds)
            if self.abandoned:
                await self.broker.limits.refresh(list(self.abandoned.values()),
                                                 self.settings.lease_timeout_seconds,
                                                 rebuilt=False)  # fmt: skip
        except BrokerUnavailableError as exc:
            log.warning("could not renew slots: %s", exc)

    async def wake_due(self) -> int:
        return await self.broker.limits.wake_due() if self.limited else 0

    async def held_reason(self, job: Row) -> str | None:
        """Why a queued job of a limited task is not running, in words (``None``: it is not
        held back)."""
        if job["queue"] in await self.paused():
            return f"queue {job['queue']} is paused"
        limits = self.limited.get(job["task"])
        if limits is None:
            return None
        slot = self._slot(job, limits)
        reason = await self.broker.limits.held_reason(slot)
        if reason is None:
            return None
        template = REASONS["rate" if reason.endswith("rate") else reason]
        return template.format(task=slot.task, key=slot.key)

    async def usage(self) -> list[Row]:
        return await self.broker.limits.usage(self.limited, keys_per_task=50)

    # --- paused queues, and what GET /stats, /queues and /tasks show ----------------------

    async def pause(self, queue: str, by: str | None = None) -> Row:
        """Pause ``queue`` (``by``: the key's name, kept with the pause)."""
        self._known(queue)
        await self.store.limits.pause_queue(queue, by)
        return await self._changed(queue)

    async def resume(self, queue: str) -> Row:
        self._known(queue)
        await self.store.limits.resume_queue(queue)
        return await self._changed(queue)

    async def _changed(self, queue: str) -> Row:
        self._paused = (-PAUSE_READ_SECONDS, frozenset())  # this process sees it at once
        await self.mirror_pauses()
        return await self._state(queue)

    async def mirror_pauses(self) -> None:
        """Copy the paused queues to Redis for the fleet's backlog (quietly: recovery copies
        them again each run, a FLUSHALL included)."""
        paused = set(await self.store.limits.paused_queues())
        try:
            await self.broker.limits.mirror_paused(paused)
        except BrokerUnavailableError as exc:
            log.warning("paused queues not mirrored to Redis: %s", exc)

    def _known(self, queue: str) -> None:
        if queue not in self.settings.queue_list:
            raise UnknownQueueError(
                f"unknown queue {queue!r}; this deployment runs "
                f"{', '.join(self.settings.queue_list)} (ASYNCZ_QUEUES)"
            )

    async def _state(self, queue: str) -> Row:
        return _queue_state(queue, (await self.store.limits.paused_queues()).get(queue))

    async def queue_states(self) -> list[Row]:
        paused = await self.store.limits.paused_queues()
        queues = sorted(set(self.settings.queue_list) | set(paused))
        return [_queue_state(q, paused.get(q)) for q in queues]

    def task_listing(self, registry: TaskRegistry) -> list[Row]:
        out = []
        for name in registry.names():
            spec, limits = registry.get(name), self.limited.get(name)
            plan = spec.schedule.describe() if spec.schedule else None
            out.append(
                {"task": name, "limits": limits.describe() if limits else {}, "schedule": plan}
            )
        return out

    async def with_usage(self, stats: Row) -> Row:
        """``GET /stats`` with each queue's pause and each limit's running and waiting."""
        paused = await self.store.limits.paused_queues()
        for queue, entry in stats["queues"].items():
            entry["paused"] = queue in paused
        try:
            stats["limits"] = await self.usage()
        except BrokerUnavailableError:
            stats["limits"] = None
        return stats


def _queue_state(queue: str, pause: Row | None) -> Row:
    """A queue as ``GET /queues`` shows it: paused or not, since when and by which key."""
    if pause is None:
        return {"queue": queue, "paused": False, "paused_at": None, "paused_by": None}
    return {"queue": queue, "paused": True, "paused_at": pause["paused_at"],
            "paused_by": pause["paused_by"]}  # fmt: skip
