"""How many workers to start: the fleet's plan, made from the ready backlog and the live and
starting workers. The fleet's minute tick and scale-out after a submit use the same plan."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from asyncz.ports import JobBroker
from asyncz.settings import Settings


def workers_to_start(
    backlog: int, live_workers: int, *, min_workers: int, max_workers: int, jobs_per_worker: int
) -> int:
    """desired = clamp(ceil(backlog / jobs_per_worker), min, max); start desired − live (≥ 0)."""
    desired = math.ceil(max(backlog, 0) / max(jobs_per_worker, 1))
    desired = max(min_workers, min(max_workers, desired))
    return max(0, desired - max(live_workers, 0))


@dataclass(frozen=True, slots=True)
class Plan:
    backlog: int
    live: int
    starting: int
    start: int


async def plan_workers(broker: JobBroker, settings: Settings) -> Plan:
    """desired = clamp(ceil(backlog / jobs_per_worker), min, max); start what is missing
    beyond the live and the starting workers."""
    backlog = await ready_backlog(broker, settings.queue_list)
    live = await broker.live_workers()
    starting = await broker.starting_workers()
    start = workers_to_start(
        backlog,
        live + starting,
        min_workers=settings.fleet_min_workers,
        max_workers=settings.fleet_max_workers,
        jobs_per_worker=settings.fleet_jobs_per_worker,
    )
    return Plan(backlog, live, starting, start)


async def active_queues(broker: JobBroker, declared: Sequence[str]) -> list[str]:
    """Every queue known to Redis or declared, but the paused ones."""
    return sorted((set(await broker.known_queues()) | set(declared)) - await broker.limits.paused())


async def ready_backlog(broker: JobBroker, declared: Sequence[str]) -> int:
    """Jobs ready to run now across every queue but the paused ones (Redis only: no
    database round trip; held-back jobs are not in the ready sets)."""
    queues = await active_queues(broker, declared)
    return sum(ready for ready, _ in (await broker.backlog(queues)).values())
