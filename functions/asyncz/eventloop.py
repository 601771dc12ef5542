"""The event loop of the workers, the fleet and recovery sandboxes and the ``asyncz dev`` front:
uvloop's where it is installed (the ``server`` extra and the layer ship it on Linux), else
asyncio's. (An api sandbox runs on asyncio's own: :func:`asyncz.composition.sandbox_loop`.) A
module of its own, so the front gets it without importing the drivers (:mod:`asyncz.composition`
does)."""

from __future__ import annotations

import asyncio


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop, uvloop's when available.

    A worker spends a third of its CPU in the event loop's own machinery (per-job tasks,
    futures, timers, psycopg's reader callbacks): with uvloop it drained 18% more no-op jobs
    at 4 processes on 2 cores; the ``asyncz dev`` front spent ~11% less CPU per request
    (BENCHMARKS.md)."""
    try:
        import uvloop
    except ImportError:  # Windows, or a trimmed install: the stdlib loop works the same
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
