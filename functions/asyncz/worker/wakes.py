"""An idle worker's next wake: when the earliest delayed id of its queues (a retry's backoff,
a ``delay_seconds``, a durable sleep) falls due.

A waiting worker blocks in its long poll, and promotes due ids only between polls; knowing
the next wake, it ends the poll then and promotes at once. A worker about to idle-exit stays
when a wake is due within its idle window, as it would for a job arriving in it: staying
costs what the window does (docs/cost.md, "Worker billing"), and leaving would make the
wake wait for the fleet. A wake further off is the fleet's (:mod:`asyncz.fleet.wakes`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from asyncz.port_types import epoch_ms
from asyncz.ports import JobBroker

SHORTEST_WAIT = 0.05  # the shortest poll (as the loop's own)
# Redis ends a blocking pop on its timer, up to ~100 ms after the timeout (hz 10): a poll
# ends this much before a wake, and the last stretch is slept here, to promote on time.
TIMER_SLACK = 0.1


class NextWake:
    def __init__(
        self, broker: JobBroker, queues: Sequence[str], promote: Callable[[], Awaitable[int]]
    ) -> None:
        self.broker = broker
        self.queues = list(queues)
        self.promote = promote
        self.at: float | None = None  # time.monotonic() when due; None: nothing delayed

    async def look(self) -> None:
        """Read when the next wake is due (one round trip)."""
        self.at = None
        due = await self.broker.next_due(self.queues)
        if due is not None:
            self.at = time.monotonic() + (due - epoch_ms()) / 1000

    def take_due(self) -> bool:
        """The wake is due: promote now (and forget it until the next look)."""
        if self.at is None or self.at > time.monotonic():
            return False
        self.at = None
        return True

    async def poll_until(self, wait: float) -> float:
        """How long to poll, at most ``wait`` seconds: until just before the next wake; one
        due within the timer's slack is slept for here and promoted, and the poll is short."""
        await self.look()
        if self.at is None:
            return wait
        ahead = self.at - time.monotonic()
        if ahead > TIMER_SLACK:
            return min(wait, ahead - TIMER_SLACK)
        await asyncio.sleep(max(ahead, 0.0))
        self.at = None  # promoted now
        await self.promote()
        return min(wait, SHORTEST_WAIT)

    def within(self, seconds: float) -> bool:
        """A wake is due within ``seconds`` from now (or is overdue)."""
        return self.at is not None and self.at - time.monotonic() <= seconds
