"""The fleet's tick, and the wakes it waits for within its minute.

Retries with a backoff, ``delay_seconds`` and durable sleeps put ids in the delayed sets; a
live worker promotes the due ones once a second. With no worker alive, the tick promotes
them first, so a due id counts in the ready backlog and gets a worker at that tick. Then,
when the earliest delayed id of the active queues falls due before the invocation must end,
the fleet waits for it (256 MB), promotes it and starts the worker it needs; when nothing is
due within that time it returns at once. Redis only: the fleet never touches the database.
A look that finds Redis unavailable (a restart, a failover) is made again a second later, so
a blip costs no wake; Redis still unavailable when the wait must end fails the invocation.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from asyncz.errors import BrokerUnavailableError
from asyncz.fleet.plan import Plan, active_queues, plan_workers
from asyncz.fleet.scale_out import STARTING_TTL_SECONDS
from asyncz.port_types import epoch_ms
from asyncz.ports import JobBroker
from asyncz.settings import Settings

log = logging.getLogger("asyncz.fleet")

# The fleet stops waiting this long before its Lambda timeout: time to promote, plan and
# invoke the workers a last wake needs, so one tick never runs into the next.
WAKE_MARGIN_SECONDS = 5.0
RECHECK_SECONDS = 1.0  # how often a waiting fleet looks again (an earlier wake may be added)
NOT_YET_SECONDS = 0.05  # a due id Redis's clock does not see due yet: look again this soon


async def tick(broker: JobBroker, settings: Settings) -> tuple[int, Plan]:
    """Promote the due delayed ids of the active queues, then plan (and count as starting
    the workers the plan starts). Returns (ids promoted, plan)."""
    moved = await broker.promote_due(await active_queues(broker, settings.queue_list))
    plan = await plan_workers(broker, settings)
    if plan.start:
        await broker.add_starting(plan.start, STARTING_TTL_SECONDS)
    return moved, plan


async def seconds_to_next_wake(broker: JobBroker, settings: Settings) -> float | None:
    """Seconds until the earliest delayed id of the active queues is due (≤ 0: due now);
    None when there is none."""
    due = await broker.next_due(await active_queues(broker, settings.queue_list))
    return None if due is None else (due - epoch_ms()) / 1000


async def wait_for_wakes(
    broker: JobBroker, settings: Settings, until: float, invoke: Callable[[], None]
) -> tuple[int, int]:
    """Until ``until`` (``time.monotonic()``): at each wake due before it, promote, plan and
    ``invoke`` the workers the plan starts; Redis unavailable: look again a second later, or
    raise when that is past ``until``. Returns (wakes, workers started)."""
    wakes = started = 0
    while True:
        try:
            ahead = await seconds_to_next_wake(broker, settings)
            if ahead is None or time.monotonic() + max(ahead, 0.0) > until:
                break
            if ahead > 0:
                await asyncio.sleep(min(ahead, RECHECK_SECONDS))
                continue
            moved, plan = await tick(broker, settings)
        except BrokerUnavailableError as exc:
            if time.monotonic() + RECHECK_SECONDS > until:
                raise
            log.warning("fleet: Redis unavailable while waiting for wakes, looking again: %s", exc)
            await asyncio.sleep(RECHECK_SECONDS)
            continue
        for _ in range(plan.start):
            invoke()
        started += plan.start
        if moved:
            wakes += 1
        else:  # due by our clock, not yet by Redis's (a few ms behind): look again soon
            await asyncio.sleep(NOT_YET_SECONDS)
    return wakes, started
