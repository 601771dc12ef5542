"""Hostile tasks for the chaos tier, loaded by workers via ``ASYNCZ_TASK_MODULES``."""

from __future__ import annotations

import os
import time
from typing import Any

from asyncz.tasks import task

CHUNK = 32 * 1024 * 1024


@task("chaos_hang", timeout_seconds=2)
def chaos_hang(payload: dict[str, Any]) -> None:
    """Never returns and ignores cancellation (a sync task stuck in a C call, say)."""
    while True:
        time.sleep(0.2)


@task("chaos_exit")
def chaos_exit(payload: dict[str, Any]) -> None:
    """Takes the whole worker process down, as a segfaulting extension would."""
    os._exit(int(payload.get("code", 3)))


@task("chaos_oom")
def chaos_oom(payload: dict[str, Any]) -> int:
    """Allocates (and touches a page of) memory until the allocator gives up."""
    hoard: list[bytearray] = []
    while True:
        chunk = bytearray(CHUNK)
        chunk[0] = 1
        hoard.append(chunk)
        if len(hoard) > 10_000:  # never reached under the test's RLIMIT_AS
            return len(hoard)
