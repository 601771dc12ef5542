"""The Redis key space of the broker: key names under one prefix, and the commands that put
a job id where it belongs (ready, or delayed until its time)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio.client import Pipeline

from asyncz.jobs import PRIORITY_MAX
from asyncz.port_types import Dispatch, epoch_ms

# Scores: one band of 10**13 ms (~317 years) per priority step keeps FIFO inside a band,
# and the largest score (201 * 10**13) stays exact in a double (< 2**53).
SCORE_SCALE = 10**13


def ready_score(priority: int, ms: int) -> int:
    return (PRIORITY_MAX - priority) * SCORE_SCALE + ms


FAIR_SPACING_MS = 10  # a key's due ids, spaced this far apart in the ready order
FAIR_TTL_MS = 3_600_000  # a queue's fair-order hash lives this long after its last write


class KeySpace:
    """The broker's key names under one prefix, and the commands that put an id in place.
    A part of :class:`asyncz.broker.redis.RedisBroker`. ``fair``: the script that enqueues
    the id of a job with a concurrency key (``fair.lua``)."""

    def __init__(self, prefix: str, fair: Any = None) -> None:
        self.prefix = prefix
        self.known: set[str] = set()  # queue names already in the queues set
        self.fair = fair

    def ready_key(self, queue: str) -> str:
        return f"{self.prefix}:{{{queue}}}:ready"

    def delayed_key(self, queue: str) -> str:
        return f"{self.prefix}:{{{queue}}}:delayed"

    @property
    def queues_key(self) -> str:
        return f"{self.prefix}:queues"

    @property
    def activity_key(self) -> str:
        return f"{self.prefix}:activity"

    @property
    def idle_key(self) -> str:
        return f"{self.prefix}:recovery:idle"

    @property
    def workers_key(self) -> str:
        return f"{self.prefix}:workers"

    @property
    def workers_since_key(self) -> str:  # worker id -> when it first registered (ms)
        return f"{self.prefix}:workers:since"

    @property
    def starting_key(self) -> str:
        return f"{self.prefix}:workers:starting"

    def fair_key(self, queue: str) -> str:
        return f"{self.prefix}:{{{queue}}}:fair"

    def _fair_key(self, it: Dispatch) -> str | None:
        """The concurrency key of a due job that the fair script enqueues, else None."""
        return it.fair_key if it.due and self.fair is not None else None

    def _place(self, it: Dispatch) -> tuple[str, str, int]:
        """The sorted set, member and score that put the id where it belongs: ready by
        priority then time, or delayed until its time."""
        if it.due:
            return self.ready_key(it.queue), it.job_id, ready_score(it.priority, it.run_at_ms)
        return self.delayed_key(it.queue), f"{it.priority}|{it.job_id}", it.run_at_ms

    def add(self, target: Any, it: Dispatch) -> Any:
        if (fair_key := self._fair_key(it)) is not None:
            keys = [self.ready_key(it.queue), self.fair_key(it.queue)]
            band = (PRIORITY_MAX - it.priority) * SCORE_SCALE
            args: list[str | int] = [it.job_id, fair_key, band, FAIR_SPACING_MS, FAIR_TTL_MS]
            if isinstance(target, Pipeline):  # queued in the pipeline's one round trip
                return target.eval(self.fair.script, len(keys), *keys, *args)
            return self.fair(keys=keys, args=args)
        key, member, score = self._place(it)
        return target.zadd(key, {member: score}, nx=True)

    def move(self, pipe: Any, it: Dispatch) -> None:
        """Put an id where it belongs now, out of the other set: its delayed score moves
        (no NX) when it is not due."""
        member = f"{it.priority}|{it.job_id}"
        if it.due:
            pipe.zrem(self.delayed_key(it.queue), member)
            self.add(pipe, it)
        else:
            pipe.zrem(self.ready_key(it.queue), it.job_id)
            pipe.zadd(self.delayed_key(it.queue), {member: it.run_at_ms})

    def fresh(self, items: Sequence[Dispatch], register: bool) -> set[str]:
        """Queue names to (re)register in the queues set with this enqueue."""
        if register:
            return {it.queue for it in items}
        return {it.queue for it in items if it.queue not in self.known}

    def fill(self, pipe: Any, items: Sequence[Dispatch], fresh: set[str]) -> int:
        """Queue ``items`` in ``pipe``: one ``ZADD NX`` per sorted set (a batch's ids go to a
        queue's ready or delayed set in one command: a fifth of the CPU of a command each,
        here and in Redis), the fair script per id of a job with a concurrency key. Returns
        how many of the pipeline's first results count the ids that were new."""
        sets: dict[str, dict[str, int]] = {}
        commands = 0
        for it in items:
            if self._fair_key(it) is not None:
                self.add(pipe, it)
                commands += 1
            else:
                key, member, score = self._place(it)
                sets.setdefault(key, {}).setdefault(member, score)
        for key, members in sets.items():
            pipe.zadd(key, members, nx=True)
        if fresh:
            pipe.sadd(self.queues_key, *fresh)
        return commands + len(sets)

    def prune_and_count_workers(self, pipe: Any) -> None:
        pipe.zremrangebyscore(self.workers_key, "-inf", epoch_ms())
        pipe.zcard(self.workers_key)

    def lock_args(self, name: str, ttl_seconds: float) -> tuple[str, dict[str, Any]]:
        return f"{self.prefix}:lock:{name}", {"nx": True, "px": int(ttl_seconds * 1000)}
