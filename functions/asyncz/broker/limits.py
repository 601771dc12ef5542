"""Flow-control limits in Redis (``limits.lua``): concurrency slots scored by lease deadline
(an expired one is free, so a killed worker's slots come back within one lease timeout),
rate windows of start times, and the ids held back until a slot frees or a window opens.
A part of :class:`asyncz.broker.redis.RedisBroker`. Nothing here is truth: Postgres keeps
every held-back job ``queued``, and recovery's re-enqueue scan rescues any id Redis lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

import redis.asyncio as aioredis

from asyncz.broker.keys import SCORE_SCALE
from asyncz.jobs import PRIORITY_MAX
from asyncz.port_types import Row, Slot
from asyncz.tasks.limits import Counted, Rate, TaskLimits

WAKE_PER_SLOT = 2  # held ids moved back to ready per freed slot (one may be stale)
HELD_SETS = 200  # held sets (a task's, a key's) a wake looks at for expired slots, at random


def _rate(rate: Rate | None) -> list[int]:
    return [rate.count, rate.period_seconds * 1000] if rate else [0, 0]


def _acquire_args(slot: Slot) -> list[Any]:
    lim = slot.limits
    return [
        slot.token,
        slot.task,
        slot.key or "",
        lim.concurrency or 0,
        lim.key_concurrency or 0,
        # a wake (a suspended job's claim) is not a new start: its rate does not count it
        *_rate(None if slot.wake else lim.rate),
        *_rate(None if slot.wake else lim.key_rate),
        slot.member,
        slot.due_ms,
    ]


def _slot_args(slot: Slot, ran: bool) -> list[str]:
    """A slot as release names it; ``ran``: with the slot a rebuild put back."""
    return [slot.task, slot.key or "", slot.token, f"r:{slot.job_id}" if ran else ""]


def _scope(kind: str, task: str, key: str | None) -> str:
    """The key (after ``<prefix>:limits:``) of a task's slots or starts, or of one key's."""
    return f"{kind}:{task}" if key is None else f"k{kind}:{task}:{key}"


class RedisLimits:
    def __init__(self, client: aioredis.Redis, prefix: str, guard: Any) -> None:
        self._r = client
        self._p = prefix
        self._guard = guard  # the broker's driver-error translation
        source = resources.files("asyncz.broker").joinpath("limits.lua").read_text("utf-8")
        self._script = client.register_script(source)

    async def _run(self, *args: Any) -> Any:
        with self._guard():
            return await self._script(keys=[], args=[args[0], self._p, *args[1:]])

    async def acquire(self, slots: Sequence[Slot], lease_seconds: float) -> list[str]:
        if not slots:
            return []
        flat = [a for s in slots for a in _acquire_args(s)]
        verdicts = await self._run("acquire", int(lease_seconds * 1000), len(slots), *flat)
        return [str(v) for v in verdicts]

    async def release(self, slots: Sequence[Slot], *, ran: bool = True) -> int:
        if not slots:
            return 0
        flat = [a for s in slots for a in _slot_args(s, ran)]
        return int(await self._run("release", PRIORITY_MAX, SCORE_SCALE, WAKE_PER_SLOT, *flat))

    async def refresh(
        self, slots: Sequence[Slot], lease_seconds: float, *, rebuilt: bool = True
    ) -> None:
        flat: list[Any] = []
        for s in slots:
            keyed = s.key is not None and s.limits.key_concurrency
            flat += [
                _scope("slots", s.task, None) if s.limits.concurrency else "",
                _scope("slots", s.task, s.key) if keyed else "",
                s.token,
                f"r:{s.job_id}" if rebuilt else "",
            ]
        if flat:
            await self._run("refresh", int(lease_seconds * 1000), *flat)

    async def restore(self, counted: Sequence[Counted]) -> None:
        slots = [c for c in counted if c.kind == "slots"]
        starts = [c for c in counted if c.kind == "starts"]
        flat: list[Any] = [len(slots)]
        for c in slots:
            flat += [_scope(c.kind, c.task, c.key), c.member, c.ms]
        for c in starts:
            flat += [_scope(c.kind, c.task, c.key), c.member, c.ms, c.window_ms]
        await self._run("restore", *flat)

    async def needs_rebuild(self) -> bool:
        with self._guard():
            return not await self._r.exists(f"{self._p}:limits:rebuilt")

    async def wake_due(self, limit: int = 1000) -> int:
        return int(
            await self._run("wake", PRIORITY_MAX, SCORE_SCALE, limit, WAKE_PER_SLOT, HELD_SETS)
        )

    async def held_reason(self, slot: Slot) -> str | None:
        base, key = f"{self._p}:limits:", slot.key or ""
        with self._guard():
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zscore(f"{base}held:{slot.task}", slot.member)
                pipe.zscore(f"{base}kheld:{slot.task}:{key}", slot.member)
                pipe.zscore(f"{base}later", slot.member)
                task_held, key_held, later = await pipe.execute()
        if task_held is not None:
            return "concurrency"
        if key_held is not None:
            return "key_concurrency"
        return "rate" if later is not None else None

    async def usage(self, limited: dict[str, TaskLimits], keys_per_task: int) -> list[Row]:
        base, out = f"{self._p}:limits:", []
        with self._guard():
            t = await self._r.time()
            now = int(t[0]) * 1000 + int(t[1]) // 1000
            for task, lim in sorted(limited.items()):
                _, seen = await self._r.sscan(f"{base}keys:{task}", count=keys_per_task)
                keys = sorted(str(k) for k in seen)[:keys_per_task]
                async with self._r.pipeline(transaction=False) as pipe:
                    pipe.zcount(f"{base}slots:{task}", f"({now}", "+inf")
                    pipe.zcard(f"{base}held:{task}")
                    for k in keys:
                        pipe.zcount(f"{base}kslots:{task}:{k}", f"({now}", "+inf")
                        pipe.zcard(f"{base}kheld:{task}:{k}")
                    res = await pipe.execute()
                per_key = [
                    {"key": k, "running": int(res[2 + 2 * i]), "waiting": int(res[3 + 2 * i])}
                    for i, k in enumerate(keys)
                ]
                out.append(
                    {
                        "task": task,
                        "limits": lim.describe(),
                        "running": int(res[0]),
                        "waiting": int(res[1]),
                        "keys": per_key,
                    }
                )
        return out

    async def mirror_paused(self, queues: set[str]) -> None:
        key = f"{self._p}:limits:paused"
        with self._guard():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                if queues:
                    pipe.sadd(key, *queues)
                await pipe.execute()

    async def paused(self) -> set[str]:
        with self._guard():
            return {str(q) for q in await self._r.smembers(f"{self._p}:limits:paused")}
