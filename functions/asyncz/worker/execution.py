"""Running one task: a sync task on a reusable daemon thread (abandoned, never waited on, at
its timeout; its limit's slot held until the thread returns), and the check that its result
can be stored and read back."""

from __future__ import annotations

import asyncio
import contextvars
import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from asyncz.jobs import Lease, unstorable
from asyncz.tasks.registry import TaskContext, TaskSpec

_OUT_OF_MEMORY = MemoryError("the task ran out of memory")  # made now: none may be left later
# json.dumps(..., allow_nan=False) builds an encoder per call: one, made once, a job costs less
_STRICT_JSON = json.JSONEncoder(allow_nan=False)


class _Item:
    """One sync call handed to a thread, and what the loop knows of it."""

    __slots__ = ("fn", "future", "name", "returned", "running")

    def __init__(
        self,
        fn: Callable[[], Any],
        name: str,
        future: asyncio.Future[Any],
        returned: Callable[[], None] | None,
    ) -> None:
        self.fn: Callable[[], Any] | None = fn
        self.name = name
        self.future = future
        self.returned = returned  # called on the loop when fn returns, abandoned or not
        self.running = False  # set while a thread executes it


class TaskThreads:
    """Daemon threads for sync tasks, reused from one task to the next.

    Starting a thread per task costs a large share of a short job's CPU (BENCHMARKS.md,
    "Measured reasons"). A thread whose task returned takes the next one; a task abandoned at its
    timeout keeps its thread (a thread cannot be killed) and is counted as hung until it
    returns, while a fresh thread serves the others. Results that come back together wake
    the event loop once. Each task runs in a fresh ``contextvars`` context, as on a new
    thread; ``threading.local`` state set by a task may be seen by a later task on the same
    thread (as with any thread pool).
    """

    def __init__(self, max_idle: int = 32) -> None:
        self.max_idle = max_idle
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for an item (or about to), not reserved
        self._abandoned: list[_Item] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: list[tuple[_Item, bool, Any]] = []  # results the loop has not taken
        self._wake_pending = False

    async def run(
        self, fn: Callable[[], Any], name: str, returned: Callable[[], None] | None = None
    ) -> Any:
        """Run ``fn`` on a pool thread; cancelling the await abandons (not kills) it.
        ``returned`` is called on the event loop once ``fn`` has returned or raised."""
        self._loop = loop = asyncio.get_running_loop()
        item = _Item(fn, name, loop.create_future(), returned)
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._queue.put(item)
        if spawn:
            threading.Thread(target=self._serve, name="asyncz-task", daemon=True).start()
        try:
            return await item.future
        except asyncio.CancelledError:
            if item.running or item.fn is not None:
                self._abandoned.append(item)
            raise

    def hung(self) -> int:
        """Abandoned tasks still running on their thread."""
        self._abandoned = [i for i in self._abandoned if i.running or i.fn is not None]
        return len(self._abandoned)

    def _serve(self) -> None:
        thread = threading.current_thread()
        while True:
            item = self._queue.get()
            item.running = True
            fn, item.fn = item.fn, None
            thread.name = item.name
            try:
                ok, value = True, contextvars.Context().run(fn)  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - SystemExit from a task is a failure too
                # Drop the traceback: its frames would keep the task's memory (a memory
                # hog's buffers) alive in a cycle until the cycle collector happens to run.
                ok, value = False, exc.with_traceback(None)
            item.running = False
            thread.name = "asyncz-task"
            with self._lock:  # idle before the loop hears of it: its next task reuses us
                stay = self._idle < self.max_idle
                self._idle += stay
            self._hand_back(item, ok, value)
            del fn, item, ok, value  # nothing of this task stays alive on an idle thread
            if not stay:
                return

    def _hand_back(self, item: _Item, ok: bool, value: Any) -> None:
        """Queue a result for the loop; wake the loop unless a wake-up is on its way."""
        queued = wake = False
        for _ in range(3):  # under memory pressure, handing the result back can fail too
            try:
                if not queued:
                    with self._lock:
                        self._done.append((item, ok, value))
                        wake, self._wake_pending = not self._wake_pending, True
                    queued = True
                if wake and self._loop is not None:
                    self._loop.call_soon_threadsafe(self._deliver)
                return
            except RuntimeError:  # the loop is closed: nobody waits for this result
                return
            except MemoryError:
                if not queued:
                    ok, value = False, _OUT_OF_MEMORY
                time.sleep(0.05)

    def _deliver(self) -> None:
        with self._lock:
            done, self._done = self._done, []
            self._wake_pending = False
        for item, ok, value in done:
            if item.returned is not None:
                item.returned()
            if not item.future.done():
                (item.future.set_result if ok else item.future.set_exception)(value)


async def call_task(
    spec: TaskSpec,
    lease: Lease,
    ctx: TaskContext,
    threads: TaskThreads,
    hold: Callable[[str], Callable[[], None] | None],
) -> Any:
    """Run an attempt's task: an ``async`` one on the loop, a sync one on a pool thread (with
    the attempt's log fields and span), whose slot ``hold`` keeps until the thread returns
    (``hold(job_id)`` gives what to call then)."""
    if spec.is_async:
        return await spec.call(lease.payload, ctx)
    attempt = contextvars.copy_context()
    returned = hold(lease.job_id)
    try:
        return await threads.run(
            lambda: attempt.run(spec.call, lease.payload, ctx),
            f"asyncz-job-{lease.job_id}",
            returned,
        )
    except asyncio.CancelledError:
        ctx.cancelled.set()
        raise


class UnstorableResultError(ValueError):
    """The task returned a value that cannot be stored as its JSON result."""


def check_storable(result: Any, max_bytes: int) -> None:
    try:
        text = _STRICT_JSON.encode(result)  # refuses NaN and types JSON has no form for
    except (TypeError, ValueError, RecursionError) as exc:
        raise UnstorableResultError(f"result is not storable as JSON: {exc}") from None
    size = len(text)  # ASCII: dumps escapes every other character
    if size > max_bytes:
        raise UnstorableResultError(
            f"result is {size} bytes of JSON; the limit is {max_bytes} (ASYNCZ_MAX_RESULT_BYTES)"
        )
    # What is left for jsonb to refuse is a NUL in a string, which JSON writes as \u0000: walk
    # the value only when the text holds that sequence (a no-op result costs one dumps).
    problem = unstorable(result) if "\\u0000" in text else None
    if problem:
        raise UnstorableResultError(f"result is not storable as JSON: it {problem}")
