"""An idle worker's next wake: when the earliest delayed id of its queues (a retry's backoff,
a ``delay_seconds``, a durable sleep) falls due.

A waiting worker blocks in its long poll, and promotes due ids only between polls; knowing
the next wake, it ends the poll then and promotes at once. A worker about to idle-exit stays
when a wake is due within its idle window, as it would for a job arriving in it: staying
costs what the window does (docs/cost.md, "Worker billing"), and leaving would make the
wake wait for the fleet. A wake further off is the fleet's (:mod:`asyncz.fleet.wakes`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from asyncz.port_types import epoch_ms
from asyncz.ports import JobBroker

SHORTEST_WAIT = 0.05  # the shortest poll (as the loop's own)


class NextWake:
    def __init__(self, broker: JobBroker, queues: Sequence[str]) -> None:
        self.broker = broker
        self.queues = list(queues)
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

    def bound(self, wait: float) -> float:
        """A poll of ``wait`` seconds, ended when the next wake falls due."""
        if self.at is None:
            return wait
        return min(wait, max(self.at - time.monotonic(), SHORTEST_WAIT))

    def within(self, seconds: float) -> bool:
        """A wake is due within ``seconds`` from now (or is overdue)."""
        return self.at is not None and self.at - time.monotonic() <= seconds
