"""Running one task: a sync task on a thread of its own (abandoned, never waited on, at its
timeout), and the check that its result can be stored and read back."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from asyncz.jobs import unstorable

_OUT_OF_MEMORY = MemoryError("the task ran out of memory")  # made now: none may be left later


async def in_thread(fn: Callable[[], Any], name: str) -> Any:
    """Run ``fn`` on a fresh daemon thread; cancelling the await abandons (not kills) it."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def deliver(ok: bool, value: Any) -> None:
        if not future.done():
            (future.set_result if ok else future.set_exception)(value)

    def target() -> None:
        try:
            result = fn()
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a task is a failure too
            # Drop the traceback: its frames would keep the task's memory (a memory hog's
            # buffers) alive in a cycle until the cycle collector happens to run.
            ok, value = False, exc.with_traceback(None)
        else:
            ok, value = True, result
        for _ in range(3):  # under memory pressure, handing the result back can fail too
            try:
                loop.call_soon_threadsafe(deliver, ok, value)
                return
            except RuntimeError:  # the loop is closed: nobody waits for this result
                return
            except MemoryError:
                ok, value = False, _OUT_OF_MEMORY
                time.sleep(0.05)

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future


class UnstorableResultError(ValueError):
    """The task returned a value that cannot be stored as its JSON result."""


def check_storable(result: Any, max_bytes: int) -> None:
    try:
        size = len(json.dumps(result, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError) as exc:
        raise UnstorableResultError(f"result is not storable as JSON: {exc}") from None
    if size > max_bytes:
        raise UnstorableResultError(
            f"result is {size} bytes of JSON; the limit is {max_bytes} (ASYNCZ_MAX_RESULT_BYTES)"
        )
    problem = unstorable(result)
    if problem:
        raise UnstorableResultError(f"result is not storable as JSON: it {problem}")
