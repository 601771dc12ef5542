"""Scale-out in seconds: start the workers a backlog needs now, not at the next fleet tick.

:class:`ScaleOut` is called by the api after each submit, by busy workers that see a
backlog, and by recovery after a run that enqueued jobs. Each sandbox asks at most once per
``ASYNCZ_SCALE_OUT_SECONDS``, and a Redis lock lets one sandbox decide per interval across
all of them, so a burst does not stampede ``Invoke``. Workers just invoked count as
*starting* until they register, so the next decision does not start them twice. The
fleet Lambda's per-minute tick runs the same plan (the safety net); idle exit scales in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from asyncz.fleet.plan import plan_workers
from asyncz.ports import JobBroker
from asyncz.settings import Settings

log = logging.getLogger("asyncz.fleet.scale_out")

Waker = Callable[[], Awaitable[None]]  # starts one worker (an async Lambda invoke)

# How long an invoked worker counts as starting before it registers (a cold start with a
# dependency layer takes a few seconds; an invoke that never ran expires after this).
STARTING_TTL_SECONDS = 20.0
WAKE_CHECK_SECONDS = 5.0  # with scale-out off: how often a sandbox looks for a live worker


async def start_workers(broker: JobBroker, waker: Waker, count: int) -> None:
    """Invoke ``count`` workers, counted as starting first (a slow invoke must not let the
    next decision start them again)."""
    await broker.add_starting(count, STARTING_TTL_SECONDS)
    await asyncio.gather(*(waker() for _ in range(count)))


async def start_one(broker: JobBroker, waker: Waker) -> int:
    """Start one worker now, not at the next decision, unless one is starting already: a
    durable job's continuation, or a job too long for the worker that put it back, needs a
    worker with time (the plan counts the worker that asks as live)."""
    try:
        if await broker.starting_workers() > 0:
            return 0
        await start_workers(broker, waker, 1)
        return 1
    except Exception:  # the job waits in Redis: the fleet's next tick starts a worker
        log.warning("could not start a worker", exc_info=True)
        return 0


class ScaleOut:
    """One per api sandbox: after a submit, start the workers the backlog lacks. With
    ``ASYNCZ_SCALE_OUT_SECONDS=0``, only wake one worker when none is alive (the fleet
    tick adds the rest)."""

    def __init__(self, settings: Settings, waker: Waker | None) -> None:
        self.settings = settings
        self.waker = waker
        self.interval = settings.scale_out_seconds or WAKE_CHECK_SECONDS
        self._checked_at = -float("inf")

    async def __call__(self, broker: JobBroker) -> int:
        """How many workers this call started (0 most of the time: no Redis call at all)."""
        now = time.monotonic()
        if self.waker is None or now - self._checked_at < self.interval:
            return 0
        self._checked_at = now
        try:
            if self.settings.scale_out_seconds > 0:
                if not await broker.try_lock("scale-out", self.interval):
                    return 0  # another sandbox decides this interval
                start = (await plan_workers(broker, self.settings)).start
            elif await broker.live_workers() + await broker.starting_workers() > 0:
                return 0
            elif await broker.try_lock("wake-worker", self.interval):
                start = 1
            else:
                return 0
            if start:
                await start_workers(broker, self.waker, start)
            return start
        except Exception:
            log.warning("could not start workers", exc_info=True)
            return 0
