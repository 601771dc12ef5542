"""Event loops: the sandbox's long-lived loop every handler runs on, and
:func:`new_event_loop` (uvloop's where it is installed: the ``server`` extra and the layer
ship it on Linux; else asyncio's), which the workers, the fleet and recovery sandboxes and
the ``asyncz dev`` front use. Imports no driver, so the front can use it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop, uvloop's when available: a worker spends much of its CPU in the event
    loop's own machinery (per-job tasks, futures, timers, psycopg's reader callbacks), which
    uvloop runs faster (BENCHMARKS.md, "Measured reasons")."""
    try:
        import uvloop
    except ImportError:  # Windows, or a trimmed install: the stdlib loop works the same
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def sandbox_loop(*, plain: bool = False) -> asyncio.AbstractEventLoop:
    """The sandbox's long-lived event loop, made current for this thread; the first call of
    the sandbox makes it, uvloop's unless ``plain`` asks for asyncio's own.

    The api handler asks for asyncio's: it runs one request's few awaits per invocation, on
    the main thread, where uvloop opens and closes a signal self-pipe at every run and
    re-registers psycopg's socket with epoll at every wait, which costs a submit more CPU
    than it saves (BENCHMARKS.md); a worker's many tasks run faster on uvloop's."""
    global _loop
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop() if plain else new_event_loop()
    asyncio.set_event_loop(_loop)
    return _loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the sandbox's long-lived loop (created at first use)."""
    return sandbox_loop().run_until_complete(coro)
