"""The time a durable task's steps see: ``ctx.now()`` records it, and a step's retry
waits on it. The system clock in workers; a controllable one in tests
(:class:`asyncz.testing.durable.ManualClock`)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, aware, in UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait on a sync task's thread."""
        ...

    async def asleep(self, seconds: float) -> None:
        """Wait on the event loop."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK = SystemClock()
