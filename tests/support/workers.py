"""The tests' one worker launcher: ``asyncz.worker.standalone`` in a process group of its own,
configured by the settings' environment form.

A worker writes a line per attempt to stdout (about 100 bytes): a pipe nobody reads while it
runs fills at 64 KiB, about 650 jobs, and the worker's event loop then blocks on the write
with its attempts half done. So by default its output goes to files, read back when it
stops."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
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
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = None,
    text: bool = True,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[Any]:
    """Start one standalone worker; ``env`` adds to the settings' variables. Its output
    goes to temporary files (never a pipe: see the module's docstring) unless ``stdout`` and
    ``stderr`` say where; :func:`stop_worker` returns it."""
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
    # closed by stop_worker
    files = [tempfile.TemporaryFile() if to is None else None for to in (stdout, stderr)]  # noqa: SIM115
    proc = subprocess.Popen(
        cmd,
        env={**settings_env(settings), **(env or {})},
        cwd=REPO,
        stdout=files[0] or stdout,
        stderr=files[1] or stderr,
        text=text,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )
    _output_files[proc.pid] = files
    return proc


# a worker's stdout and stderr files (None: the caller's), by pid
_output_files: dict[int, list[IO[bytes] | None]] = {}


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
    streams = [out, err]
    for i, f in enumerate(_output_files.pop(proc.pid, [])):
        if f is not None:
            f.seek(0)
            streams[i] = f.read().decode(errors="replace")
            f.close()
    return f"{streams[0]}\n{streams[1]}"


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
