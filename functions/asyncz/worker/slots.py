"""How many of the worker's slots are free to claim for: a slot frees when its task returns,
so the next claim overlaps the finish write; with some slots still busy, a free slot waits
a moment for others, so short jobs that end together are claimed for in one statement."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from asyncz.worker.stats import Running

COALESCE_SECONDS = 0.002  # the longest a free slot waits for others before a claim


def executing(running: Mapping[str, Running]) -> int:
    """Attempts whose task has not returned: a slot frees when its task returns, so the
    next claim overlaps the finish write."""
    return sum(not r.finishing for r in running.values())


async def free_slots(concurrency: int, running: Mapping[str, Running], freed: asyncio.Event
                     ) -> int:  # fmt: skip
    """Free slots to claim for. With some slots still busy, wait up to
    ``COALESCE_SECONDS`` for them to free too: short jobs end together, and one claim of
    several ids costs the round trips of one."""
    loop = asyncio.get_running_loop()
    until = loop.time() + COALESCE_SECONDS
    while True:
        busy = executing(running)
        free = concurrency - busy
        if free > 0 and not busy:
            return free
        wait = 1.0 if free <= 0 else until - loop.time()
        if wait <= 0:
            return free
        freed.clear()
        try:
            async with asyncio.timeout(wait):
                await freed.wait()
        except TimeoutError:
            if free <= 0:
                return 0
