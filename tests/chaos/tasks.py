"""Hostile tasks for the chaos tier, loaded by workers via ``ASYNCZ_TASK_MODULES``."""

from __future__ import annotations

import os
import signal
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


def _mark(folder: str, name: str) -> int:
    """Append a line to ``folder/name`` (a side effect that outlives the process); how many."""
    path = os.path.join(folder, name)
    with open(path, "a") as f:
        f.write("x\n")
    with open(path) as f:
        return len(f.readlines())


def _exit_once(folder: str) -> str:
    """The first run takes the whole worker process down mid-task; later runs return."""
    if _mark(folder, "crash") == 1:
        os._exit(3)
    return "survived"


@task("chaos_durable_exit", durable=True)
def chaos_durable_exit(payload: dict[str, Any], ctx: Any) -> list[Any]:
    """Three steps; the worker dies inside the second the first time it runs."""
    folder = payload["folder"]
    before = ctx.step("before", _mark, folder, "before")
    crash = ctx.step("crash", _exit_once, folder)
    after = ctx.step("after", _mark, folder, "after")
    return [before, crash, after]


@task("chaos_page")
def chaos_page(payload: dict[str, Any]) -> int:
    return int(payload["n"])


@task("chaos_fan_out_killed", durable=True)
def chaos_fan_out_killed(payload: dict[str, Any], ctx: Any) -> Any:
    """Spawns ``n`` jobs; the first time, the worker is SIGKILLed before the task suspends on
    their gather (after its spawns, before the attempt ends)."""
    kids = [ctx.spawn("chaos_page", {"n": n}) for n in range(payload["n"])]
    if _mark(payload["folder"], "spawned") == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return ctx.gather(kids, timeout=300)
