"""The tests' one worker launcher: ``asyncz.worker.standalone`` in a process group of its own,
configured by the settings' environment form."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.worker.loop import WorkerLoop
from tests.support.settings import settings_env

REPO = Path(__file__).resolve().parents[2]


def start_worker(
    settings: Settings,
    *,
    idle_exit: float = 0,
    seconds: float = 600,
    concurrency: int | None = None,
    env: dict[str, str] | None = None,
    stdout: IO[Any] | int = subprocess.PIPE,
    stderr: IO[Any] | int = subprocess.PIPE,
    text: bool = True,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[Any]:
    """Start one standalone worker; ``env`` adds to the settings' variables."""
    cmd = [
        sys.executable,
        "-m",
        "asyncz.worker.standalone",
        "--seconds",
        str(seconds),
        "--idle-exit",
        str(idle_exit),
    ]
    if concurrency:
        cmd += ["--concurrency", str(concurrency)]
    return subprocess.Popen(
        cmd,
        env={**settings_env(settings), **(env or {})},
        cwd=REPO,
        stdout=stdout,
        stderr=stderr,
        text=text,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )


def stop_worker(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    """Terminate a worker started by :func:`start_worker` (its whole group if it lingers);
    returns its stdout and stderr."""
    if proc.poll() is None:
        proc.terminate()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
    return f"{out}\n{err}"


@asynccontextmanager
async def running_worker(service: JobService, *, concurrency: int = 1) -> AsyncIterator[WorkerLoop]:
    """An in-process worker loop on ``service`` while the block runs; stopped (its attempts
    finished) when it ends."""
    stop = asyncio.Event()
    loop = WorkerLoop(service, remaining_seconds=lambda: 3600, stop=stop, concurrency=concurrency)
    runner = asyncio.create_task(loop.run())
    try:
        yield loop
    finally:
        stop.set()
        await runner
