"""A pool of warm api sandboxes behind the local API Gateway: each takes one request at a
time, like Lambda execution environments, and a request waits for an idle one."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from asyncz.local.context import log_line
from asyncz.local.lambda_.sandbox import running_loop


class ApiBackend(Protocol):
    """Runs the api function for one event; raises ``TimeoutError`` or returns the reply."""

    async def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]: ...

    def close(self) -> None: ...


class SandboxPool:
    """Api sandboxes; each takes one request at a time, like Lambda execution environments.

    :meth:`invoke` runs on the front's event loop; :meth:`add` may be called from any thread
    (sandboxes initialise on threads of their own, ~2 s each).
    """

    def __init__(self, sandboxes: list[Any], respawn: Callable[[Any], Any]) -> None:
        self._respawn = respawn
        self._lock = threading.Lock()
        self._idle: deque[Any] = deque()
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._all: list[Any] = []
        self._closed = False
        for sandbox in sandboxes:
            self.add(sandbox)

    @property
    def size(self) -> int:
        return len(self._all)

    def add(self, sandbox: Any) -> None:
        """Make one more (initialised) sandbox available."""
        with self._lock:
            if self._closed:
                sandbox.stop(grace_s=0)
                return
            self._all.append(sandbox)
        self._release(sandbox)

    def _release(self, sandbox: Any) -> None:
        with self._lock:
            if not self._waiters:
                self._idle.append(sandbox)
                return
            waiter = self._waiters.popleft()
        loop = waiter.get_loop()
        if running_loop() is loop:
            self._hand(waiter, sandbox)
        else:
            loop.call_soon_threadsafe(self._hand, waiter, sandbox)

    def _hand(self, waiter: asyncio.Future[Any], sandbox: Any) -> None:
        if waiter.done():  # its request gave up meanwhile
            self._release(sandbox)
        else:
            waiter.set_result(sandbox)

    async def _acquire(self, timeout_s: float) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            while self._idle:
                sandbox = self._idle.popleft()
                if not sandbox.broken:
                    return sandbox
                self._all.remove(sandbox)  # died while idle (its pipe said so): replace it
                self._retire(sandbox)
            waiter: asyncio.Future[Any] = loop.create_future()
            self._waiters.append(waiter)
        timer = loop.call_later(timeout_s, _give_up, waiter)
        try:
            return await waiter
        except BaseException:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release(waiter.result())  # handed over just as we were cancelled
            raise
        finally:
            timer.cancel()

    async def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        started = time.monotonic()
        sandbox = await self._acquire(timeout_s)
        try:
            remaining = max(0.1, timeout_s - (time.monotonic() - started))
            reply: dict[str, Any] = await sandbox.ainvoke(
                event, timeout_s, request_id=event["requestContext"]["requestId"], wait_s=remaining
            )
            return reply
        finally:
            # The loop watches each pipe: a crash or a timeout has set ``broken`` by now.
            if not sandbox.broken:
                self._release(sandbox)
            else:  # a fresh one takes its place
                with self._lock:
                    self._all.remove(sandbox)
                self._retire(sandbox)

    def _retire(self, dead: Any) -> None:
        """Stop watching ``dead`` (here, on the loop) and replace it off the loop."""
        dead.unwatch()
        threading.Thread(
            target=self._replace, args=(dead,), name="api-respawn", daemon=True
        ).start()

    def _replace(self, dead: Any) -> None:
        try:
            fresh = self._respawn(dead)
        except Exception as exc:  # noqa: BLE001 - the pool runs on with one sandbox fewer
            log_line("gateway", f"api sandbox could not be replaced: {exc}", "ERROR")
            return
        self.add(fresh)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sandboxes, self._all = self._all, []
        for sandbox in sandboxes:
            sandbox.stop(grace_s=2)


def _give_up(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no api sandbox became free"))


# --------------------------------------------------------------------------- HTTP front
