"""Waking the events function after ends commit: an async Lambda invoke, at most one per
interval per sandbox (the first at once, later calls folded into one at the interval's
end), never awaited by the caller, and none while a publisher drains (it looks for pending
events after it lets go of its lock). A failed invoke is logged; the minute's sweep
delivers."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable

from asyncz.errors import BrokerUnavailableError
from asyncz.faults import crash_point
from asyncz.outbox.pump import LOCK
from asyncz.ports import JobBroker
from asyncz.settings import Settings

log = logging.getLogger("asyncz.outbox")

Wake = Callable[[], None]


def no_wake() -> None:
    """No events function to wake (none configured): the sweep alone delivers."""


class PumpWake:
    def __init__(
        self,
        invoke: Callable[[], Awaitable[None]],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._invoke = invoke
        self._interval = interval
        self._clock = clock
        self._last = float("-inf")
        self._pending = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent = 0

    def __call__(self) -> None:
        """Ends were committed: wake the publisher now, or once at the interval's end."""
        if self._pending:
            return
        self._pending = True
        wait = self._last + self._interval - self._clock()
        if wait <= 0:
            self._fire()
        else:
            asyncio.get_running_loop().call_later(wait, self._fire)

    def _fire(self) -> None:
        self._pending = False
        self._last = self._clock()
        crash_point("outbox.before_wake")  # chaos: the ends are committed, nobody is told
        task = asyncio.get_running_loop().create_task(self._send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self) -> None:
        try:
            await self._invoke()
            self.sent += 1
        except Exception as exc:  # noqa: BLE001 - never the caller's problem: the sweep covers it
            log.warning("events function not woken (%s: %s): the sweep delivers",
                        type(exc).__name__, exc)  # fmt: skip


async def unless_draining(broker: JobBroker, invoke: Callable[[], Awaitable[None]]) -> bool:
    """Invoke, unless a publisher holds the pump's lock now (whether it invoked): that one
    looks for pending events after it lets go, so the ends just committed are its to send.
    Without Redis, invoke (the woken run publishes without the lock)."""
    try:
        if await broker.lock_held(LOCK):
            return False
    except BrokerUnavailableError:
        pass
    await invoke()
    return True


def lambda_wake(settings: Settings, broker: JobBroker) -> Wake:
    """The sandbox's wake of the events function (an async invoke), or :func:`no_wake`.
    The Lambda client is made at the first invoke, not at the cold start: a worker's CPU
    then goes to its jobs (a drain's publisher holds its lock, so a busy sandbox seldom
    invokes at all)."""
    name = settings.events_function_name
    if not name:
        return no_wake
    from asyncz.fleet.invoke import invoke_worker

    async def invoke() -> None:  # on the sandbox's one Lambda client, on a pool thread
        # outside the caller's context: the client's first build logs as the sandbox, not
        # as the job whose end woke it
        call = functools.partial(invoke_worker, name, b'{"source": "asyncz.wake"}')
        await asyncio.get_running_loop().run_in_executor(None, call)

    async def wake() -> None:
        await unless_draining(broker, invoke)

    return PumpWake(wake, settings.outbox_wake_seconds)
