"""In-memory broker: the Redis adapter's ready/delayed sets, presence and locks in dicts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from asyncz.broker.keys import FAIR_SPACING_MS, SCORE_SCALE, ready_score
from asyncz.jobs import PRIORITY_MAX
from asyncz.port_types import Dispatch, epoch_ms
from asyncz.testing.broker_limits import MemoryLimits


class MemoryBroker:
    """The job broker (:class:`asyncz.ports.JobBroker`) on dicts; same scores as Redis."""

    def __init__(self) -> None:
        self.ready: dict[str, dict[str, int]] = {}  # queue -> {job id: score}
        self.delayed: dict[str, dict[str, int]] = {}  # queue -> {"prio|id": run_at ms}
        self.queues: set[str] = set()
        self.workers: dict[str, int] = {}  # worker id -> presence expiry ms
        self.since: dict[str, int] = {}  # worker id -> first registered ms
        self.locks: dict[str, float] = {}  # name -> expiry (monotonic)
        self.starting: list[int] = []  # expiry ms of each worker invoked, not yet registered
        self.positions: dict[str, str | None] = {}
        self.enqueues = 0  # the Redis adapter's activity counter (always tracked here)
        self.idle: tuple[str, float] | None = None  # (value, expiry monotonic)
        self.limits = MemoryLimits(self.ready)
        self.fair: dict[tuple[str, str], int] = {}  # (queue, key) -> its last virtual ms
        self.requests: dict[str, list[float]] = {}  # key name -> admitted request times

    async def enqueue(self, items: Sequence[Dispatch], *, register: bool = False) -> int:
        if items:
            self.enqueues += 1
        new = 0
        for it in items:
            self.queues.add(it.queue)
            if it.due:
                target, member = self.ready.setdefault(it.queue, {}), it.job_id
                score = ready_score(it.priority, it.run_at_ms)
            else:
                target, member = self.delayed.setdefault(it.queue, {}), f"{it.priority}|{it.job_id}"
                score = it.run_at_ms
            if it.due and it.fair_key is not None:  # as fair.lua
                vt = max(epoch_ms(), self.fair.get((it.queue, it.fair_key), 0) + FAIR_SPACING_MS)
                score = ready_score(it.priority, vt)
                if member not in target:
                    self.fair[(it.queue, it.fair_key)] = vt
            if member not in target:  # ZADD NX
                target[member] = score
                new += 1
        return new

    async def reschedule(self, items: Sequence[Dispatch]) -> None:
        for it in items:
            member = f"{it.priority}|{it.job_id}"
            if it.due:
                self.delayed.get(it.queue, {}).pop(member, None)
                await self.enqueue([it])
            else:
                self.ready.get(it.queue, {}).pop(it.job_id, None)
                self.delayed.setdefault(it.queue, {})[member] = it.run_at_ms

    async def promote_due(self, queues: Sequence[str], limit: int = 1000) -> int:
        now, moved = epoch_ms(), 0
        for q in queues:
            delayed = self.delayed.get(q, {})
            due = sorted((s, m) for m, s in delayed.items() if s <= now)[:limit]
            for ms, member in due:
                prio, _, job_id = member.partition("|")
                score = (PRIORITY_MAX - int(prio)) * SCORE_SCALE + ms
                self.ready.setdefault(q, {}).setdefault(job_id, score)
                del delayed[member]
                moved += 1
        return moved

    async def next_due(self, queues: Sequence[str]) -> int | None:
        scores = [ms for q in queues for ms in self.delayed.get(q, {}).values()]
        return min(scores, default=None)

    async def pop(self, queues: Sequence[str], max_items: int, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            for q in queues:  # BZMPOP: the first non-empty key, lowest scores first
                ready = self.ready.get(q)
                if ready:
                    ids = sorted(ready, key=lambda i: ready[i])[:max_items]
                    for i in ids:
                        del ready[i]
                    return ids
            if time.monotonic() >= deadline:
                return []
            await asyncio.sleep(0.01)

    async def known_queues(self) -> list[str]:
        return sorted(self.queues)

    async def backlog(self, queues: Sequence[str]) -> dict[str, tuple[int, int]]:
        return {q: (len(self.ready.get(q, {})), len(self.delayed.get(q, {}))) for q in queues}

    async def register_worker(self, worker_id: str, ttl_seconds: float) -> None:
        self.workers[worker_id] = epoch_ms() + int(ttl_seconds * 1000)
        self.since.setdefault(worker_id, epoch_ms())

    async def unregister_worker(self, worker_id: str) -> None:
        self.workers.pop(worker_id, None)
        self.since.pop(worker_id, None)

    async def live_worker_list(self) -> list[dict[str, Any]]:
        await self.live_workers()  # drops the expired
        self.since = {w: t for w, t in self.since.items() if w in self.workers}
        return [{"worker_id": w, "since_ms": self.since.get(w), "expires_ms": t}
                for w, t in sorted(self.workers.items())]  # fmt: skip

    async def live_workers(self) -> int:
        now = epoch_ms()
        self.workers = {w: t for w, t in self.workers.items() if t > now}
        return len(self.workers)

    async def add_starting(self, count: int, ttl_seconds: float) -> None:
        self.starting += [epoch_ms() + int(ttl_seconds * 1000)] * count

    async def starting_workers(self) -> int:
        now = epoch_ms()
        self.starting = sorted(t for t in self.starting if t > now)
        return len(self.starting)

    async def worker_started(self) -> None:
        self.starting = sorted(self.starting)[1:]

    async def try_lock(self, name: str, ttl_seconds: float) -> bool:
        now = time.monotonic()
        if self.locks.get(name, 0.0) > now:
            return False
        self.locks[name] = now + ttl_seconds
        return True

    async def unlock(self, name: str) -> None:
        self.locks.pop(name, None)

    async def lock_held(self, name: str) -> bool:
        return self.locks.get(name, 0.0) > time.monotonic()

    async def scan_position(self, scan: str = "queued") -> str | None:
        return self.positions.get(scan)

    async def save_scan_position(self, position: str | None, scan: str = "queued") -> None:
        self.positions[scan] = position

    async def activity(self) -> int:
        return self.enqueues

    async def idle_mark(self) -> str | None:
        if self.idle is None or self.idle[1] <= time.monotonic():
            return None
        return self.idle[0]

    async def set_idle_mark(self, value: str | None, ttl_seconds: float) -> None:
        self.idle = None if value is None else (value, time.monotonic() + ttl_seconds)

    async def take_request(self, key_id: str, limit: int, period_seconds: int) -> float:
        now = time.monotonic()
        log = [t for t in self.requests.get(key_id, []) if t > now - period_seconds]
        self.requests[key_id] = log
        if len(log) < limit:
            log.append(now)
            return 0.0
        return max(0.001, log[0] + period_seconds - now)

    async def ping(self) -> None:
        return None
