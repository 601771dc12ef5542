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
import heapq
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
        self.looked: float | None = None  # the earliest delayed id at the last look
        self.own: list[float] = []  # a heap: the wakes of the jobs this worker suspended
        # (each a time.monotonic() when due)

    @property
    def at(self) -> float | None:
        """When the next wake this worker knows of is due (time.monotonic()); None: none."""
        known = [t for t in (self.looked, self.own[0] if self.own else None) if t is not None]
        return min(known) if known else None

    async def look(self) -> None:
        """Read when the next wake is due (one round trip)."""
        self.looked = None
        due = await self.broker.next_due(self.queues)
        if due is not None:
            self.looked = time.monotonic() + (due - epoch_ms()) / 1000

    def expect(self, delay_seconds: float) -> None:
        """A wake this worker set itself (a job it suspended): known without a look."""
        heapq.heappush(self.own, time.monotonic() + delay_seconds)

    def take_due(self) -> bool:
        """A wake is due: promote now (and forget the due ones)."""
        at = self.at
        if at is None or at > time.monotonic():
            return False
        self._forget_due()
        return True

    def _forget_due(self) -> None:
        now = time.monotonic()
        if self.looked is not None and self.looked <= now:
            self.looked = None
        while self.own and self.own[0] <= now:
            heapq.heappop(self.own)

    async def poll_until(self, wait: float, look: bool = True) -> float:
        """How long to poll, at most ``wait`` seconds: until just before the next wake; one
        due within the timer's slack is slept for here and promoted, and the poll is short.
        ``look=False`` (a busy worker): only the wakes it knows of, no round trip, so a
        plain job's claim pays nothing for them."""
        if look:
            await self.look()
        at = self.at
        if at is None:
            return wait
        ahead = at - time.monotonic()
        if ahead > TIMER_SLACK:
            return min(wait, ahead - TIMER_SLACK)
        await asyncio.sleep(max(ahead, 0.0))
        self._forget_due()  # promoted now
        await self.promote()
        return min(wait, SHORTEST_WAIT)

    def within(self, seconds: float) -> bool:
        """A wake is due within ``seconds`` from now (or is overdue)."""
        at = self.at
        return at is not None and at - time.monotonic() <= seconds
