"""The in-memory broker's limits (:mod:`asyncz.broker.limits` on dicts, same verdicts):
concurrency slots, rate windows, held-back ids."""

from __future__ import annotations

from collections.abc import Sequence

from asyncz.broker.keys import ready_score
from asyncz.port_types import Row, Slot, epoch_ms
from asyncz.tasks.limits import RATE_GUARD_MS, Counted, Rate, TaskLimits

WAKE_PER_SLOT = 2


class MemoryLimits:
    def __init__(self, ready: dict[str, dict[str, int]]) -> None:
        self._ready = ready  # the broker's ready sets (queue -> {id: score})
        self.slots: dict[str, dict[str, int]] = {}  # scope -> {token: deadline ms}
        self.starts: dict[str, dict[str, int]] = {}  # scope -> {token: start ms}
        self.held: dict[str, dict[str, int]] = {}  # scope -> {member: ms it fell due}
        self.later: dict[str, int] = {}  # member -> ms when the rate allows
        self.keys: dict[str, set[str]] = {}
        self.paused_queues: set[str] = set()
        self.rebuilt = False  # as Redis' <p>:limits:rebuilt: False when new or lost

    def lose(self) -> None:
        """What a flush does to Redis' limit state (for tests)."""
        self.__init__(self._ready)  # type: ignore[misc]

    def _full(self, scope: str, limit: int | None, now: int) -> bool:
        if not limit:
            return False
        live = {t: d for t, d in self.slots.get(scope, {}).items() if d > now}
        self.slots[scope] = live
        return len(live) >= limit

    def _wait(self, scope: str, rate: Rate | None, now: int) -> int:
        if rate is None:
            return 0
        period = rate.period_seconds * 1000 + RATE_GUARD_MS
        window = {t: s for t, s in self.starts.get(scope, {}).items() if s > now - period}
        self.starts[scope] = window
        return 0 if len(window) < rate.count else min(window.values()) + period + 1

    async def acquire(self, slots: Sequence[Slot], lease_seconds: float) -> list[str]:
        now, out = epoch_ms(), []
        if not self.rebuilt:
            return ["lost"] * len(slots)
        for s in slots:
            lim = s.limits
            if s.wake:  # a woken job is not a new start: only its slots count it
                lim = TaskLimits(lim.concurrency, lim.key_concurrency, None, None)
            if s.key is None:
                lim = TaskLimits(lim.concurrency, None, lim.rate, None)
            else:
                self.keys.setdefault(s.task, set()).add(s.key)
            ks = f"{s.task}:{s.key}"
            due = s.due_ms if 0 < s.due_ms <= now else now
            if self._full(s.task, lim.concurrency, now):
                self.held.setdefault(s.task, {}).setdefault(s.member, due)
                out.append("concurrency")
            elif self._full(ks, lim.key_concurrency, now):
                self.held.setdefault(ks, {}).setdefault(s.member, due)
                out.append("key_concurrency")
            elif wait := self._wait(s.task, lim.rate, now):
                self.later[s.member] = wait
                out.append("rate")
            elif wait := self._wait(ks, lim.key_rate, now):
                self.later[s.member] = wait
                out.append("key_rate")
            else:
                deadline = now + int(lease_seconds * 1000)
                for scope, on in ((s.task, lim.concurrency), (ks, lim.key_concurrency)):
                    if on:
                        self.slots.setdefault(scope, {})[s.token] = deadline
                for scope, rate in ((s.task, lim.rate), (ks, lim.key_rate)):
                    if rate:
                        self.starts.setdefault(scope, {})[s.token] = now
                out.append("ok")
        return out

    def _to_ready(self, member: str, due: int | None = None) -> None:
        """Back to its ready set, at the place in line it had when it fell due (or now)."""
        queue, prio, job_id = member.split("|")
        at = epoch_ms() if due is None else due  # held at most now: acquire clamps it
        self._ready.setdefault(queue, {}).setdefault(job_id, ready_score(int(prio), at))

    async def release(self, slots: Sequence[Slot], *, ran: bool = True) -> int:
        woken = 0
        for s in slots:
            scopes = [s.task] if s.key is None else [s.task, f"{s.task}:{s.key}"]
            for scope in scopes:
                self.slots.get(scope, {}).pop(s.token, None)
                if ran:
                    self.slots.get(scope, {}).pop(f"r:{s.job_id}", None)
                held = self.held.get(scope, {})
                for member in sorted(held, key=lambda m: held[m])[:WAKE_PER_SLOT]:
                    self._to_ready(member, held.pop(member))
                    woken += 1
        return woken

    async def refresh(
        self, slots: Sequence[Slot], lease_seconds: float, *, rebuilt: bool = True
    ) -> None:
        deadline = epoch_ms() + int(lease_seconds * 1000)
        for s in slots:
            keyed = s.key is not None and s.limits.key_concurrency
            scopes = [s.task] * bool(s.limits.concurrency) + [f"{s.task}:{s.key}"] * bool(keyed)
            for scope in scopes:
                held = self.slots.setdefault(scope, {})
                held[s.token] = deadline
                if rebuilt:
                    held.pop(f"r:{s.job_id}", None)

    async def restore(self, counted: Sequence[Counted]) -> None:
        now = epoch_ms()
        for c in counted:
            scope = c.task if c.key is None else f"{c.task}:{c.key}"
            if c.kind == "slots":
                self.slots.setdefault(scope, {}).setdefault(c.member, now + c.ms)
            else:
                self.starts.setdefault(scope, {}).setdefault(c.member, now - c.ms)
        self.rebuilt = True

    async def needs_rebuild(self) -> bool:
        return not self.rebuilt

    async def wake_due(self, limit: int = 1000) -> int:
        now = epoch_ms()
        due = sorted(m for m, at in self.later.items() if at <= now)[:limit]
        for member in due:
            del self.later[member]
            self._to_ready(member)
        woken = len(due)
        for scope, held in self.held.items():  # slots a killed worker never released
            slots = self.slots.get(scope, {})
            expired = [t for t, d in slots.items() if d <= now]
            for token in expired:
                del slots[token]
            for member in sorted(held, key=lambda m: held[m])[: len(expired) * WAKE_PER_SLOT]:
                self._to_ready(member, held.pop(member))
                woken += 1
        return woken

    async def held_reason(self, slot: Slot) -> str | None:
        if slot.member in self.held.get(slot.task, {}):
            return "concurrency"
        if slot.member in self.held.get(f"{slot.task}:{slot.key}", {}):
            return "key_concurrency"
        return "rate" if slot.member in self.later else None

    async def usage(self, limited: dict[str, TaskLimits], keys_per_task: int) -> list[Row]:
        now, out = epoch_ms(), []

        def running(scope: str) -> int:
            return sum(d > now for d in self.slots.get(scope, {}).values())

        for task, lim in sorted(limited.items()):
            keys = sorted(self.keys.get(task, set()))[:keys_per_task]
            out.append(
                {
                    "task": task,
                    "limits": lim.describe(),
                    "running": running(task),
                    "waiting": len(self.held.get(task, {})),
                    "keys": [
                        {
                            "key": k,
                            "running": running(f"{task}:{k}"),
                            "waiting": len(self.held.get(f"{task}:{k}", {})),
                        }
                        for k in keys
                    ],
                }
            )
        return out

    async def mirror_paused(self, queues: set[str]) -> None:
        self.paused_queues = set(queues)

    async def paused(self) -> set[str]:
        return set(self.paused_queues)
