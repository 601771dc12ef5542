"""Flow control on the claim path: which popped ids may start under their task's limits
(fleet-wide, in Redis), the slots this process holds for its running attempts, and giving
them back however an attempt ends. A part of :class:`asyncz.service.JobService`.

Only tasks with a limit pay anything: with none declared, the claim path is unchanged.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence

from asyncz.errors import BrokerUnavailableError
from asyncz.ports import JobBroker, JobStore, Row, Slot
from asyncz.settings import Settings
from asyncz.tasks.limits import TaskLimits, parse_overrides
from asyncz.tasks.registry import TaskRegistry

log = logging.getLogger("asyncz.service")

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


class FlowControl:
    def __init__(
        self, store: JobStore, broker: JobBroker, registry: TaskRegistry, settings: Settings
    ) -> None:
        self.store = store
        self.broker = broker
        self.settings = settings
        self.limited = effective_limits(registry, settings)
        self.slots: dict[str, Slot] = {}  # job id -> the slot its running attempt holds

    def limits_of(self, task: str) -> TaskLimits | None:
        return self.limited.get(task)

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
        verdicts = await self.broker.limits.acquire(wanted, self.settings.lease_timeout_seconds)
        for slot, verdict in zip(wanted, verdicts, strict=True):
            if verdict == "ok":
                self.slots[slot.job_id] = slot
                free.append(slot.job_id)
        return free

    def _slot(self, row: Row, limits: TaskLimits) -> Slot:
        return Slot(
            job_id=str(row["id"]),
            token=uuid.uuid4().hex,
            task=row["task"],
            key=row["concurrency_key"],
            queue=row["queue"],
            priority=row["priority"],
            limits=limits,
        )

    async def release(self, job_ids: Iterable[str]) -> None:
        """The attempts of these jobs ended (or never started): give their slots back.
        Quietly: a slot Redis did not hear about frees itself at its lease deadline."""
        slots = [s for i in job_ids if (s := self.slots.pop(i, None)) is not None]
        if not slots:
            return
        try:
            await self.broker.limits.release(slots)
        except BrokerUnavailableError as exc:
            log.warning("slots free at their lease deadline instead: %s", exc)

    async def refresh(self, job_ids: Iterable[str]) -> None:
        """Running attempts keep their slots (with the heartbeat that renews their leases)."""
        slots = [s for i in job_ids if (s := self.slots.get(i)) is not None]
        if slots:
            try:
                await self.broker.limits.refresh(slots, self.settings.lease_timeout_seconds)
            except BrokerUnavailableError as exc:
                log.warning("could not renew slots: %s", exc)

    async def wake_due(self) -> int:
        return await self.broker.limits.wake_due() if self.limited else 0

    async def held_reason(self, job: Row) -> str | None:
        """Why a queued job of a limited task is not running, in words (``None``: it is not
        held back)."""
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
